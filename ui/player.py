"""The lesson player (issue 21): which lesson is open or playing, its slides as live views, the lesson bar and keys.

Everything the player needs is in the settings store, so the URL holds it (ui/state.py):
- `lesson`: the lesson's reference: a built-in's name, "folder:NAME" (the operator's folder), MINE (this session's
  own lesson, ui/authoring.py) or a share link's "~…" value, which holds a user's lesson whole.
- `slide`: the slide playing, from 1; 0 when no lesson plays. `points`: the talking points unfolded. `answer`: the
  slide's answer revealed.
The view is the ordinary settings. Opening a slide puts the slide's settings into the store (the player's own are
kept) and switches to its page, so a reload or a shared link resumes at the same slide, with whatever the lecturer
changed live; "Back to the slide" puts the slide's settings back. Leaving the lesson keeps the view on screen.

Buttons and keys change the store in callbacks. A callback cannot switch pages, so it leaves the page to open in the
session (GOTO); app.py calls follow() before anything is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from . import BAR_SAYS, check_url_values, lessons, literal, settings, state
from . import pages as registry
from .components import register
from .lessons.format import NOT_IN_SLIDES, PACKED
from .lessons.library import FOLDER
from .lessons.pages import page_named

MINE = "mine"  # the `lesson` of this session's own lesson (it lives in the store, never in a link)
OWN = "own lesson"  # its place in the store, beside the settings: ui.settings.to_query writes only SETTINGS
GOTO = "player: open page"  # the URL path a callback asked to open
KEYS = "lesson-keys"  # the key component's Streamlit key
BAR = "lesson-bar"  # the bar's container key: CSS class st-key-lesson-bar
TITLE = "lesson-title"
# In presentation mode the bar sits in the empty middle of Streamlit's header band (which stays on screen), so a
# slide keeps the frame's height and its main figure stays whole on a projector; on a narrow screen it flows.
# Static CSS: no user text goes into it.
PRESENT_CSS = (
    ".st-key-lesson-bar {position: fixed; top: 0.55rem; left: 3.4rem; right: 3.4rem; z-index: 999991; width: auto; "
    "justify-content: center; pointer-events: none;} .st-key-lesson-bar > * {pointer-events: auto;} "
    "@media (max-width: 860px) {.st-key-lesson-bar {position: static; justify-content: flex-start;}} "
    ".st-key-lesson-title h1 {font-size: 1.4rem; line-height: 1.25;} "
)
SOURCES = {"built-in": "Built in", "folder": "From the lessons folder (read-only)", "yours": "Your lesson",
           "link": "Shared by link"}

_keys = register("lesson_keys", "lesson_keys")


@dataclass(frozen=True)
class Opened:
    """A lesson as the player opened it from its reference: the lesson, or a sentence saying why there is none."""

    ref: str
    lesson: lessons.Lesson | None
    notes: tuple[str, ...] = ()  # what was repaired on reading (a file or a link)
    problem: str = ""

    @property
    def source(self) -> str:
        """"built-in", "folder", "yours" or "link"."""
        if self.ref == MINE:
            return "yours"
        if self.ref.startswith(PACKED):
            return "link"
        return "folder" if self.ref.startswith(FOLDER) else "built-in"


# ------------------------------------------------------------------------------------------------ the lessons
def own() -> lessons.Lesson:
    """This session's own lesson (empty until a view is added or a file opened)."""
    return state.store().get(OWN) or lessons.Lesson("Your lesson")


def set_own(lesson: lessons.Lesson) -> None:
    state.store()[OWN] = lesson


def open_ref(ref: str) -> Opened:
    """The lesson a reference names, or a sentence saying why it cannot be opened."""
    if ref == MINE:
        return Opened(ref, own())
    try:
        lesson, notes = lessons.open_lesson(ref)
    except ValueError as err:
        return Opened(ref, None, problem=str(err))
    except OSError:  # the operator's folder went away under us
        return Opened(ref, None, problem="This lesson's file cannot be read on this server any more.")
    return Opened(ref, lesson, tuple(notes))


def on_offer(shelf: lessons.Shelf) -> list[str]:
    """The Lesson box's choices: the built-ins, the operator's, a shared lesson being looked at, then your own."""
    refs = [entry.ref for entry in shelf.entries]
    current = state.get("lesson")
    if current.startswith(PACKED):
        refs.append(current)
    return [*refs, MINE]


def left_out_warning(shelf: lessons.Shelf) -> None:
    """Under the Lesson box: each lesson file of the operator's folder that is not offered, and what to change."""
    said = shelf.left_out
    if said:  # file names as text, never Markdown
        st.warning("\n".join(f"- {literal(sentence)}" for sentence in said), icon=":material/folder_off:")


def ref_label(ref: str) -> str:
    """How the Lesson box shows a reference: the lesson's title (plain text: Streamlit shows options literally)."""
    if ref == MINE:
        return "Your lesson"
    opened = open_ref(ref)
    title = lessons.display_text(opened.lesson.title, limit=90) if opened.lesson else "A lesson that cannot be opened"
    return {"folder": f"Folder: {title}", "link": f"Shared: {title}"}.get(opened.source, title)


# ------------------------------------------------------------------------------------------------ playing
def playing() -> tuple[Opened, int] | None:
    """The lesson playing and its slide (1-based), or None. A lesson that cannot be opened is stopped and said."""
    values = state.store()
    if values["slide"] < 1 or not values["lesson"]:
        return None
    opened = open_ref(values["lesson"])
    if opened.lesson is None or not opened.lesson.slides:
        said = opened.problem or "This lesson has no slides to play."
        st.warning(literal(f"The lesson could not be played: {said}"), icon=":material/link_off:")
        state.put("slide", 0)
        return None
    count = len(opened.lesson.slides)
    if values["slide"] > count:
        state.put("slide", count)
    return opened, state.get("slide")


def view_of(values: dict) -> dict[str, str]:
    """The view part of some settings, as a slide's query holds it (the player's own settings left out)."""
    return {k: v for k, v in settings.to_query(values).items() if k not in NOT_IN_SLIDES}


def slide_values(slide: lessons.Slide) -> dict:
    """Every setting as a slide opens it here (a model this server lacks: its first model, as a link's would)."""
    values = slide.values()
    check_url_values(values)
    return values


def show_slide(slide: lessons.Slide, number: int = 0) -> None:
    """Callback: put a slide's view into the store (the player's settings kept; `number` > 0 plays it) and ask
    for its page."""
    store = state.store()
    kept = {key: store[key] for key in NOT_IN_SLIDES} | {"answer": False}
    if number:
        kept["slide"] = number
    store.update(slide_values(slide) | kept)
    st.session_state[GOTO] = lessons.page_of(slide).path


def go(to: int) -> None:
    """Callback: open slide `to` (1-based, kept within the lesson) of the lesson playing."""
    opened = open_ref(state.get("lesson"))
    if opened.lesson is None or not opened.lesson.slides or isinstance(to, bool) or not isinstance(to, int):
        return
    to = min(max(to, 1), len(opened.lesson.slides))
    show_slide(opened.lesson.slides[to - 1], to)


def play(ref: str, at: int = 1) -> None:
    """Callback: play a lesson from slide `at`, in presentation mode. Your own lesson plays as its link, so the URL
    holds it (a lesson too large for a link plays from this session only)."""
    if ref == MINE:
        try:
            ref = lessons.to_link(own())
        except ValueError:
            pass
    state.put("lesson", ref)
    state.put("present", True)
    go(at)


def leave() -> None:
    """Callback: leave the lesson; the slide's view stays, presentation mode ends."""
    state.put("slide", 0)
    state.put("present", False)
    state.put("answer", False)
    if state.get("lesson").startswith(PACKED) and own().slides:
        try:
            if lessons.to_link(own()) == state.get("lesson"):
                state.put("lesson", MINE)  # your own lesson again, not its (long) link
        except ValueError:
            pass


def toggle(key: str) -> None:
    state.put(key, not state.get(key))


def follow(here: StreamlitPage) -> None:
    """Open the page a lesson button or key asked for (app.py, before anything is drawn). The request is kept until
    a run is on that page: a browser's rerun that reaches the server while the switch is under way can carry the old
    page and win (two quick clicks of a clicker), so the next run switches again (at most a few times)."""
    asked = st.session_state.get(GOTO)
    if asked is None:
        return
    path, tries = asked if isinstance(asked, tuple) else (asked, 0)
    entry = registry.page(path)
    if here.url_path in (entry.url.lstrip("/"), entry.path) or tries >= 3:
        del st.session_state[GOTO]
        return
    st.session_state[GOTO] = (path, tries + 1)
    st.switch_page(entry.file, query_params=settings.to_query(state.store()))


def _keyed() -> None:
    """The key component's callback: {"to": slide} from the browser; anything else is ignored."""
    result = st.session_state.get(KEYS)
    sent = result.get("go") if result is not None else None
    if isinstance(sent, dict):
        go(sent.get("to"))


# ------------------------------------------------------------------------------------------------ the bar
def title(where: object, opened: Opened, number: int) -> None:
    """The slide's title where the app's title stands (plain text: every Markdown character escaped)."""
    slide = opened.lesson.slides[number - 1]
    box = where.container(key=TITLE, width="stretch")
    box.title(literal(lessons.display_text(slide.title).replace("\n", " ")), anchor=False)


def bar(opened: Opened, number: int, here: str) -> None:
    """The lesson bar (Previous, slide i of n, Next, the talking points' fold, Back to the slide, Leave lesson and
    the keys), then the unfolded talking points and the question, and what this server cannot show of the slide.

    here: the URL path of the page on screen ("" for the default page)."""
    slides = opened.lesson.slides
    slide, count = slides[number - 1], len(slides)
    shown = page_named(here)  # None on the Lessons page
    on_page = shown is not None and shown.path == slide.page
    slide_view = view_of(slide_values(slide))
    on_slide = on_page and view_of(state.store()) == slide_view
    if on_page:  # a fragment changes settings, never the page
        st.session_state[BAR_SAYS] = (on_slide, lambda: view_of(state.store()) == slide_view)
    else:
        st.session_state.pop(BAR_SAYS, None)
    row = st.container(horizontal=True, vertical_alignment="center", key=BAR, gap="small")
    row.button("Previous", icon=":material/arrow_back:", on_click=go, args=(number - 1,), disabled=number == 1,
               help="The previous slide (← or Page Up)", key="lesson-previous")
    row.markdown(f"**{number} / {count}**", width="content")
    row.button("Next", icon=":material/arrow_forward:", icon_position="right", on_click=go, args=(number + 1,),
               disabled=number == count, help="The next slide (→, Page Down or Space)", key="lesson-next")
    asks = " · question" if slide.question is not None else ""
    row.button(f"Talking points{asks}", icon=":material/notes:", on_click=toggle, args=("points",),
               type="primary" if state.get("points") else "secondary", key="lesson-points",
               help="Fold the talking points away or out")
    if not on_slide:
        row.button("Back to the slide", icon=":material/undo:", on_click=go, args=(number,), key="lesson-back",
                   help="This slide's own view again: its page and its settings")
    row.button("Leave lesson", icon=":material/close:", on_click=leave, key="lesson-leave",
               help="Back to the app, with this view in place")
    with row:
        _keys(key=KEYS, data={"slide": number, "count": count}, on_go_change=_keyed, width="content", height="content")
    for problem in lessons.slide_problems(slide):
        st.warning(literal(f"This slide: {problem}"), icon=":material/warning:")
    if state.get("points"):
        points(slide)


def no_bar() -> None:
    """A run without the lesson bar: nothing for a fragment to bring up to date."""
    st.session_state.pop(BAR_SAYS, None)


def points(slide: lessons.Slide) -> None:
    """The talking points and the question, as plain text; the answer on request."""
    box = st.container(border=True, key="lesson-points-box")
    for point in slide.points:
        box.text("•  " + lessons.display_text(point.text), width="stretch")
    if not slide.points:
        box.text("This slide has no talking points.")
    if slide.question is not None:
        box.markdown("**Question**")
        box.text(lessons.display_text(slide.question.ask), width="stretch")
        if slide.question.answer:
            shown = state.get("answer")
            box.button("Hide the answer" if shown else "Show the answer", on_click=toggle, args=("answer",),
                       icon=":material/visibility:", key="lesson-answer")
            if shown:
                box.text(lessons.display_text(slide.question.answer), width="stretch")
