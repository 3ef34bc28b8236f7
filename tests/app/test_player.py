"""The lesson player and your own lesson (issue 21) through AppTest: the Lessons page, Play, Next and Previous, Back
to the slide, Leave lesson, every built-in slide played, "Add this view", editing, export and import, the handout,
and hostile lessons, links and slides. The keys and the file opener run in Chromium (test_player_browser.py)."""

from __future__ import annotations

import json
import logging

import pytest
from streamlit.testing.v1 import AppTest

from devkit.apptest import app_test, figure_components, text_box
from tests.app.hostile_lessons import FILES, LINKS, LITERAL_NOTES, lesson, packed, slide, text
from ui import authoring, lessons, literal, player, settings, state
from ui.lessons import format

logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
LESSONS = "pages/lessons.py"
BUILTINS = lessons.builtin_names()
FIGURES = ("plotly_chart", "graphviz_chart")


def start(params: dict | None = None, page: str | None = None) -> AppTest:
    at = app_test(params, 180).run()
    if page is not None:
        go_to(at, page)
    assert_clean(at)
    return at


def go_to(at: AppTest, page: str) -> AppTest:
    """Open a page as the sidebar does. AppTest then keeps asking for that page on every later run, where a browser
    follows the app's own page switches (a lesson's Next): forget the choice once the page has run."""
    at.switch_page(page).run()
    at._page_hash = ""
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def store(at: AppTest) -> dict:
    return at.session_state[state.STORE]


def press(at: AppTest, label: str, n: int = 0) -> AppTest:
    """Click the n-th button labelled `label` and run."""
    found = [b for b in at.button if b.label == label]
    assert len(found) > n, f"no button {label!r} among {[b.label for b in at.button]}"
    found[n].click().run()
    assert_clean(at)
    return at


def labels(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def shown_title(at: AppTest) -> str:
    """The first title on screen, unescaped (the player escapes every Markdown character of a slide's title)."""
    return at.title[0].value.replace("\\", "")


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def shared_link(at: AppTest) -> str:
    """The link the Lessons page offers to share: the data of its Copy link box (ui/copy_link.js)."""
    boxes = [e for e in at.get("bidi_component") if e.proto.component_name.endswith(".copy_link")]
    assert len(boxes) == 1, f"{len(boxes)} link boxes on the page"
    return json.loads(boxes[0].proto.json)["link"]


def own(at: AppTest) -> lessons.Lesson:
    return store(at).get(player.OWN) or lessons.Lesson("Your lesson")


def on_slide(at: AppTest, made: lessons.Lesson, number: int) -> None:
    """The store holds slide `number`'s view (the player's settings aside) and its title is the page's title."""
    s = made.slides[number - 1]
    assert store(at)["slide"] == number and store(at)["present"] is True
    assert player.view_of(store(at)) == player.view_of(player.slide_values(s)), s.title
    assert shown_title(at) == lessons.display_text(s.title)
    assert "Back to the slide" not in labels(at), s.title  # the view is the slide's own


# ------------------------------------------------------------------------------------------------ playing
def test_the_lessons_page_offers_every_lesson_and_plays_one():
    at = start(page=LESSONS)
    box = at.selectbox(key="w:lesson")
    assert box.options == [lessons.load_builtin(n).title for n in BUILTINS] + ["Your lesson"]
    assert box.value == BUILTINS[0] and store(at)["lesson"] == BUILTINS[0]  # the first lesson on offer
    box.set_value("pre-ln-post-ln").run()
    made = lessons.load_builtin("pre-ln-post-ln")
    first = [e.label for e in at.expander if e.label.startswith("1\\.")]
    assert first == [f"1\\. {literal(made.slides[0].title)} · Data flow"]
    press(at, "Play")
    on_slide(at, made, 1)
    assert at.get("graphviz_chart"), "the first slide's diagram"
    previous = next(b for b in at.button if b.label == "Previous")
    assert previous.disabled and "Leave presentation" not in labels(at)  # a lesson's way out is Leave lesson
    for number in range(2, len(made.slides) + 1):
        press(at, "Next")
        on_slide(at, made, number)
    assert next(b for b in at.button if b.label == "Next").disabled
    press(at, "Previous")
    on_slide(at, made, len(made.slides) - 1)
    query = dict(at.query_params)
    assert query["lesson"] == "pre-ln-post-ln" and query["slide"] == str(len(made.slides) - 1)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_built_in_slide_plays_with_its_figure_and_no_error(name):
    made = lessons.load_builtin(name)
    at = start({"lesson": name}, page=LESSONS)
    press(at, "Play")
    for number, s in enumerate(made.slides, 1):
        if number > 1:
            press(at, "Next")
        on_slide(at, made, number)
        assert not at.error and not at.warning, (s.title, [e.value for e in at.error], [w.value for w in at.warning])
        assert any(at.get(kind) for kind in FIGURES) or figure_components(at), f"{s.title}: no figure on {s.page}"


def test_back_to_the_slide_after_a_live_change_and_leaving_keeps_the_view():
    made = lessons.load_builtin("pre-ln-post-ln")
    at = start({"lesson": "pre-ln-post-ln", "slide": str(len(made.slides))}, page=LESSONS)
    press(at, "Play from here", len(made.slides) - 1)  # the last slide's own button
    on_slide(at, made, len(made.slides))
    text_box(at, "text").input("A student's sentence about a dog.").run()  # answering a question live
    assert store(at)["text"] == "A student's sentence about a dog." and store(at)["slide"] == len(made.slides)
    assert "Back to the slide" in labels(at)
    press(at, "Back to the slide")
    on_slide(at, made, len(made.slides))
    assert store(at)["text"] == made.slides[-1].values()["text"]
    press(at, "Previous")
    go_to(at, "pages/heatmaps.py")  # another page, during the lesson: the bar stays
    assert "Back to the slide" in labels(at) and store(at)["slide"] == len(made.slides) - 1
    press(at, "Back to the slide")
    on_slide(at, made, len(made.slides) - 1)
    kept = dict(store(at))
    press(at, "Leave lesson")
    after = store(at)
    assert after["slide"] == 0 and after["present"] is False
    assert player.view_of(after) == player.view_of(kept)  # the slide's view stays in place
    assert "Leave lesson" not in labels(at) and at.title[0].value == "Encoder Explorer"


def test_talking_points_fold_and_the_answer_is_revealed_on_request():
    made = lessons.load_builtin("encoder-layer")
    asked = next(n for n, s in enumerate(made.slides, 1) if s.question is not None and s.question.answer)
    s = made.slides[asked - 1]
    at = start({"lesson": "encoder-layer"}, page=LESSONS)
    press(at, "Play")
    while store(at)["slide"] < asked:
        press(at, "Next")
    assert lessons.display_text(s.points[0].text) not in " ".join(texts(at))  # folded at first
    press(at, "Talking points · question")
    shown = texts(at)
    assert [f"•  {lessons.display_text(p.text)}" for p in s.points] == shown[: len(s.points)]
    assert lessons.display_text(s.question.ask) in shown and lessons.display_text(s.question.answer) not in shown
    press(at, "Show the answer")
    assert lessons.display_text(s.question.answer) in texts(at) and store(at)["answer"] is True
    press(at, "Next")
    assert store(at)["answer"] is False and store(at)["points"] is True  # the fold is kept, the answer hidden again


# --------------------------------------------------------------------------------------------- your own lesson
def add_view(at: AppTest, title: str = "", note: str = "") -> None:
    box = next(e for e in at.sidebar.expander if e.label == "Add this view to a lesson")
    if not any(w.key == authoring.ADD_TITLE for w in at.text_input):  # the box is closed: its form is not built
        at.session_state[box.proto.id.split("-", 2)[2]] = True  # what a click on it sets ("$$ID-<hash>-<key>")
        at.run()
    at.text_input(key=authoring.ADD_TITLE).input(title)
    at.text_area(key=authoring.ADD_NOTE).input(note)
    press(at, "Add this view")


def test_views_from_three_pages_edited_exported_and_imported_are_identical():
    at = start({"layer": "2", "head": "5"})
    add_view(at, "Head 5", "<b>look</b> **here**")
    assert at.success and "slide 1 of your lesson" in at.success[0].value.replace("\\", "")
    go_to(at, "pages/diagram.py")
    at.toggle(key="w:overlay").set_value(False).run()
    add_view(at)
    go_to(at, "pages/inside-a-head.py")
    add_view(at, note=LITERAL_NOTES[3])
    made = own(at)
    assert [s.page for s in made.slides] == ["heatmaps", "diagram", "inside-a-head"]
    assert dict(made.slides[0].query) == {"layer": "2", "head": "5"}
    assert dict(made.slides[1].query) == {"layer": "2", "head": "5", "overlay": "false"}
    assert made.slides[1].title == "Data flow" and made.slides[2].points[0].text == LITERAL_NOTES[3].strip()
    press(at, "Your lesson: 3 slides")
    assert store(at)["lesson"] == player.MINE and at.selectbox(key="w:lesson").value == player.MINE
    press(at, "Move down")  # slide 1 goes below Data flow
    press(at, "Move up", 2)  # Inside a head (third) goes above Head 5 (second)
    assert [s.page for s in own(at).slides] == ["diagram", "inside-a-head", "heatmaps"]
    at.text_input(key=next(t.key for t in at.text_input if t.label == "Title")).input("The layer, drawn")
    area = next(t for t in at.text_area if t.label.startswith("Talking points"))
    area.input("First point.\n\nSecond point, <i>literal</i>.")
    ask = next(t for t in at.text_input if t.label == "Question (optional)")
    ask.input("Where is the LayerNorm?")
    next(t for t in at.text_input if t.label == "Its answer").input("After each add.")
    press(at, "Save this slide")
    first = own(at).slides[0]
    assert first.title == "The layer, drawn" and [p.text for p in first.points] == ["First point.",
                                                                                    "Second point, <i>literal</i>."]
    assert first.question == lessons.Question("Where is the LayerNorm?", "After each add.")
    press(at, "Delete", 1)
    assert [s.page for s in own(at).slides] == ["diagram", "heatmaps"]
    edited = own(at)
    exported = lessons.export_bytes(edited)  # what "Download the lesson file" serves
    assert any(d.label == "Download the lesson file" for d in at.get("download_button"))
    press(at, "Empty your lesson")
    assert own(at).slides == ()
    at.text_area(key=authoring.PASTE).input(exported.decode("utf-8"))
    press(at, "Open")
    assert own(at) == edited and "it is your lesson now" in at.success[0].value.replace("\\", "")
    link = shared_link(at)
    assert link.startswith("lessons?lesson=~") or "/lessons?lesson=~" in link  # the link to share
    press(at, "Empty your lesson")
    at.text_area(key=authoring.PASTE).input(link)
    press(at, "Open")
    assert own(at) == edited


def test_your_lesson_plays_as_its_link_and_is_yours_again_after_leaving():
    at = start({"layer": "4"})
    add_view(at, "Layer four")
    go_to(at, "pages/statistics.py")
    add_view(at, "Statistics")
    press(at, "Your lesson: 2 slides")
    press(at, "Play")
    made = own(at)
    assert store(at)["lesson"] == lessons.to_link(made) and dict(at.query_params)["lesson"] == lessons.to_link(made)
    on_slide(at, made, 1)
    press(at, "Next")
    on_slide(at, made, 2)
    press(at, "Leave lesson")
    assert store(at)["lesson"] == player.MINE


def test_a_built_in_lesson_copied_into_yours_then_the_handout():
    at = start({"lesson": "stack-bert-cls"}, page=LESSONS)
    press(at, "Add these slides to your lesson")
    made = lessons.load_builtin("stack-bert-cls")
    assert own(at) == made and store(at)["lesson"] == player.MINE
    at.selectbox(key="w:lesson").set_value("encoder-layer").run()
    press(at, "Add these slides to your lesson")
    assert len(own(at).slides) == len(made.slides) + len(lessons.load_builtin("encoder-layer").slides)
    at.selectbox(key="w:lesson").set_value(player.MINE).run()
    for _ in range(len(own(at).slides) - 2):
        press(at, "Delete")
    press(at, "Build the handout")
    handout = [d for d in at.get("download_button") if d.label.startswith("Download the handout (")]
    assert len(handout) == 1 and handout[0].label.endswith(" MB)")


# ------------------------------------------------------------------------------------------------ bad input
TEXT_FILES = [(i, c) for i, c in FILES if i not in ("invalid_utf8", "utf16")]  # the other two need the file opener


@pytest.mark.parametrize("content", [c for _, c in TEXT_FILES], ids=[i for i, _ in TEXT_FILES])
def test_a_hostile_lesson_file_pasted_gives_sentences_and_breaks_nothing(content):
    at = start(page=LESSONS)
    pasted = content.decode("utf-8")[: format.MAX_BYTES + 1]  # the box lets in one character past the cap
    try:
        expected, notes = authoring.read_pasted(pasted)
    except ValueError as err:
        expected, notes, refused = None, [], str(err)
    if pasted.lstrip("\ufeff \n")[:1] in ("{", "["):  # a file's text reads as the file does
        try:
            assert lessons.loads(content) == (expected, notes)
        except ValueError as err:
            assert expected is None and str(err) == refused
    at.text_area(key=authoring.PASTE).input(pasted)
    press(at, "Open")
    if expected is None:
        assert [e.value for e in at.error] == [literal(refused)]
        assert own(at).slides == ()
        return
    assert own(at) == expected and not at.error
    said = texts(at)
    assert all(lessons.display_text(n) in said for n in notes)  # what was repaired, one sentence each
    boxes = [t.value for t in at.text_area if t.label.startswith("Talking points")]
    assert boxes == ["\n\n".join(p.text for p in s.points) for s in expected.slides]  # editable, as written
    if expected.slides:
        press(at, "Play")
        press(at, "Talking points · question" if expected.slides[0].question else "Talking points")
        first = expected.slides[0]
        assert shown_title(at) == lessons.display_text(first.title).replace("\n", " ")
        assert [t for t in texts(at) if t.startswith("•  ")] == [f"•  {lessons.display_text(p.text)}"
                                                                  for p in first.points]


def test_notes_with_markup_are_shown_literally():
    """HTML, Markdown, RTL overrides and a 10,000-character word, as a shared lesson's slide list, in the player and
    in your lesson's edit boxes: text as written, never markup."""
    shared = packed(dict(FILES)["literal_notes"])
    made, _ = lessons.from_link(shared)
    at = start({"lesson": shared}, page=LESSONS)
    shown = texts(at)
    for note in LITERAL_NOTES[:4] + LITERAL_NOTES[6:]:
        assert f"•  {lessons.display_text(note.strip())}" in shown, note[:40]
    assert lessons.display_text(LITERAL_NOTES[4]) in shown and lessons.display_text(LITERAL_NOTES[5]) in shown
    for element in [*at.markdown, *at.expander, *at.title, *at.caption]:  # where Streamlit reads Markdown: escaped
        body = getattr(element, "value", None) or getattr(element, "label", "")
        assert "<script>" not in body and "**bold**" not in body and "[link](" not in body and "$$" not in body, body
    press(at, "Play")
    assert shown_title(at) == lessons.display_text(LITERAL_NOTES[0])
    press(at, "Talking points · question")
    assert [t for t in texts(at) if t.startswith("•  ")] == [f"•  {lessons.display_text(n.strip())}"
                                                            for n in LITERAL_NOTES[:4]]
    assert lessons.display_text(LITERAL_NOTES[4]) in texts(at)
    press(at, "Leave lesson")
    go_to(at, LESSONS)
    press(at, "Add these slides to your lesson")
    assert own(at) == made
    boxes = [t.value for t in at.text_area if t.label.startswith("Talking points")]
    assert boxes == ["\n\n".join(n.strip() for n in LITERAL_NOTES[:4]), LITERAL_NOTES[6].strip()]


def test_the_lessons_page_says_which_folder_files_were_left_out(tmp_path, monkeypatch):
    """A lecturer's folder with a broken file and a badly named one: the good lesson is offered, the page names the
    other two and what to change, as text, and nothing breaks."""
    (tmp_path / "week-1.json").write_bytes(text(lesson(slide(), title="Week 1")))
    (tmp_path / "intro.json").write_bytes(b'{"format": "encoder-explorer-lesson", "version": 1,')
    (tmp_path / "**my** [lesson](javascript:x).json").write_bytes(text(lesson(slide())))
    (tmp_path / "README.txt").write_bytes(b"Put lessons here.")
    monkeypatch.setenv(lessons.LESSONS_ENV, str(tmp_path))
    at = start(page=LESSONS)
    assert at.selectbox(key="w:lesson").options[len(BUILTINS)] == "Folder: Week 1"
    warned = [w.value for w in at.warning]
    assert len(warned) == 1, warned
    shown = warned[0].replace("\\", "")
    assert "- “intro.json” in the lessons folder was left out: This lesson file is not valid JSON" in shown
    assert "“**my** [lesson](javascript:x).json” in the lessons folder was left out: Its name may use" in shown
    assert "README" not in shown and "week-1" not in shown
    assert "**my**" not in warned[0] and "](" not in warned[0]  # as Markdown reads it: escaped
    (tmp_path / "intro.json").write_bytes(text(lesson(slide(), title="Intro")))  # fixed: offered on the next run
    at.run()
    assert_clean(at)
    assert "Folder: Intro" in at.selectbox(key="w:lesson").options
    assert "intro.json" not in at.warning[0].value.replace("\\", "")


@pytest.mark.parametrize("link", [c for _, c in LINKS], ids=[i for i, _ in LINKS])
def test_a_hostile_lesson_link_in_the_url_gives_a_sentence(link):
    """A link's lesson (?lesson=) is a reference: a built-in's name, folder:NAME or a packed lesson (a whole URL
    is read only from the paste box). What cannot be opened is said in one sentence; Play is off."""
    at = start({"lesson": link}, page=LESSONS)
    opened = player.open_ref(link)
    if not link:  # no lesson named: the first on offer
        assert store(at)["lesson"] == BUILTINS[0] and not at.error
        return
    if opened.lesson is None and not link.startswith("~"):  # a name this server does not offer: the first lesson
        said = f"The lesson this link names cannot be opened: {opened.problem}"
        assert [w.value for w in at.warning] == [literal(said)] and store(at)["lesson"] == BUILTINS[0]
    elif opened.lesson is None:  # a packed lesson that cannot be read: the box names it, Play is off
        assert [e.value for e in at.error] == [literal(opened.problem)]
        assert next(b for b in at.button if b.label == "Play").disabled
    else:
        assert store(at)["lesson"] == link and at.selectbox(key="w:lesson").value == link
        assert at.selectbox(key="w:lesson").options[-2] == f"Shared: {opened.lesson.title}"
    played = start({"lesson": link, "slide": "2", "present": "true"})  # a link to a slide of it
    if opened.lesson is None:
        assert played.warning and "The lesson could not be played" in played.warning[0].value.replace("\\", "")
        assert store(played)["slide"] == 0 and "Leave lesson" not in labels(played)
    else:
        assert store(played)["slide"] == len(opened.lesson.slides)  # past its end: its last slide
        assert "Leave lesson" in labels(played)


def test_unknown_settings_are_dropped_with_a_note_and_a_missing_model_is_named():
    doc = lesson(slide(title="Gone", query={"model": "ckpt:week3-model", "layer": 2, "bogus": "x"}),
                 slide(title="Here", page="diagram", query={"layer": 1}))
    link = packed(text(doc))
    at = start({"lesson": link}, page=LESSONS)
    notes = [t.value for t in at.text]
    assert lessons.display_text("Slide 1: ignored the unknown setting 'bogus'.") in notes
    assert any("is not available here" in w.value.replace("\\", "") for w in at.warning)
    press(at, "Play")
    assert any("This slide: The model 'ckpt:week3-model' is not available here" in w.value.replace("\\", "")
               for w in at.warning)
    assert store(at)["model"] == settings.PRETRAINED and figure_components(at)  # the map: the rest of the view still shows
    press(at, "Next")
    assert store(at)["slide"] == 2 and shown_title(at) == "Here" and at.get("graphviz_chart") and not at.warning


def test_the_add_view_box_builds_its_form_only_while_open_and_every_page_starts_with_it_closed():
    at = start({})
    form = lambda: [w.key for w in at.text_input if w.key == authoring.ADD_TITLE]  # noqa: E731
    assert [e.label for e in at.sidebar.expander] == ["Add this view to a lesson"] and form() == []
    add_view(at, "One")  # opens the box, as a click on it does
    assert form() and own(at).slides[-1].title == "One"
    go_to(at, "pages/diagram.py")
    assert [e.label for e in at.sidebar.expander] == ["Add this view to a lesson"] and form() == []
    add_view(at, "Two")
    assert [s.title for s in own(at).slides] == ["One", "Two"]
