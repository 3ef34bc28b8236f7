"""Lessons: ordered slides of live views with talking points, their file format, share links, built-ins and handout.

The player (the Lessons page, presentation mode, "Add this view to a lesson") is built on these names only:

    shelf()                          -> Shelf: the lessons on offer (built-in and the operator's, by reference and
                                        title) and a sentence per file of the operator's folder not offered, and why
    catalogue() / left_out()         -> shelf()'s two halves
    open_lesson(ref)                 -> (Lesson, notes): a built-in name, "folder:NAME", or a "~…" share link
    loads(data) / export_bytes(l)    -> read / write a lesson file; file_name(l) suggests a download name
    to_link(l) / from_link(link)     -> one query value holding the whole lesson (LINK_PARAM = "lesson")
    slide.link() / slide.url(base)   -> (URL path, query dict) of a slide's view / one link to it
    page_of(slide)                   -> the Page (its script for st.switch_page, its title)
    slide_problems(slide)            -> sentences for what this server cannot show as the slide says (a missing model)
    capture(page, query, title, note)-> a Slide of the view on screen
    add_slide, move_slide, delete_slide, edit_slide, edit_lesson -> a new Lesson (ValueError: one sentence)
    display_text(text)               -> a note made safe to show with st.text
    verify(slide)                    -> a Verdict per checked number of the slide, on the live model
    handout(lesson, base_url)        -> one self-contained HTML file (bytes)
"""

from __future__ import annotations

from .claims import CLAIMS, Verdict, verify
from .edit import add_slide, capture, delete_slide, display_text, edit_lesson, edit_slide, move_slide
from .format import (
    FORMAT,
    LINK_PARAM,
    MAX_BYTES,
    MAX_LINK,
    MAX_POINTS,
    MAX_SLIDES,
    VERSION,
    Check,
    Lesson,
    Point,
    Question,
    Slide,
    dumps,
    export_bytes,
    file_name,
    from_dict,
    from_link,
    loads,
    to_dict,
    to_link,
)
from .handouts import handout, main_figure
from .library import (
    LESSONS_ENV,
    Entry,
    Shelf,
    builtin_names,
    catalogue,
    left_out,
    load_builtin,
    load_operator,
    open_lesson,
    operator_names,
    page_of,
    shelf,
    slide_problems,
)
from .pages import Page, pages

__all__ = [
    "CLAIMS", "FORMAT", "LESSONS_ENV", "LINK_PARAM", "MAX_BYTES", "MAX_LINK", "MAX_POINTS", "MAX_SLIDES", "VERSION",
    "Check", "Entry", "Lesson", "Page", "Point", "Question", "Shelf", "Slide", "Verdict", "add_slide",
    "builtin_names", "capture", "catalogue", "delete_slide", "display_text", "dumps", "edit_lesson", "edit_slide",
    "export_bytes", "file_name", "from_dict", "from_link", "handout", "left_out", "load_builtin", "load_operator",
    "loads", "main_figure", "move_slide", "open_lesson", "operator_names", "page_of", "pages", "shelf",
    "slide_problems", "to_dict", "to_link", "verify",
]
