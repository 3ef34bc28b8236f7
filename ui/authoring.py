"""Your own lesson (issue 21): "Add this view to a lesson" on any page, the slide list and its editing on the Lessons
page, opening a lesson file or link, the file to download, one link to share, and the handout.

The session's lesson lives in the settings store beside the settings (player.own, player.set_own), so it survives
page changes; it reaches the URL only as a link, when it is shared or played. A reload starts a new session, so the
page says how to keep it: download its file or copy its link.

Opening a file: Streamlit's upload endpoint is refused by nginx in deployment (deploy/nginx.conf.template) and capped
at 1 MB, so a small component (ui/lesson_file.js) reads the file in the browser and sends its bytes over the page's
own connection, at most the 200 kB a lesson file may have; a link, or a file's text, can also be pasted.

Every text a lesson carries is shown as plain text: st.text, or escaped (ui.literal) where Streamlit reads Markdown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import urllib.parse
from collections.abc import Callable

import streamlit as st

from . import lessons, literal, player, state
from .components import register
from .downloads import download
from .lessons.format import MAX_BYTES, MAX_TEXT, MAX_TITLE, quoted
from .lessons.pages import PLAYER, page_named

MESSAGE = "authoring: message"  # (where, kind, sentence, notes) said after a callback, shown by the next run
FILE = "lesson-file"  # the file component's key
LINK = "lesson-link"  # the link's box and Copy button (ui/copy_link.js: st.code loads a whole syntax highlighter)
PASTE, ADD_TITLE, ADD_NOTE = "lesson-paste", "add-view-title", "add-view-note"  # form fields, not settings
REPLACES = "Opening a lesson makes it your lesson, in place of the one you have: download yours first to keep it."

_file = register("lesson_file", "lesson_file")
_copy_link = register("copy_link", "copy_link")


# ------------------------------------------------------------------------------------------------ messages
def say(where: str, kind: str, sentence: str, notes: tuple[str, ...] | list[str] = ()) -> None:
    """Keep a callback's outcome for the run it starts: where is "sidebar" or "page", kind "success" or "error"."""
    st.session_state[MESSAGE] = (where, kind, sentence, tuple(notes))


def messages(where: str) -> None:
    """Show the outcome kept by say() for this place (once); notes on what was repaired fold below it."""
    kept = st.session_state.get(MESSAGE)
    if kept is None or kept[0] != where:
        return
    del st.session_state[MESSAGE]
    _, kind, sentence, notes = kept
    show = st.success if kind == "success" else st.error
    show(literal(sentence), icon=":material/check_circle:" if kind == "success" else ":material/error:")
    if notes:
        read_notes(notes)


def read_notes(notes: tuple[str, ...] | list[str]) -> None:
    """What reading a lesson repaired, folded away."""
    with st.expander(f"{len(notes)} note{'s' if len(notes) != 1 else ''} on reading this lesson",
                     icon=":material/info:"):
        for note in notes:
            st.text(lessons.display_text(note), width="stretch")


def _edit(change: Callable[[lessons.Lesson], lessons.Lesson], done: str, where: str = "page") -> None:
    """Change your lesson; say what was done, or the sentence why it cannot be."""
    try:
        player.set_own(change(player.own()))
    except ValueError as err:
        say(where, "error", str(err))
        return
    say(where, "success", done)


# ------------------------------------------------------------------------------------------- add this view
def add_view(here: str) -> None:
    """The sidebar's "Add this view to a lesson": the page on screen and its settings, an optional title and note.

    here: the URL path of the page on screen ("" for the default page)."""
    page = page_named(here)
    if page is not None:  # the Lessons page is no view
        # Its form is built only while the box is open (opening it runs the script once): closed, as on every
        # student's screen, it costs a run nothing. One box per page, so a page opened later starts with it closed
        # in the browser and on the server alike.
        box = st.expander("Add this view to a lesson", icon=":material/playlist_add:", key=open_key(page.path),
                          on_change="rerun")
        if box.open:
            with box:
                with st.form("add-view", border=False):
                    st.text_input("Slide title (optional)", key=ADD_TITLE, placeholder=page.title,
                                  max_chars=MAX_TITLE)
                    st.text_area("Note (optional): a talking point", key=ADD_NOTE, height=90, max_chars=MAX_TEXT)
                    st.form_submit_button("Add this view", icon=":material/add:", on_click=_add, args=(page.path,))
                messages("sidebar")
    count = len(player.own().slides)
    st.button(f"Your lesson: {count} slide{'s' if count != 1 else ''}", icon=":material/slideshow:", key="open-own",
              on_click=open_own, width="stretch", help="Open your lesson on the Lessons page to edit, play or keep it")


def open_key(path: str) -> str:
    """The widget key of a page's "Add this view to a lesson" box (open or closed: not a setting)."""
    return f"add-view-open-{path}"


def _add(path: str) -> None:
    """Callback: the view on screen (its page and URL settings) as a new slide at the end of your lesson."""
    title, note = st.session_state.get(ADD_TITLE) or "", st.session_state.get(ADD_NOTE) or ""
    try:
        slide, _ = lessons.capture(path, player.view_of(state.store()), title, note)
        lesson = lessons.add_slide(player.own(), slide)
    except ValueError as err:
        say("sidebar", "error", str(err))
        return
    player.set_own(lesson)
    st.session_state[ADD_TITLE] = st.session_state[ADD_NOTE] = ""
    say("sidebar", "success", f"Added “{quoted(slide.title, 60, quote=False)}” as slide {len(lesson.slides)} of your "
                              "lesson.")


def open_own() -> None:
    """Callback: your lesson on the Lessons page (a lesson playing stops; the view stays)."""
    state.put("lesson", player.MINE)
    state.put("slide", 0)
    state.put("answer", False)
    st.session_state[player.GOTO] = PLAYER


# ------------------------------------------------------------------------------------------------ the slides
def _tag(*parts: object) -> str:
    """A short, stable name for some content: widget keys that change when the slide under them changes."""
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()[:10]


def slides(opened: player.Opened) -> None:
    """Every slide, folded: its page, talking points and question; Play from here and Open this view; for your own
    lesson also Move up, Move down, Delete and a form to edit it."""
    lesson, mine = opened.lesson, opened.source == "yours"
    for i, slide in enumerate(lesson.slides):
        page = lessons.page_of(slide)
        label = f"{i + 1}. {lessons.display_text(slide.title, limit=120)} · {page.title}".replace("\n", " ")
        with st.expander(literal(label)):
            tag = _tag(i, slide)
            row = st.container(horizontal=True)
            row.button("Play from here", icon=":material/play_arrow:", key=f"play-{tag}", on_click=player.play,
                       args=(opened.ref, i + 1))
            row.button("Open this view", icon=":material/open_in_new:", key=f"view-{tag}",
                       on_click=player.show_slide, args=(slide,), help="Its page and settings, without playing")
            if mine:
                row.button("Move up", icon=":material/arrow_upward:", key=f"up-{tag}", disabled=i == 0,
                           on_click=_edit, args=(lambda x, i=i: lessons.move_slide(x, i, i - 1), f"Moved slide {i + 1} up."))
                row.button("Move down", icon=":material/arrow_downward:", key=f"down-{tag}",
                           disabled=i == len(lesson.slides) - 1, on_click=_edit,
                           args=(lambda x, i=i: lessons.move_slide(x, i, i + 1), f"Moved slide {i + 1} down."))
                row.button("Delete", icon=":material/delete:", key=f"delete-{tag}", on_click=_edit,
                           args=(lambda x, i=i: lessons.delete_slide(x, i), f"Deleted slide {i + 1}."))
                _slide_form(i, slide, tag)
            else:
                _slide_text(slide)
            for problem in lessons.slide_problems(slide):
                st.warning(literal(problem), icon=":material/warning:")


def _slide_text(slide: lessons.Slide) -> None:
    for point in slide.points:
        st.text("•  " + lessons.display_text(point.text), width="stretch")
    if slide.question is not None:
        st.markdown("**Question**")
        st.text(lessons.display_text(slide.question.ask), width="stretch")
        if slide.question.answer:
            st.markdown("**Answer**")
            st.text(lessons.display_text(slide.question.answer), width="stretch")


def _slide_form(i: int, slide: lessons.Slide, tag: str) -> None:
    """Edit one slide of your lesson: its title, talking points, question and answer, saved together."""
    question = slide.question or lessons.Question("")
    with st.form(f"slide-form-{tag}", border=False):
        st.text_input("Title", value=slide.title, key=f"title-{tag}", max_chars=MAX_TITLE)
        st.text_area("Talking points: one per paragraph (an empty line between two), at most 4",
                     value="\n\n".join(p.text for p in slide.points), key=f"points-{tag}", height=140)
        st.text_input("Question (optional)", value=question.ask, key=f"ask-{tag}")
        st.text_input("Its answer", value=question.answer, key=f"answer-{tag}")
        st.form_submit_button("Save this slide", icon=":material/save:", on_click=_save, args=(i, tag))


def paragraphs(text: str) -> list[str]:
    """Talking points as typed in one box: paragraphs separated by an empty line."""
    return [p.strip() for p in re.split(r"\n\s*\n", text or "") if p.strip()]


def _save(i: int, tag: str) -> None:
    ss = st.session_state
    _edit(lambda x: lessons.edit_slide(x, i, title=ss.get(f"title-{tag}") or "",
                                       points=paragraphs(ss.get(f"points-{tag}") or ""),
                                       question=(ss.get(f"ask-{tag}") or "", ss.get(f"answer-{tag}") or "")),
          f"Saved slide {i + 1}.")


def heading(opened: player.Opened) -> None:
    """Your lesson's title and description, in a form; other lessons' description as text."""
    lesson = opened.lesson
    if opened.source != "yours":
        if lesson.description:
            st.text(lessons.display_text(lesson.description), width="stretch")
        return
    tag = _tag(lesson.title, lesson.description)
    with st.expander("Title and description", icon=":material/edit:"):
        with st.form(f"lesson-form-{tag}", border=False):
            st.text_input("Lesson title", value=lesson.title, key=f"lesson-title-{tag}", max_chars=MAX_TITLE)
            st.text_area("Description (optional)", value=lesson.description, key=f"lesson-about-{tag}", height=90)
            st.form_submit_button("Save", icon=":material/save:", on_click=_retitle, args=(tag,))


def _retitle(tag: str) -> None:
    ss = st.session_state
    _edit(lambda x: lessons.edit_lesson(x, title=ss.get(f"lesson-title-{tag}") or "",
                                        description=ss.get(f"lesson-about-{tag}") or ""), "Saved the lesson's title.")


def copy_to_own(ref: str) -> None:
    """Callback: a lesson's slides added to the end of your lesson (all of it, when yours is empty)."""
    opened = player.open_ref(ref)
    if opened.lesson is None:
        return
    mine = player.own()
    if not mine.slides:
        player.set_own(opened.lesson)
        state.put("lesson", player.MINE)
        say("page", "success", f"Your lesson is now a copy of “{quoted(opened.lesson.title, 60, quote=False)}”.")
        return

    def append(lesson: lessons.Lesson) -> lessons.Lesson:
        for slide in opened.lesson.slides:
            lesson = lessons.add_slide(lesson, slide)
        return lesson

    _edit(append, f"Added its {len(opened.lesson.slides)} slides to the end of your lesson.")
    state.put("lesson", player.MINE)


def clear_own() -> None:
    player.set_own(lessons.Lesson("Your lesson"))
    say("page", "success", "Your lesson is empty again.")


# ------------------------------------------------------------------------------------------------ keeping it
def app_address(here: str) -> str:
    """The app's address in the browser, e.g. "https://class.example.org/" ("" when the browser did not say)."""
    url = (st.context.url or "").split("?")[0].split("#")[0]
    if not url.startswith(("http://", "https://")):
        return ""
    url = url.rstrip("/")
    if here and url.endswith("/" + here):
        url = url[: -len(here) - 1]
    return url + "/"


def share_link(opened: player.Opened, here: str) -> str:
    """One link that opens this lesson on the Lessons page; ValueError when it is too large for a link."""
    ref = lessons.to_link(opened.lesson) if opened.source in ("yours", "link") else opened.ref
    return f"{app_address(here)}{PLAYER}?{urllib.parse.urlencode({'lesson': ref}, quote_via=urllib.parse.quote)}"


def keep(opened: player.Opened, here: str) -> None:
    """The lesson's file to download, its link to share, and its handout (built on request, with progress)."""
    lesson = opened.lesson
    row = st.container(horizontal=True, vertical_alignment="center")
    stem = lessons.file_name(lesson).removesuffix(".lesson.json")
    try:
        download("Download the lesson file", lessons.export_bytes(lesson), lessons.file_name(lesson), "application/json",
                 where=row)
    except ValueError as err:
        row.error(literal(str(err)))
    build = row.button("Build the handout", icon=":material/description:", key="build-handout",
                       disabled=not lesson.slides, help="One HTML file that opens offline: every slide's figure, "
                                                        "talking points and a link back to its live view")
    if opened.source != "yours":
        row.button("Add these slides to your lesson", icon=":material/content_copy:", key="copy-to-own",
                   on_click=copy_to_own, args=(opened.ref,))
    elif lesson.slides:
        row.button("Empty your lesson", icon=":material/delete_sweep:", key="clear-own", on_click=clear_own)
    if build:
        progress = st.progress(0.0, text=f"Drawing {len(lesson.slides)} slides…")
        data = lessons.handout(lesson, app_address(here),
                               progress=lambda done, total: progress.progress(done / total, text=f"Slide {done} of "
                                                                                               f"{total} drawn"))
        progress.empty()
        download(f"Download the handout ({len(data) / 1e6:.1f} MB)", data, f"{stem}.handout.html", "text/html",
                 type="primary")
    try:
        link = share_link(opened, here)
    except ValueError as err:
        st.warning(literal(str(err)), icon=":material/link_off:")
        return
    st.markdown(f"**Link to this lesson** ({len(link):,} characters): anyone who opens it sees the same slides.")
    _copy_link(key=LINK, data={"link": link, "label": "Link to this lesson"}, width="stretch", height="content")
    if opened.source == "yours":
        st.caption("Your lesson lives in this tab: a reload starts afresh. Download its file or copy its link to keep "
                   "it.")


# ------------------------------------------------------------------------------------------------ opening one
def importer() -> None:
    """Open a lesson file (read in the browser) or paste a lesson link or a file's text; it becomes your lesson."""
    _file(key=FILE, data={"label": "Open a lesson file…"}, on_file_change=_file_picked, width="stretch",
          height="content")
    with st.form("paste-lesson", border=False):
        # One character past the cap gets in, so a file over it is refused for its size, not cut into broken JSON.
        st.text_area("…or paste a lesson link, or a lesson file's text", key=PASTE, height=90,
                     max_chars=MAX_BYTES + 1)
        st.form_submit_button("Open", icon=":material/file_open:", on_click=_pasted)
    st.caption(REPLACES)


def _opened(read: Callable[[], tuple[lessons.Lesson, list[str]]]) -> None:
    try:
        lesson, notes = read()
    except ValueError as err:
        say("page", "error", str(err))
        return
    player.set_own(lesson)
    state.put("lesson", player.MINE)
    state.put("slide", 0)
    count = len(lesson.slides)
    say("page", "success", f"Opened “{quoted(lesson.title, 60, quote=False)}” ({count} slide{'s' if count != 1 else ''})"
                           ": it is your lesson now.", notes)


def read_pasted(text: str) -> tuple[lessons.Lesson, list[str]]:
    """What was pasted: a lesson file's text (JSON: it starts with { or [), else a lesson link; ValueError if neither."""
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        raise ValueError("Paste a lesson link (it carries ?lesson=~…) or a lesson file's text first.")
    return lessons.loads(text) if body[0] in "{[" else lessons.from_link(body)


def _pasted() -> None:
    text = st.session_state.get(PASTE) or ""
    st.session_state[PASTE] = ""
    _opened(lambda: read_pasted(text))


def _file_picked() -> None:
    """The file component's callback: {name, size, n, data (base64) | refused}; anything else is ignored."""
    result = st.session_state.get(FILE)
    sent = result.get("file") if result is not None else None
    if not isinstance(sent, dict):
        return
    name = quoted(str(sent.get("name", "")), 60)
    size = sent.get("size") if isinstance(sent.get("size"), int) else 0
    if sent.get("refused") or size > MAX_BYTES:
        say("page", "error", f"The file {name} has {size:,} bytes, more than the {MAX_BYTES // 1000} kB a lesson file "
                             "may have; shorten its notes or split it into two lessons.")
        return
    data = sent.get("data")
    try:
        if not isinstance(data, str) or len(data) > 4 * (MAX_BYTES // 3 + 1):
            raise ValueError
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        say("page", "error", f"The file {name} did not arrive whole; open it again.")
        return
    _opened(lambda: lessons.loads(raw))

