"""The lesson file format: a JSON document with a version, read with a clear sentence for every problem.

A lesson is a title, an optional description and ordered slides. A slide is a view of the app (a page's URL path and
the settings exactly as that page's URL query holds them), a title, up to four talking points and optionally a
question with its answer. A talking point may carry checks: named numbers computed from the live model (claims.py)
that must read as the point states them. The format is documented in ui/lessons/FORMAT.md.

Reading never raises anything but ValueError, and only when nothing sensible can be read (not JSON, too large, an
unknown version, not a lesson). Everything smaller is repaired and reported as a note: an unknown setting is
dropped, a value out of range falls back to its default (exactly as a link does, through ui.settings.from_query),
a slide on a page the app does not have is left out. What is read is canonical: written back, it reads the same.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import settings
from .claims import CLAIMS, OPS
from .pages import page_named, pages

FORMAT = "encoder-explorer-lesson"
VERSION = 1
MAX_BYTES = 200_000  # a lesson file, and a link's inflated content
MAX_SLIDES = 60
MAX_POINTS = 4
MAX_CHECKS = 8  # per talking point
MAX_TITLE = 200  # characters of a lesson's or a slide's title
MAX_TEXT = 20_000  # characters of a description, a talking point, a question or an answer (a 10,000-character word fits)
MAX_LINK = 32_000  # characters of a shared link's lesson: with the app's own URL it stays under nginx's 64 kB lines
PACKED = "~"  # a link's lesson starts with this, as a packed sentence does (ui.settings.PACKED)
LINK_PARAM = "lesson"  # the query parameter a shared link is expected to carry the lesson in
# Presentation mode and the player's own settings belong to whoever plays the lesson, not to a slide's view.
NOT_IN_SLIDES = ("present", "lesson", "slide", "points", "answer")
UNTITLED = "Untitled lesson"


@dataclass(frozen=True)
class Check:
    """A number a talking point states, and how to compute it on the slide's live view.

    op "shows": the claim, rounded as `value` is written ("0.41", "43%", "384", "1,536"), reads exactly `value`.
    op "below" / "above": the claim is smaller / larger than the number `value`.
    """

    claim: str
    value: str
    op: str = "shows"
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Point:
    """One talking point: plain text (never HTML or Markdown), with the checks of the numbers it states."""

    text: str
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Question:
    ask: str
    answer: str = ""


@dataclass(frozen=True)
class Slide:
    """One view of the app and what to say about it. `query` holds only non-default settings, in SETTINGS order."""

    page: str  # the page's URL path, e.g. "inside-a-head"
    query: tuple[tuple[str, str], ...]
    title: str
    points: tuple[Point, ...] = ()
    question: Question | None = None

    def values(self) -> dict[str, Any]:
        """Every setting as the app holds it when this slide's link opens."""
        return settings.defaults() | settings.from_query(dict(self.query))[0]

    def link(self) -> tuple[str, dict[str, str]]:
        """(URL path, query parameters) that open this slide's view, e.g. ("/inside-a-head", {"layer": "2"})."""
        return pages()[self.page].url, dict(self.query)

    def url(self, base: str = "") -> str:
        """The slide's view as one link, relative to `base` (the app's address, or "" for a relative link)."""
        path, query = self.link()
        tail = path.lstrip("/") + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else "")
        if not base:
            return "./" + tail
        return base.rstrip("/") + "/" + tail


@dataclass(frozen=True)
class Lesson:
    title: str
    slides: tuple[Slide, ...] = ()
    description: str = ""


# ----------------------------------------------------------------------------------------------------- reading
def loads(data: bytes | str) -> tuple[Lesson, list[str]]:
    """A lesson file's content -> (lesson, notes on what was repaired). ValueError: one sentence saying what to change."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_BYTES:
        raise ValueError(_too_large("This lesson file"))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("This lesson file is not UTF-8 text; save it as UTF-8 JSON.") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"This lesson file is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}).") from None
    except RecursionError:
        raise ValueError("This lesson file is not a lesson: its JSON is nested thousands of levels deep.") from None
    except ValueError:  # e.g. a whole number of more than 4,300 digits, which Python refuses to read
        raise ValueError("This lesson file is not a lesson: it holds a number too long to read.") from None
    return from_dict(doc)


def from_dict(doc: Any) -> tuple[Lesson, list[str]]:
    """A parsed JSON document -> (lesson, notes); ValueError when it is not a lesson this app can read."""
    if not isinstance(doc, dict):
        raise ValueError(f"A lesson file holds one JSON object {{...}}; this one holds {_kind(doc)}.")
    if doc.get("format") != FORMAT:
        raise ValueError(f'This file is not an Encoder Explorer lesson: it lacks "format": "{FORMAT}".')
    version = doc.get("version")
    if isinstance(version, float) and version.is_integer():
        version = int(version)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f'This lesson has no version number; add "version": {VERSION}.')
    if version != VERSION:
        shown = quoted(str(version), quote=False)
        raise ValueError(f"This lesson is in format version {shown}, but this app reads version {VERSION} only; a newer "
                         "Encoder Explorer wrote it.")
    notes: list[str] = []
    _unknown(doc, ("format", "version", "title", "description", "slides"), "the lesson", notes)
    title = text_field(doc.get("title"), "The lesson's title", notes, MAX_TITLE, cut=True) or UNTITLED
    if title == UNTITLED and doc.get("title") != UNTITLED:
        notes.append(f"The lesson has no title; it is called “{UNTITLED}”.")
    description = text_field(doc.get("description", ""), "The lesson's description", notes, MAX_TEXT)
    raw_slides = doc.get("slides", [])
    if not isinstance(raw_slides, list):
        raise ValueError(f'The lesson\'s "slides" must be a list of slides; it is {_kind(raw_slides)}.')
    if len(raw_slides) > MAX_SLIDES:
        raise ValueError(f"This lesson has {len(raw_slides)} slides, more than the {MAX_SLIDES} a lesson may have; "
                         "split it into two lessons.")
    slides = []
    for n, raw in enumerate(raw_slides, 1):
        slide = _slide(raw, n, notes)
        if slide is not None:
            slides.append(slide)
    return Lesson(title=title, slides=tuple(slides), description=description), notes


def _slide(raw: Any, n: int, notes: list[str]) -> Slide | None:
    if not isinstance(raw, dict):
        notes.append(f"Slide {n} is {_kind(raw)}, not a slide; it is left out.")
        return None
    where = f"Slide {n}"
    _unknown(raw, ("page", "query", "title", "points", "question"), where, notes)
    page_text = raw.get("page")
    page = page_named(page_text) if isinstance(page_text, str) else None
    if "page" not in raw:
        page = page_named("")
        notes.append(f"{where} names no page; it opens {page.title}, the page a link without a path opens.")
    if page is None:
        names = ", ".join(pages())
        notes.append(f"{where} opens the page {quoted(str(page_text))}, which this app does not have (it has {names}); "
                     "the slide is left out.")
        return None
    query, problems = view_query(raw.get("query", {}))
    notes += [f"{where}: {p}" for p in problems]
    title = text_field(raw.get("title"), f"{where}'s title", notes, MAX_TITLE, cut=True)
    if not title:
        title = page.title
        notes.append(f"{where} has no title; it is called “{title}” after its page.")
    where = f"Slide {n} (“{quoted(title, 40, quote=False)}”)"
    points = _points(raw.get("points", []), where, notes)
    return Slide(page.path, query, title, points, _question(raw.get("question"), where, notes))


def view_query(raw: Any) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """A view's query parameters -> (canonical query, problems): what the app's URL would hold for the same view."""
    if not isinstance(raw, dict):
        return (), [f"its settings must be an object of name: value pairs, not {_kind(raw)}; the page opens with "
                    "its defaults."]
    params, problems = {}, []
    for key, value in raw.items():
        if key in NOT_IN_SLIDES:
            problems.append(f"{quoted(key)} is chosen by whoever plays the lesson, not by a slide; it is ignored.")
        elif isinstance(value, bool):
            params[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            params[key] = _clean(str(value))
        else:
            problems.append(f"the setting {quoted(key)} holds {_kind(value)}, not one value; it is ignored.")
    values, url_problems = settings.from_query(params)
    query = settings.to_query(settings.defaults() | values)
    return tuple(query.items()), problems + [_as_setting(p) for p in url_problems]


def _as_setting(problem: str) -> str:
    """ui.settings speaks of URL parameters; in a lesson file they are a slide's settings."""
    problem = (problem.replace("the unknown URL parameter", "the unknown setting").replace("URL parameter ", "the setting ")
               .replace(" in the URL ", " of this slide "))
    return problem[:1].lower() + problem[1:] if problem.startswith(("Ignored", "The ")) else problem


def _points(raw: Any, where: str, notes: list[str]) -> tuple[Point, ...]:
    if not isinstance(raw, list):
        notes.append(f"{where}: its talking points must be a list; they are left out.")
        return ()
    if len(raw) > MAX_POINTS:
        notes.append(f"{where} has {len(raw):,} talking points; a slide keeps at most {MAX_POINTS}, so the last "
                     f"{len(raw) - MAX_POINTS:,} are left out.")
    points = []
    for i, item in enumerate(raw[:MAX_POINTS], 1):
        spot = f"{where}, point {i}"
        body, checks = (item.get("text"), item.get("checks", [])) if isinstance(item, dict) else (item, [])
        if isinstance(item, dict):
            _unknown(item, ("text", "checks"), spot, notes)
        text = text_field(body, spot, notes, MAX_TEXT)
        if text:
            points.append(Point(text, _checks(checks, text, spot, notes)))
        elif body is None or isinstance(body, str) and len(body) <= MAX_TEXT:
            notes.append(f"{spot} is empty; it is left out.")
    return tuple(points)


def _checks(raw: Any, text: str, where: str, notes: list[str]) -> tuple[Check, ...]:
    if not isinstance(raw, list):
        notes.append(f"{where}: its checks must be a list; they are left out.")
        return ()
    if len(raw) > MAX_CHECKS:
        notes.append(f"{where} has {len(raw):,} checks; at most {MAX_CHECKS} are kept.")
    checks = []
    for item in raw[:MAX_CHECKS]:
        check, problem = _check(item, text)
        if check is None:
            notes.append(f"{where}: {problem}; the check is left out (the text stays).")
        else:
            checks.append(check)
    return tuple(checks)


def _check(raw: Any, text: str) -> tuple[Check | None, str]:
    if not isinstance(raw, dict):
        return None, f"a check must be an object, not {_kind(raw)}"
    name = raw.get("claim")
    claim = CLAIMS.get(name) if isinstance(name, str) else None
    if claim is None:
        return None, f"there is no claim called {quoted(str(name))}"
    ops = [op for op in OPS if op in raw]
    extra = set(raw) - {"claim", "args", *OPS}
    if len(ops) != 1 or extra:
        return None, f"a check names its claim, optional args, and one of {', '.join(OPS)}"
    value = raw[ops[0]]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None, f"the value of {ops[0]!r} must be text or a number"
    value = str(value)
    if value not in text:
        return None, f"the checked value {quoted(value)} does not appear in the point's text"
    if ops[0] != "shows" and not _is_number(value):
        return None, f"{ops[0]!r} needs a number, not {quoted(value)}"
    args = raw.get("args", {})
    if not isinstance(args, dict) or any(isinstance(v, bool) or not isinstance(v, (str, int, float)) for v in args.values()):
        return None, "its args must map names to single values"
    unknown = [k for k in args if k not in claim.params]
    if unknown:
        takes = ", ".join(claim.params) or "no args"
        return None, f"the claim {name!r} takes {takes}, not {quoted(unknown[0])}"
    return Check(name, value, ops[0], tuple(sorted(args.items()))), ""


def _question(raw: Any, where: str, notes: list[str]) -> Question | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        notes.append(f"{where}: a question must be an object with \"ask\" and \"answer\"; it is left out.")
        return None
    _unknown(raw, ("ask", "answer"), f"{where}'s question", notes)
    ask = text_field(raw.get("ask"), f"{where}'s question", notes, MAX_TEXT)
    if not ask:
        notes.append(f"{where}'s question has no text to ask; it is left out.")
        return None
    return Question(ask, text_field(raw.get("answer", ""), f"{where}'s answer", notes, MAX_TEXT))


def text_field(value: Any, what: str, notes: list[str], limit: int, cut: bool = False) -> str:
    """A text field, stripped; anything else is noted and read as ''. Too long: cut (titles) or left out, noted."""
    if value is None:
        return ""
    if not isinstance(value, str):
        notes.append(f"{what} must be text, not {_kind(value)}; it is left out.")
        return ""
    value = _clean(value).strip()
    if len(value) > limit:
        if not cut:
            notes.append(f"{what} is {len(value):,} characters long; at most {limit:,} fit, so it is left out.")
            return ""
        notes.append(f"{what} was cut to its first {limit} characters.")
        value = value[:limit].rstrip()
    return value


def _clean(text: str) -> str:
    """Lone UTF-16 surrogates (valid JSON escapes, but not characters) become U+FFFD; everything else stays literal."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text) if re.search("[\ud800-\udfff]", text) else text


def _unknown(doc: Mapping, known: Iterable[str], where: str, notes: list[str]) -> None:
    for key in doc:
        if key not in known:
            notes.append(f"Ignored the unknown field {quoted(str(key))} in {where[:1].lower() + where[1:]}.")


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}.get(
        type(value), "a number")


def quoted(text: str, limit: int = 40, quote: bool = True) -> str:
    """User text as a note quotes it: on one line, at most `limit` characters, in quotes by default."""
    text = _clean(text).replace("\n", " ")
    text = text if len(text) <= limit else text[:limit] + "…"
    return repr(text) if quote else text


# ----------------------------------------------------------------------------------------------------- writing
def to_dict(lesson: Lesson) -> dict[str, Any]:
    """The lesson as its JSON document: the canonical form, which from_dict reads back without a note."""
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "title": lesson.title}
    if lesson.description:
        doc["description"] = lesson.description
    doc["slides"] = [_slide_dict(s) for s in lesson.slides]
    return doc


def _slide_dict(slide: Slide) -> dict[str, Any]:
    doc: dict[str, Any] = {"title": slide.title, "page": slide.page, "query": dict(slide.query)}
    doc["points"] = [p.text if not p.checks else {"text": p.text, "checks": [_check_dict(c) for c in p.checks]}
                     for p in slide.points]
    if slide.question is not None:
        doc["question"] = {"ask": slide.question.ask, "answer": slide.question.answer}
    return doc


def _check_dict(check: Check) -> dict[str, Any]:
    doc: dict[str, Any] = {"claim": check.claim}
    if check.args:
        doc["args"] = dict(check.args)
    doc[check.op] = check.value
    return doc


def dumps(lesson: Lesson) -> str:
    """The lesson file's text (JSON, UTF-8 when encoded). ValueError when it is over the size a file may have."""
    text = json.dumps(to_dict(lesson), ensure_ascii=False, indent=2)
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise ValueError(_too_large("This lesson"))
    return text


def _too_large(what: str) -> str:
    return f"{what} is over the {MAX_BYTES // 1000} kB a lesson may have; shorten its notes or split it into two lessons."


def export_bytes(lesson: Lesson) -> bytes:
    """The lesson as a file to download."""
    return dumps(lesson).encode("utf-8")


def file_name(lesson: Lesson) -> str:
    """A download name from the title: letters, digits and '-' only, e.g. 'pre-ln-versus-post-ln.lesson.json'."""
    stem = re.sub(r"[^a-z0-9]+", "-", lesson.title.lower()).strip("-")[:60].strip("-") or "lesson"
    return f"{stem}.lesson.json"


# ------------------------------------------------------------------------------------------------------- links
def to_link(lesson: Lesson) -> str:
    """The whole lesson as one query value: compact JSON, deflated, base64url, after a '~' (as long sentences are)."""
    data = json.dumps(to_dict(lesson), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_BYTES:
        dumps(lesson)  # raises the file's own size sentence
    token = PACKED + base64.urlsafe_b64encode(zlib.compress(data, 9)).decode("ascii").rstrip("=")
    if len(token) > MAX_LINK:
        raise ValueError(f"This lesson is too large for a link ({len(token):,} characters, at most {MAX_LINK:,}); "
                         "export it as a file and share the file instead.")
    return token


def from_link(link: str) -> tuple[Lesson, list[str]]:
    """A lesson link (the '~' value, or a whole URL carrying it as ?lesson=...) -> (lesson, notes); ValueError if broken."""
    if not isinstance(link, str):
        raise ValueError("A lesson link is text.")
    link = link.strip()
    if not link.startswith(PACKED) and "?" in link:
        found = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query).get(LINK_PARAM)
        link = found[-1] if found else ""
    if not link.startswith(PACKED):
        raise ValueError(f"This is not a lesson link: a lesson link carries ?{LINK_PARAM}=~… with the lesson packed in it.")
    if len(link) > MAX_LINK:
        raise ValueError(f"This lesson link is {len(link):,} characters long; lesson links have at most {MAX_LINK:,}.")
    body = link[len(PACKED):]
    if not re.fullmatch(r"[A-Za-z0-9_-]*", body):
        raise ValueError("This lesson link is damaged: it holds characters a lesson link never has; copy it again.")
    try:
        data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        unzip = zlib.decompressobj()
        raw = unzip.decompress(data, MAX_BYTES + 1)  # a bound: a zip bomb never reaches memory
    except (binascii.Error, ValueError, zlib.error):
        raise ValueError("This lesson link is damaged (cut short or changed); copy the whole link again.") from None
    if len(raw) > MAX_BYTES or unzip.unconsumed_tail:
        raise ValueError(f"This lesson link unpacks to more than {MAX_BYTES // 1000} kB, more than any lesson may hold.")
    if not unzip.eof or unzip.unused_data or not _utf8(raw):
        raise ValueError("This lesson link is damaged (cut short or changed); copy the whole link again.")
    try:
        return loads(raw)
    except ValueError as err:  # the file's sentences, told of a link
        raise ValueError(str(err).replace("This lesson file", "This lesson link").replace("This file", "This link")) from None
