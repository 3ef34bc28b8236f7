"""Editing a lesson in memory, as the player does: capture the view on screen, add, move, delete and edit slides.

Every function returns a new Lesson (lessons are frozen) or raises ValueError with one sentence saying what to change;
nothing here writes a file, so a lesson from the operator's folder is edited as a copy. display_text makes a note safe
to show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from encoder.viz.text import printable

from .format import (
    MAX_POINTS,
    MAX_SLIDES,
    MAX_TEXT,
    MAX_TITLE,
    NOT_IN_SLIDES,
    Lesson,
    Point,
    Question,
    Slide,
    dumps,
    quoted,
    text_field,
    view_query,
)
from .pages import page_named, pages


def capture(page: str, query: Mapping[str, Any], title: str = "", note: str = "") -> tuple[Slide, list[str]]:
    """A slide of the view on screen: its page's URL path and its URL query (ui.settings.to_query of the store)."""
    found = page_named(page)
    if found is None:
        raise ValueError(f"There is no page {quoted(page)} to capture; the app has {', '.join(pages())}.")
    view, problems = view_query({k: v for k, v in query.items() if k not in NOT_IN_SLIDES})
    notes: list[str] = []
    title = text_field(title, "The title", notes, MAX_TITLE, cut=True) or found.title
    text = text_field(note, "The note", notes, MAX_TEXT)
    return Slide(found.path, view, title, (Point(text),) if text else ()), problems + notes


def add_slide(lesson: Lesson, slide: Slide, at: int | None = None) -> Lesson:
    """The lesson with `slide` inserted before position `at` (default: at the end)."""
    if len(lesson.slides) >= MAX_SLIDES:
        raise ValueError(f"This lesson already has {MAX_SLIDES} slides, the most a lesson may have; start a new one.")
    slides = list(lesson.slides)
    slides.insert(len(slides) if at is None else _index(lesson, at, end=True), slide)
    return _fits(replace(lesson, slides=tuple(slides)))


def move_slide(lesson: Lesson, i: int, to: int) -> Lesson:
    """The lesson with slide i moved to position `to` (0-based; the others keep their order)."""
    slides = list(lesson.slides)
    slide = slides.pop(_index(lesson, i))
    slides.insert(_index(lesson, to), slide)
    return replace(lesson, slides=tuple(slides))


def delete_slide(lesson: Lesson, i: int) -> Lesson:
    slides = list(lesson.slides)
    del slides[_index(lesson, i)]
    return replace(lesson, slides=tuple(slides))


def edit_slide(lesson: Lesson, i: int, *, title: str | None = None, points: Iterable[str] | None = None,
               question: tuple[str, str] | None = None) -> Lesson:
    """The lesson with slide i retitled, its talking points replaced, or its question (ask, answer) set; ("", "")
    removes the question. A point whose text is unchanged keeps its checks; an edited one loses them."""
    slide = lesson.slides[_index(lesson, i)]
    notes: list[str] = []
    if title is not None:
        slide = replace(slide, title=_required(title, "A slide's title", MAX_TITLE))
    if points is not None:
        texts = [t for t in (text_field(p, "A talking point", notes, MAX_TEXT) for p in points) if t]
        if len(texts) > MAX_POINTS:
            raise ValueError(f"A slide has at most {MAX_POINTS} talking points; this would have {len(texts)}.")
        kept = {p.text: p for p in slide.points}
        slide = replace(slide, points=tuple(kept.get(t, Point(t)) for t in texts))
    if question is not None:
        ask, answer = (text_field(q, "The question", notes, MAX_TEXT) for q in question)
        slide = replace(slide, question=Question(ask, answer) if ask else None)
    if notes:
        raise ValueError(notes[0])
    slides = list(lesson.slides)
    slides[_index(lesson, i)] = slide
    return _fits(replace(lesson, slides=tuple(slides)))


def edit_lesson(lesson: Lesson, *, title: str | None = None, description: str | None = None) -> Lesson:
    """The lesson retitled, or with a new description."""
    notes: list[str] = []
    if title is not None:
        lesson = replace(lesson, title=_required(title, "The lesson's title", MAX_TITLE))
    if description is not None:
        lesson = replace(lesson, description=text_field(description, "The description", notes, MAX_TEXT))
    if notes:
        raise ValueError(notes[0])
    return _fits(lesson)


def _required(text: str, what: str, limit: int) -> str:
    notes: list[str] = []
    value = text_field(text, what, notes, limit)
    if notes:
        raise ValueError(notes[0])
    if len(value) > limit:
        raise ValueError(f"{what} may have at most {limit} characters.")
    if not value:
        raise ValueError(f"{what} cannot be empty.")
    return value


def _index(lesson: Lesson, i: int, end: bool = False) -> int:
    top = len(lesson.slides) if end else len(lesson.slides) - 1
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= top:
        raise ValueError(f"There is no slide {i!r} here; slides are numbered 0 to {top}.")
    return i


def _fits(lesson: Lesson) -> Lesson:
    dumps(lesson)  # raises the size sentence when the lesson would no longer fit in a file
    return lesson


# ----------------------------------------------------------------------------------------------------- display
def display_text(text: str, *, limit: int | None = None, wrap: int = 60) -> str:
    """A note as it may be shown: line breaks kept, control characters visible, bidi overrides neutralised (as
    tokens are shown), and a zero-width break every `wrap` characters inside longer words so they wrap on screen.

    Still plain text: show it with st.text (or html.escape it); it never becomes HTML or Markdown.
    """
    lines = [printable(line.replace("\t", "    ")) for line in text.split("\n")]
    out = "\n".join(re.sub(rf"\S{{{wrap + 1},}}", lambda m: _breakable(m.group(), wrap), line) for line in lines)
    if limit is not None and len(out) > limit:
        out = out[: limit - 1] + "…"
    return out


def _breakable(word: str, every: int) -> str:
    return "\u200b".join(word[i:i + every] for i in range(0, len(word), every))
