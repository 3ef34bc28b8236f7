"""Lessons (issue 21): the file format and its round trips, hostile files and links, the operator's folder, the
built-in lessons (valid, every stated number checked on the live model, every slide drawn by the app) and the handout."""

from __future__ import annotations

import html
import json
import logging
import math
import os
import re
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import encoder
from devkit.apptest import app_test, figure_components
from encoder.analysis import embeddings
from tests.app.hostile_lessons import FILES, LINKS, LITERAL_NOTES, lesson, slide, text
from ui import lessons, settings
from ui import pages as registry
from ui.lessons import claims, format, library
from ui.lessons import handouts as handout_module
from ui.lessons.live import open_view

logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
APP = str(Path(__file__).resolve().parents[2] / "app.py")
BUILTINS = lessons.builtin_names()


def assert_sentence(message: str) -> None:
    """One clear sentence: a single line, ending with a full stop, no second sentence, of a readable length."""
    assert isinstance(message, str) and message, message
    assert "\n" not in message and len(message) <= 500, message
    assert message.endswith("."), message
    assert not re.search(r"[.!?] [A-Z]", message.replace("e.g. ", "")), f"more than one sentence: {message}"
    assert "Traceback" not in message and "Error" not in message, message


# ------------------------------------------------------------------------------------------------ pages
def test_the_pages_are_read_from_the_page_registry():
    pages = lessons.pages()
    assert list(pages) == [entry.path for entry in registry.PAGES if entry.path != "lessons"] and len(pages) == 14
    with pytest.raises(ValueError, match="no page 'lessons'"):
        lessons.capture("lessons", {})  # the Lessons page plays lessons: it is no slide's view
    assert [p.path for p in pages.values() if p.default] == ["heatmaps"]
    assert pages["heatmaps"].url == "/" and pages["inside-a-head"].url == "/inside-a-head"
    for page in pages.values():
        assert (Path(APP).parent / page.script).is_file(), page
    # Every page has a main figure for the handout (or says it has none): a new page fails here until it does.
    assert set(handout_module.MAIN_FIGURES) == set(pages)


# --------------------------------------------------------------------------------------------- the format
def test_a_slide_holds_its_view_as_the_url_does():
    view = settings.defaults() | {"layer": 2, "head": 5, "text": "Hello there.", "norm": "pre", "present": True}
    made, notes = lessons.capture("/inside-a-head", settings.to_query(view), title="", note="  Look here.  ")
    assert notes == [] and made.title == "Inside a head" and made.points == (lessons.Point("Look here."),)
    assert made.link() == ("/inside-a-head", {"text": "Hello there.", "norm": "pre", "layer": "2", "head": "5"})
    assert made.values() == view | {"present": False}  # presentation mode is the player's, not the slide's
    assert made.url() == "./inside-a-head?text=Hello%20there.&norm=pre&layer=2&head=5"
    assert made.url("https://class.example.org/app/").startswith("https://class.example.org/app/inside-a-head?")
    default, _ = lessons.capture("", {})
    assert default.link() == ("/", {}) and default.url() == "./"
    long = settings.defaults() | {"text": "A long sentence, said again. " * 80, "layer": 1}
    packed, _ = lessons.capture("diagram", settings.to_query(long))
    assert dict(packed.query)["text"].startswith(settings.PACKED)  # as the app's own link carries it
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(packed.url("http://h/")).query)
    assert settings.defaults() | settings.from_query(query)[0] == long == packed.values()


def test_settings_in_a_file_are_read_as_a_link_reads_them():
    doc = lesson(slide(page="/statistics", query={"layer": 9, "tap": "norm1", "train": True, "dropout": 0.25,
                                                  "head": "99", "bogus": "1", "present": "true"}))
    read, notes = lessons.from_dict(doc)
    assert dict(read.slides[0].query) == {"train": "true", "dropout": "0.25", "layer": "9", "tap": "norm1"}
    assert read.slides[0].page == "statistics"
    assert notes == [
        "Slide 1: 'present' is chosen by whoever plays the lesson, not by a slide; it is ignored.",
        "Slide 1: the setting head='99' is not valid (choose a value from 0 to 15); using 1.",
        "Slide 1: ignored the unknown setting 'bogus'.",
    ]


def test_display_text_is_plain_text_that_wraps():
    shown = lessons.display_text("\u202eevil\u202c <b>x</b> **y**\nnext line\ttab\x00" + " " + "w" * 150)
    assert "\u202e" not in shown and "\u202c" not in shown and "\ufffd" in shown
    assert "<b>x</b> **y**\nnext line    tab\u2400" in shown  # markup kept as text; the line break kept
    long_word = shown.split(" ")[-1]
    assert long_word.replace("\u200b", "") == "w" * 150 and max(map(len, long_word.split("\u200b"))) == 60
    assert lessons.display_text("x" * 100, limit=10) == "x" * 9 + "…"


def _settings_values() -> st.SearchStrategy[dict]:
    def one(setting: settings.Setting) -> st.SearchStrategy:
        if setting.kind is bool:
            return st.booleans()
        if setting.options is not None:
            return st.sampled_from(setting.options)
        if setting.kind is int and setting.lo is not None:
            return st.integers(int(setting.lo), int(setting.hi))
        if setting.kind is float and setting.lo is not None:
            return st.floats(setting.lo, setting.hi).map(lambda x: round(x, 4))
        if setting.form is not None:  # a text of a given form (several heads: "1,4,7")
            return st.from_regex(setting.form[0], fullmatch=True)
        return st.text(max_size=60)
    return st.fixed_dictionaries({}, optional={k: one(s) for k, s in settings.SETTINGS.items() if k != "present"})


TEXTS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=120).map(str.strip).filter(bool)


@st.composite
def checks(draw: st.DrawFn, text: str) -> tuple[str, tuple[format.Check, ...]]:
    """A point's text and checks whose values it states (claims and args as a file may give them)."""
    made = []
    for _ in range(draw(st.integers(0, 3))):
        claim = draw(st.sampled_from(sorted(lessons.CLAIMS)))
        params = lessons.CLAIMS[claim].params
        args = draw(st.dictionaries(st.sampled_from(params) if params else st.nothing(),
                                    st.one_of(st.integers(-3, 60), TEXTS), max_size=len(params)))
        op = draw(st.sampled_from(claims.OPS))
        value = draw(st.from_regex(r"\A-?\d{1,4}(\.\d{1,3})?%?\Z" if op == "shows" else r"\A-?\d{1,3}(\.\d{1,3})?\Z"))
        text = f"{text} {value}"
        made.append(format.Check(claim, value, op, tuple(sorted(args.items()))))
    return text, tuple(made)


@st.composite
def lessons_strategy(draw: st.DrawFn) -> lessons.Lesson:
    """A lesson made through the editing API, as the player makes one, with checks and questions as a file has them."""
    made = lessons.Lesson(title=draw(TEXTS), description=draw(st.one_of(st.just(""), TEXTS)))
    for _ in range(draw(st.integers(0, 6))):
        page = draw(st.sampled_from(list(lessons.pages())))
        view, problems = lessons.capture(page, settings.to_query(draw(_settings_values())), draw(TEXTS), draw(TEXTS))
        assert problems == []
        made = lessons.add_slide(made, view)
        points = []
        for body in draw(st.lists(TEXTS, max_size=3)):
            said, found = draw(checks(body))
            points.append(format.Point(said, found))
        question = draw(st.one_of(st.none(), st.builds(format.Question, TEXTS, st.one_of(st.just(""), TEXTS))))
        last = made.slides[-1]
        slides = (*made.slides[:-1], format.Slide(last.page, last.query, last.title, tuple(points), question))
        made = format.Lesson(made.title, slides, made.description)
    return made


@given(made=lessons_strategy())
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_a_lesson_is_identical_after_export_import_and_after_a_link(made):
    assert lessons.loads(lessons.export_bytes(made)) == (made, [])
    assert lessons.from_link(lessons.to_link(made)) == (made, [])
    assert lessons.from_dict(json.loads(lessons.dumps(made))) == (made, [])


def test_three_views_added_reordered_exported_and_imported_are_identical():
    store = settings.defaults()
    views = [("heatmaps", store | {"view": "layer", "layer": 4}), ("inside-a-head", store | {"query": 7, "head": 2}),
             ("diagram", store | {"model": "custom", "norm": "pre", "final_norm": True})]
    made = lessons.Lesson("My lesson")
    for page, values in views:
        view, notes = lessons.capture(page, settings.to_query(values), note=f"About {page}.")
        assert notes == []
        made = lessons.add_slide(made, view)
    made = lessons.move_slide(made, 2, 0)
    made = lessons.edit_slide(made, 1, title="Layer 4, all heads", points=["First.", "Second."], question=("Why?", "So."))
    made = lessons.edit_lesson(made, title="Week 3", description="Attention, then the diagram.")
    assert [s.page for s in made.slides] == ["diagram", "heatmaps", "inside-a-head"]
    assert made.slides[1].title == "Layer 4, all heads" and made.slides[1].question == lessons.Question("Why?", "So.")
    again, notes = lessons.loads(lessons.export_bytes(made))
    assert (again, notes) == (made, [])
    assert lessons.from_link(lessons.to_link(made)) == (made, [])
    assert lessons.file_name(made) == "week-3.lesson.json"
    shorter = lessons.delete_slide(made, 0)
    assert [s.page for s in shorter.slides] == ["heatmaps", "inside-a-head"] and len(made.slides) == 3


def test_edits_that_cannot_be_made_say_why():
    made = lessons.Lesson("L", (lessons.capture("heatmaps", {})[0],))
    for edit in (lambda: lessons.move_slide(made, 0, 5), lambda: lessons.delete_slide(made, -1),
                 lambda: lessons.edit_slide(made, 0, title="   "), lambda: lessons.edit_slide(made, 0, points=["a"] * 5),
                 lambda: lessons.edit_lesson(made, title="t" * 201), lambda: lessons.capture("nowhere", {}),
                 lambda: lessons.edit_slide(made, 0, points=["p" * 25_000])):
        with pytest.raises(ValueError) as err:
            edit()
        assert_sentence(str(err.value))
    full = lessons.Lesson("L", made.slides * lessons.MAX_SLIDES)
    with pytest.raises(ValueError, match="already has 60 slides"):
        lessons.add_slide(full, made.slides[0])
    big = lessons.Lesson("L", tuple(format.Slide("heatmaps", (), "S", (format.Point("p" * 19_000),)) for _ in range(11)))
    with pytest.raises(ValueError, match="over the 200 kB"):
        lessons.export_bytes(big)
    checked = format.Slide("heatmaps", (), "S", (format.Point("It is 32.", (format.Check("d_head", "32"),)),))
    kept = lessons.edit_slide(lessons.Lesson("L", (checked,)), 0, points=["It is 32.", "New."])
    assert kept.slides[0].points[0] == checked.points[0] and kept.slides[0].points[1].checks == ()


# -------------------------------------------------------------------------------------- the hostile corpus
REFUSED = {"empty", "not_json", "json_list", "json_string", "json_null", "no_format", "other_format", "no_version",
           "version_text", "version_bool", "version_2", "version_huge", "too_many_slides", "too_large",
           "deep_nesting", "deep_nesting_in_query", "invalid_utf8", "utf16", "slides_not_list"}


@pytest.mark.parametrize("content", [c for _, c in FILES], ids=[i for i, _ in FILES])
def test_a_hostile_lesson_file_gets_clear_sentences_and_nothing_breaks(content, request):
    name = request.node.callspec.id
    try:
        read, notes = lessons.loads(content)
    except ValueError as err:
        assert name in REFUSED, f"{name} was refused: {err}"
        assert_sentence(str(err))
        return
    assert name not in REFUSED, f"{name} was read"
    for note in notes:
        assert_sentence(note)
    assert lessons.loads(lessons.dumps(read)) == (read, [])  # what was read is canonical
    assert all(1 <= len(s.title) <= format.MAX_TITLE and len(s.points) <= 4 for s in read.slides)
    assert all(s.page in lessons.pages() for s in read.slides)


def test_the_hostile_corpus_says_what_it_repaired():
    by_id = dict(FILES)
    _, notes = lessons.loads(by_id["bad_settings"])
    said = " ".join(notes)
    for key in ("layer", "head", "view", "d_model", "dropout", "list", "nested", "present", "no_such", "<b>", "seed",
                "scale"):
        assert repr(key) in said or f" {key}=" in said, key
    assert "cut to its first 5,000 characters" in said and "ckpt:../../etc" not in said  # a model is checked on use
    read, notes = lessons.loads(by_id["bad_checks"])
    assert len(notes) == 10 and read.slides[0].points[0].checks == ()  # every broken check left out, the text kept
    assert read.slides[0].points[0].text == "It is 0.68 here."
    read, notes = lessons.loads(by_id["only_unknown_pages"])
    assert read.slides == () and "which this app does not have" in notes[0]
    read, notes = lessons.loads(by_id["lone_surrogates"])
    assert read.title == "\ufffd half" and read.slides[0].points[0].text == "\ufffd alone"
    read, _ = lessons.loads(by_id["huge_title"])
    assert len(read.title) == 200 and len(read.slides[0].title) == 200
    read, notes = lessons.loads(by_id["sixty_thousand_points"])
    assert read.slides[0].points == () and any("60,000" in n or "60000" in n for n in notes)


def test_notes_stay_literal_text():
    read, notes = lessons.loads(dict(FILES)["literal_notes"])
    assert notes == []
    first, second = read.slides
    assert read.title == LITERAL_NOTES[2].strip() and first.title == LITERAL_NOTES[0]
    assert [p.text for p in first.points] == LITERAL_NOTES[:4]
    assert first.question == lessons.Question(LITERAL_NOTES[4], LITERAL_NOTES[5])
    assert [p.text for p in second.points] == LITERAL_NOTES[6:]


@pytest.mark.parametrize("link", [c for _, c in LINKS], ids=[i for i, _ in LINKS])
def test_a_hostile_lesson_link_gets_a_clear_sentence(link, request):
    name = request.node.callspec.id
    started = time.perf_counter()
    try:
        read, notes = lessons.from_link(link)
    except ValueError as err:
        assert name != "url_with_lesson", err
        assert_sentence(str(err))
        if name == "zip_bomb":
            assert "more than 200 kB" in str(err)
        return
    finally:
        assert time.perf_counter() - started < 5  # a bomb is stopped at the bound, not inflated
    assert name == "url_with_lesson" and notes == [] and read.slides[0].page == "heatmaps"


def test_open_lesson_takes_names_folders_and_links():
    link = lessons.to_link(lessons.load_builtin("encoder-layer"))
    assert lessons.open_lesson(link) == (lessons.load_builtin("encoder-layer"), [])
    for ref in ("", "no-such-lesson", "folder:nothing", "../encoder-layer", "~!"):
        with pytest.raises(ValueError) as err:
            lessons.open_lesson(ref)
        assert_sentence(str(err.value))


# ---------------------------------------------------------------------------------------- operator folder
def test_the_operators_folder_offers_lessons_by_name_only(tmp_path, monkeypatch):
    root, outside = tmp_path / "lessons", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    good = text(lesson(slide(title="Week 1")))
    (root / "week-1.json").write_bytes(good)
    (root / "broken.json").write_bytes(b"{")
    (root / "huge.json").write_bytes(b" " * (format.MAX_BYTES + 10))
    (root / "notes.txt").write_bytes(good)
    (root / ".hidden.json").write_bytes(good)
    (root / "folder.json").mkdir()
    (outside / "secret.json").write_bytes(good)
    (root / "escape.json").symlink_to(outside / "secret.json")
    (root / "alias.json").symlink_to(root / "week-1.json")
    before = {p.name: (p.lstat().st_mtime_ns, p.lstat().st_size) for p in root.iterdir()}

    monkeypatch.delenv(lessons.LESSONS_ENV, raising=False)
    assert lessons.operator_names() == []
    with pytest.raises(ValueError, match=lessons.LESSONS_ENV):
        lessons.load_operator("week-1")
    monkeypatch.setenv(lessons.LESSONS_ENV, str(root))
    assert lessons.operator_names() == ["alias", "broken", "huge", "week-1"]
    read, notes = lessons.load_operator("week-1")
    assert notes == [] and read.slides[0].title == "Week 1"
    assert lessons.open_lesson("folder:week-1") == (read, [])
    for name in ("escape", "../outside/secret", "/etc/passwd", "week-1.json", "notes", ".hidden", "folder", "", "a" * 65):
        with pytest.raises(ValueError) as err:
            lessons.load_operator(name)
        assert_sentence(str(err.value))
    for name, says in (("broken", "not valid JSON"), ("huge", "over the 200 kB")):
        with pytest.raises(ValueError, match=says):
            lessons.load_operator(name)
    offered = [(e.ref, e.source) for e in lessons.catalogue()]
    assert offered[:5] == [(n, "built-in") for n in BUILTINS]
    assert offered[5:] == [("folder:alias", "folder"), ("folder:week-1", "folder")]  # unreadable ones are left out
    lessons.edit_lesson(read, title="My copy")  # editing makes a copy in memory
    assert {p.name: (p.lstat().st_mtime_ns, p.lstat().st_size) for p in root.iterdir()} == before  # read-only


def refusal(data: bytes) -> str:
    """The loader's sentence for a file's content."""
    with pytest.raises(ValueError) as err:
        lessons.loads(data)
    return str(err.value)


def test_the_folder_names_each_file_it_leaves_out_and_what_to_change(tmp_path, monkeypatch):
    root, outside = tmp_path / "lessons", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    good = text(lesson(slide(), title="Week 1"))
    huge = b" " * (format.MAX_BYTES + 10)
    other = text({"format": "slides-of-another-app", "version": 1})
    for file, data in (("week-1.json", good), ("broken.json", b'{"format": '), ("other.json", other),
                       ("huge.json", huge), ("my lesson.json", good), ("Intro.JSON", good), ("tab\there.json", good),
                       ("README.txt", b"Lessons for week 1."), (".DS_Store", b"\0"), ("._week-1.json", b"\0\5")):
        (root / file).write_bytes(data)
    (root / "drafts.json").mkdir()  # a folder is no lesson file, whatever its name
    (outside / "secret.json").write_bytes(good)
    (root / "escape.json").symlink_to(outside / "secret.json")
    monkeypatch.setenv(lessons.LESSONS_ENV, str(root))

    said = lessons.left_out()
    for sentence in said:
        assert_sentence(sentence)
    link = "It is a link to a file outside the lessons folder (or to none), which is never followed; copy the lesson "
    assert said == [f"“{file}” in the lessons folder was left out: {why}" for file, why in (
        ("Intro.JSON", library.BAD_NAME),  # the loader opens NAME.json only
        ("broken.json", refusal(b'{"format": ')),
        ("escape.json", link + "file itself into the folder."),
        ("huge.json", refusal(huge)),
        ("my lesson.json", library.BAD_NAME),
        ("other.json", refusal(other)),
        ("tab\u2409here.json", library.BAD_NAME),  # a control character shown as its symbol
    )]
    assert "not valid JSON" in said[1] and "not an Encoder Explorer lesson" in said[5] and "200 kB" in said[3]
    assert [(e.ref, e.title) for e in lessons.catalogue()[len(BUILTINS):]] == [("folder:week-1", "Week 1")]

    (root / "broken.json").write_bytes(text(lesson(slide(), title="Fixed")))  # fixed: offered at once, not said
    assert not any("broken.json" in s for s in lessons.left_out())
    assert [e.ref for e in lessons.catalogue()[len(BUILTINS):]] == ["folder:broken", "folder:week-1"]
    monkeypatch.delenv(lessons.LESSONS_ENV)
    assert lessons.left_out() == []


def test_the_files_left_out_are_said_ten_at_most(tmp_path, monkeypatch):
    for n in range(13):
        (tmp_path / f"bad {n:02}.json").write_bytes(b"{}")
    (tmp_path / os.fsdecode(b"\xff.json")).write_bytes(b"{}")  # a name that is not UTF-8
    monkeypatch.setenv(lessons.LESSONS_ENV, str(tmp_path))
    said = lessons.left_out()
    assert len(said) == library.MAX_LEFT_OUT + 1 and said[-1] == "And 4 more lesson files were left out."
    assert said[0].startswith("“bad 00.json”") and said[9].startswith("“bad 09.json”")
    for file in tmp_path.glob("bad *.json"):
        file.unlink()
    assert lessons.left_out() == [f"“\ufffd.json” in the lessons folder was left out: {library.BAD_NAME}"]


def test_a_folder_the_server_cannot_list_leaves_the_built_ins_and_says_so(tmp_path, monkeypatch):
    # The tests run as root, which lists any folder, so the refusal is the operating system's answer played back.
    (tmp_path / "week-1.json").write_bytes(text(lesson(slide(), title="Week 1")))
    monkeypatch.setenv(lessons.LESSONS_ENV, str(tmp_path))
    assert [e.title for e in lessons.catalogue() if e.source == "folder"] == ["Week 1"]
    listing = Path.iterdir

    def refused(self):
        if self == tmp_path.resolve():
            raise PermissionError(13, "Permission denied", str(self))
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", refused)
    assert [e.ref for e in lessons.catalogue()] == BUILTINS
    assert lessons.operator_names() == []
    assert lessons.left_out() == ["The server cannot list the lessons folder (Permission denied), so none of its "
                                  "lessons is offered; check the folder's permissions."]


# -------------------------------------------------------------------------------------- built-in lessons
def test_the_built_in_lessons_are_valid():
    titles = []
    for name in BUILTINS:
        read, notes = lessons.loads((library.BUILTIN_DIR / f"{name}.json").read_bytes())
        assert notes == [], (name, notes)
        assert 5 <= len(read.slides) <= 10, name
        titles.append(read.title)
        for s in read.slides:
            assert 1 <= len(s.points) <= 4, (name, s.title)
            assert format.view_query(dict(s.query)) == (s.query, [])
            assert s.page in lessons.pages() and lessons.page_of(s).script.endswith(".py")
            assert lessons.slide_problems(s) == []
    assert len(set(titles)) == 5
    assert [(e.title, e.slides) for e in lessons.catalogue()][:5] == [
        (lessons.load_builtin(n).title, len(lessons.load_builtin(n).slides)) for n in BUILTINS]
    assert any("Pre-LN versus Post-LN" in t for t in titles)


NUMBER = r"(?<![\w^])-?\d[\d,]*(?:\.\d+)?(?:e-\d+)?%?"
# Numbers a built-in point may state without a check: definitions that hold for every model, and facts about other
# models and libraries (from the seed chapters), by (lesson, slide, number).
UNCHECKED = {
    ("encoder-layer", "Self-attention: every token reads every token", "1"): "a softmax row sums to 1",
    ("encoder-layer", "Self-attention: every token reads every token", "0"): "a causal mask's share",
    ("encoder-layer", "Add & Norm, measured", "0"): "LayerNorm's target mean",
    ("encoder-layer", "Add & Norm, measured", "1"): "LayerNorm's target std",
    ("training-vs-inference", "Eval mode: dropout does nothing", "0"): "dropout probability 0",
    ("training-vs-inference", "Training mode: dropout on", "1"): "the 1 / (1 − p) rescaling",
    ("training-vs-inference", "LayerNorm's epsilon", "1e-5"): "PyTorch's default epsilon",
    ("training-vs-inference", "LayerNorm's epsilon", "1e-6"): "Keras's epsilon (seed 002)",
    ("training-vs-inference", "LayerNorm's epsilon", "0"): "variance close to 0",
    ("stack-bert-cls", "A stack of identical layers", "6"): "the original Transformer's depth (seed 003)",
    ("stack-bert-cls", "A stack of identical layers", "12"): "BERT-base's depth",
    ("stack-bert-cls", "A stack of identical layers", "24"): "BERT-large's depth",
    ("stack-bert-cls", "One vector per sentence: mean pooling", "1"): "unit length",
    ("pre-ln-post-ln", "Same words, other order", "1"): "a cosine of exactly 1",
}


def test_every_number_a_built_in_lesson_states_is_checked():
    unchecked = []
    for name in BUILTINS:
        for s in lessons.load_builtin(name).slides:
            stated = {c.value for p in s.points for c in p.checks} | {str(v) for p in s.points for c in p.checks
                                                                      for _, v in c.args}
            parts = {part for v in stated for part in v.split(" × ")}
            for n in re.findall(NUMBER, s.title):
                assert n.rstrip(",") in stated | parts, (name, s.title, n)
            for p in s.points:
                mine = {c.value for c in p.checks} | {str(v) for c in p.checks for _, v in c.args}
                mine |= {part for v in mine for part in v.split(" × ")}
                unchecked += [(name, s.title, n.rstrip(",")) for n in re.findall(NUMBER, p.text)
                              if n.rstrip(",") not in mine and (name, s.title, n.rstrip(",")) not in UNCHECKED]
    assert unchecked == []


@pytest.mark.parametrize("name", BUILTINS)
def test_every_checked_number_holds_on_the_live_model(name):
    count = 0
    for s in lessons.load_builtin(name).slides:
        verdicts = lessons.verify(s)
        assert [v.sentence() for v in verdicts if not v.ok] == [], s.title
        count += len(verdicts)
    assert count >= 8, f"{name} checks only {count} numbers"


def test_a_check_fails_when_the_number_is_wrong():
    s = lessons.load_builtin("encoder-layer").slides[1]
    point = s.points[2]
    wrong = format.Point(point.text.replace("0.68", "0.86"), tuple(
        format.Check(c.claim, "0.86", c.op, c.args) if c.value == "0.68" else c for c in point.checks))
    verdicts = lessons.verify(format.Slide(s.page, s.query, s.title, (wrong,)))
    assert [(v.check.claim, v.ok, v.shown) for v in verdicts] == [("layer", True, "3"), ("head", True, "1"),
                                                                  ("weight", False, "0.68")]
    bound = format.Check("row_sum_gap", "1e-9", "below")
    shown, ok = claims.evaluate(bound, open_view(s.values()))  # float32 rounding: its digits vary between CPUs
    assert not ok and re.fullmatch(r"\d\.\d\de-\d\d", shown) and 1e-9 < float(shown) < 1e-6, shown  # 1.91e-07, 1.66e-07 seen
    missing = format.Check("weight", "0.1", "shows", (("key", "zebra"), ("query", "it")))
    shown, ok = claims.evaluate(missing, open_view(s.values()))
    assert not ok and "not in this sentence" in shown


def test_every_claim_survives_any_args_a_file_may_give():
    """A user's lesson may give any claim any args: the verdict says it cannot be computed, nothing is raised."""
    live = open_view(settings.defaults() | {"ablate": "3.1"})
    for name, claim in lessons.CLAIMS.items():
        tries = [dict.fromkeys(claim.params, bad) for bad in ("x", "", -1, 10**6, 3.5)] if claim.params else [{}]
        for args in tries:
            shown, ok = claims.evaluate(format.Check(name, "1", "shows", tuple(sorted(args.items()))), live)
            assert isinstance(shown, str) and isinstance(ok, bool), name
    broken = open_view(settings.defaults() | {"model": "ckpt:gone"})
    shown, ok = claims.evaluate(format.Check("d_model", "384"), broken)
    assert not ok and "not installed on this server" in shown


def test_numbers_are_compared_as_they_are_written():
    like = claims.written_like
    assert like(0.6768, "0.68") == "0.68" and like(0.2054, "21%") == "21%" and like(1536, "1,536") == "1,536"
    assert like(22.565376, "22.6") == "22.6" and like(-0.0018, "0.00") == "0.00" and like(-0.018, "-0.02") == "-0.02"
    assert like(0.000676, "0.0007") == "0.0007" and like(384, "384") == "384" and like("384 × 384", "384 × 384")
    assert like(0.105, "10.5%") == "10.5%" and like(12, "twelve") == "12"


def test_claims_match_an_independent_computation():
    model = encoder.load_pretrained()
    text = settings.DEFAULT_SENTENCE
    trace = encoder.run(model, text)
    live = open_view(settings.defaults())
    compute = {name: c.compute for name, c in lessons.CLAIMS.items()}
    it, animal = trace.tokens.index("it"), trace.tokens.index("animal")
    assert compute["weight"](live, query="it", key="animal") == pytest.approx(float(trace.attention[3, 1, it, animal]))
    a = trace.attention[3, 1].double().numpy()
    right = sum(a[i, j] for i in range(len(a)) for j in range(i + 1, len(a)))  # weight on keys after their query
    assert compute["right_share"](live) == pytest.approx(right / a.sum())
    assert compute["d_head"](live) == model.cfg.d_model // model.cfg.num_heads == 32
    layer0 = model.layers[0]
    ffn = sum(p.numel() for p in layer0.ffn.parameters())
    assert compute["param_share"](live, part="ffn") == pytest.approx(ffn / sum(p.numel() for p in layer0.parameters()))
    assert compute["params_total"](live) == pytest.approx(sum(p.numel() for p in model.parameters()) / 1e6)
    w_o = model.layers[3].attn.out
    out = torch.nn.functional.linear(trace.heads[3]["concat"], w_o.weight, w_o.bias)  # (T, D): concat · W_Oᵀ + b
    assert float((out - trace.taps[3]["attn"]).abs().max()) < 1e-5 and compute["w_o_gap"](live) < 1e-5
    sentences = [text, *settings.MORE_SENTENCES]
    vectors = [embeddings.sentence_embedding(encoder.run(model, s, max_tokens=256)).double() for s in sentences]
    assert compute["similarity"](live, a=1, b=2) == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-6)
    trained = open_view(settings.defaults() | {"train": True})
    p = model.cfg.dropout
    n = trace.seq_len * model.cfg.d_model
    assert abs(compute["dropped_share"](trained) - p) < 4 * math.sqrt(p * (1 - p) / n)  # a binomial draw of rate p


def test_the_config_answer_is_what_the_sidebar_says():
    """The multi-head lesson's last answer quotes the sidebar's refusal of d_model 256 with 3 heads."""
    said = settings.config_problem({"model": "custom", "d_model": 256, "num_heads": 3}, ValueError(""))
    answer = lessons.load_builtin("multi-head-attention").slides[-1].question.answer
    assert "d_model 192 or 384" in said and "Heads 2 or 4" in said
    assert "d_model 192 or 384, or 2 or 4 heads" in answer


@pytest.mark.parametrize("name", BUILTINS)
def test_every_built_in_slide_is_drawn_by_the_app(name):
    """Each slide's settings in the store (as the player will put them), its page run by the app: no error."""
    at = app_test(timeout=180).run()
    for s in lessons.load_builtin(name).slides:
        at.session_state["settings"] = s.values()
        at.switch_page(lessons.page_of(s).script).run()
        assert not at.exception, (s.title, [e.value for e in at.exception])
        assert not at.error, (s.title, [e.value for e in at.error])
        drawn = at.get("plotly_chart") or at.get("graphviz_chart") or figure_components(at)  # the map, the head view
        assert drawn, f"{s.title}: no figure on {s.page}"


def test_a_slide_whose_model_is_missing_says_so_and_the_rest_still_works():
    gone = format.Slide("heatmaps", (("model", "ckpt:week3-model"),), "Gone")
    assert lessons.slide_problems(gone) == [
        "The model 'ckpt:week3-model' is not available here; using all-MiniLM-L6-v2 (pretrained)."]
    with pytest.raises(ValueError) as err:
        lessons.main_figure("heatmaps", gone.values())
    assert_sentence(str(err.value))
    assert "“Checkpoint: week3-model”" in str(err.value)
    assert lessons.verify(gone) == []
    assert lessons.main_figure("check", settings.defaults()) is None


# ------------------------------------------------------------------------------------------------ handout
VOID = {"meta", "img", "br", "hr", "input", "link", "col", "area", "base", "source", "wbr", "embed", "track"}


class Page(HTMLParser):
    """The handout as a browser's parser sees it: tags must balance; script and text contents are collected."""

    def __init__(self, data: bytes):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self.doctype = ""
        self.feed(data.decode("utf-8"))
        self.close()

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] == "script":
            attrs = next(a for t, a in reversed(self.tags) if t == "script")
            self.scripts.append((attrs, data))
        elif not self.stack or self.stack[-1] != "style":
            self.text.append(data)


def check_handout(data: bytes, made: lessons.Lesson, base: str = "") -> Page:
    """Everything the issue asks of a handout, on its bytes."""
    assert len(data) <= handout_module.MAX_HANDOUT_BYTES
    page = Page(data)
    assert page.doctype.lower() == "doctype html" and page.problems == [] and page.stack == []
    bundle = handout_module.plotly_js()
    assert data.count(bundle.encode("utf-8")) == 1  # plotly.js embedded exactly once
    assert data.count(b"* plotly.js v") == 1
    assert [t for t, a in page.tags if t == "script" and "src" in a] == [] and "link" not in [t for t, _ in page.tags]
    assert all(a["src"].startswith("data:image/svg+xml;base64,") for t, a in page.tags if t == "img")
    rest = data.decode("utf-8").replace(bundle, "")
    urls = re.findall(r"https?://[^\s\"'<>]+", rest)
    assert all(u.startswith(base) for u in urls) if base else urls == [], urls  # nothing from a CDN, nothing fetched
    figures = [json.loads(body) for attrs, body in page.scripts if attrs.get("type") == "application/json"]
    assert all(isinstance(f["data"], list) and "layout" in f for f in figures)
    shown = "".join(page.text)
    for s in made.slides:  # every text as the reader sees it: escaped, so it displays literally
        for said in (s.title, *(p.text for p in s.points), *((s.question.ask, s.question.answer) if s.question else ())):
            assert html.escape(lessons.display_text(said), quote=True).encode() in data
            assert lessons.display_text(said) in shown
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert links == [s.url(base) for s in made.slides]
    return page


@pytest.mark.parametrize("name", BUILTINS)
def test_the_handout_of_each_built_in_lesson(name):
    made = lessons.load_builtin(name)
    data = lessons.handout(made)
    page = check_handout(data, made)
    figures = sum(a.get("type") == "application/json" for a, _ in page.scripts) + sum(t == "img" for t, _ in page.tags)
    assert figures == len(made.slides)  # every built-in slide is on a page with a figure, and it was drawn
    assert b'class="missing' not in data


def hostile_lesson() -> lessons.Lesson:
    read, _ = lessons.loads(dict(FILES)["literal_notes"])
    gone = format.Slide("heatmaps", (("model", "ckpt:week3-model"),), "A model that is not here")
    quiz = format.Slide("check", (), "The quiz", (format.Point("No figure here."),))
    return lessons.Lesson(read.title, (*read.slides, gone, quiz), LITERAL_NOTES[0])


def test_a_handout_keeps_hostile_notes_as_text():
    made = hostile_lesson()
    data = lessons.handout(made, base_url="https://class.example.org/app/")
    check_handout(data, made, base="https://class.example.org/app/")
    assert b"<script>alert(1)" not in data and b"<img src=x" not in data and "\u202e".encode() not in data
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in data
    assert b"is not installed on this server" in data and b"This page has no figure" in data
    for bad in ("javascript:alert(1)", "//cdn.example.org/", "ftp://x"):
        with pytest.raises(ValueError) as err:
            lessons.handout(made, base_url=bad)
        assert_sentence(str(err.value))


@pytest.mark.browser
def test_a_handout_opens_offline_in_chromium(browser, tmp_path):
    made = hostile_lesson()
    made = lessons.Lesson(made.title, (*lessons.load_builtin("encoder-layer").slides[:3], *made.slides), made.description)
    path = tmp_path / "handout.html"
    path.write_bytes(lessons.handout(made))
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    requests, dialogs, errors = [], [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        page.wait_for_function("[...document.querySelectorAll('.figure[id]')].every(f => f.querySelector('.main-svg'))",
                               timeout=60_000)
        assert page.locator(".js-plotly-plot").count() == 4 and page.locator("img").count() == 1
        assert page.evaluate("document.querySelector('img').naturalWidth") > 0  # the layer diagram's SVG decoded
        body = page.inner_text("body")
        for note in LITERAL_NOTES[:2]:
            assert note in body
        assert page.locator("script").count() == 2 + 4  # plotly.js, the drawing code, and four figures' data
        assert dialogs == [] and errors == []
        assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    finally:
        page.close()
    assert os.path.getsize(path) <= handout_module.MAX_HANDOUT_BYTES


def test_a_slide_under_a_measure_prints_that_measure_and_why_similar_prints_its_attribution():
    """The handout's figure is the slide's view: the Measure chosen on the map, the attribution of Why are these
    similar? (each checked against the library's own numbers)."""
    from encoder.analysis.attribution import attribute, similarity_target
    from encoder.analysis.measures import MEASURES

    values = settings.defaults() | dict(measure="value", layer=2, head=3, avg=False, view="head")
    live = open_view(values)
    fig = lessons.main_figure("heatmaps", values)
    maps = MEASURES["value"].compute(live.frame.model, live.trace)
    assert fig.layout.title.text.startswith(f"{MEASURES['value'].label}, layer 2, head 3")
    assert torch.allclose(torch.tensor(fig.data[0].z, dtype=torch.float32), maps.heads[2, 3].float(), atol=1e-6)
    averaged = lessons.main_figure("heatmaps", values | dict(measure="alti"))
    assert averaged.layout.title.text.startswith(f"{MEASURES['alti'].label}, layer 2, whole layer")

    why = settings.defaults() | dict(target="similarity", method="gxi")
    fig = lessons.main_figure("why-similar", why)
    trace = open_view(why).trace
    want = attribute(open_view(why).frame.model, trace, similarity_target(why["text_b"], why["pool"]), "gxi").scores
    assert fig.layout.title.text.startswith("Gradient × Input toward the similarity"), fig.layout.title.text
    cells = [v for row in fig.data[0].z for v in row if v is not None]  # sentence 1, a blank line, sentence 2
    assert torch.allclose(torch.tensor(cells[:trace.seq_len], dtype=torch.float64), want.double(), atol=1e-9)
    assert len(cells) > trace.seq_len  # the second sentence's tokens too
    with pytest.raises(ValueError, match="choose one from 0 to"):
        lessons.main_figure("why-similar", why | dict(target="token", token=400))
