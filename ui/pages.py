"""The page registry: every page's sidebar section, URL path, title and icon in one table, and the way a page script
runs inside the frame.

app.py builds its navigation here (navigate, run); the quiz links to pages through the table; the tools (devkit's
load generator, the browser tests, the screenshots) walk it. Adding a page is one row here and one script,
pages/<URL path>.py (README: Adding a page).

Why each script is named after its URL path: with a folder called pages/ beside app.py, Streamlit 1.67 serves the
first script run after a server start with its legacy router, which knows pages by file name only and runs before
app.py could call st.navigation. A first request for a path that is no file stem got a "Page not found" dialog; a
path that is a file stem runs that script alone, without the frame, and show() then sends it through the frame.
The legacy router's sidebar, which lists file names, is hidden by .streamlit/config.toml (showSidebarNavigation).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
from streamlit.navigation.page import StreamlitPage

FOLDER = "pages"  # beside app.py
APP_TITLE, APP_ICON = "Encoder Explorer", "🔎"  # the browser tab's
_NAVIGATION = "navigation pages"  # session key of this session's st.Page objects


@dataclass(frozen=True)
class PageEntry:
    """One page: where the sidebar lists it, its URL path and title; its script is pages/<path>.py."""

    section: str  # the sidebar's group: Explore, Teach or Use
    path: str  # the URL path, /<path>, and the script's name (lecturers' saved links use it: never change one)
    title: str  # what the sidebar and the quiz's links call the page
    icon: str  # a Material icon, ":material/<name>:"
    default: bool = False  # the page served at "/" (and at /<path>)

    @property
    def file(self) -> str:
        """The page script, relative to app.py."""
        return f"{FOLDER}/{self.path}.py"

    @property
    def url(self) -> str:
        """The URL path the sidebar links to: "/" for the default page, else "/<path>"."""
        return "/" if self.default else f"/{self.path}"


PAGES: tuple[PageEntry, ...] = (
    PageEntry("Explore", "heatmaps", "Attention", ":material/grid_on:", default=True),
    PageEntry("Explore", "inside-a-head", "Inside a head", ":material/hub:"),
    PageEntry("Explore", "statistics", "Activations", ":material/monitoring:"),
    PageEntry("Explore", "diagram", "Data flow", ":material/account_tree:"),
    PageEntry("Explore", "wordpieces", "Tokens & embeddings", ":material/token:"),
    PageEntry("Teach", "lessons", "Lessons", ":material/slideshow:"),
    PageEntry("Teach", "side-by-side", "Compare", ":material/compare:"),
    PageEntry("Teach", "walkthrough", "Step through a layer", ":material/footprint:"),
    PageEntry("Teach", "warmup", "Training stability", ":material/show_chart:"),
    PageEntry("Teach", "word-order", "Position", ":material/shuffle:"),
    PageEntry("Teach", "check", "Quiz", ":material/quiz:"),
    PageEntry("Use", "embeddings", "Sentence embeddings", ":material/scatter_plot:"),
    PageEntry("Use", "trajectories", "Token trajectories", ":material/timeline:"),
    PageEntry("Use", "knockout", "Knock out heads", ":material/block:"),
    PageEntry("Use", "why-similar", "Why are these similar?", ":material/manage_search:"),
)
BY_PATH = {entry.path: entry for entry in PAGES}
_IN_FRAME = contextvars.ContextVar("in_frame", default=False)  # True while app.py runs the chosen page


def page(path: str) -> PageEntry:
    """The page at URL path `path` ("diagram", not "/diagram"); ValueError names the paths there are."""
    if path not in BY_PATH:
        raise ValueError(f"There is no page at /{path}; the pages are at {', '.join('/' + p for p in BY_PATH)}.")
    return BY_PATH[path]


def navigation() -> dict[str, list[StreamlitPage]]:
    """What st.navigation takes: the pages by section, in the sidebar's order. The default page is served at "/";
    a hidden twin at its own path keeps saved links such as /heatmaps working without a second sidebar entry."""
    sections: dict[str, list[StreamlitPage]] = {}
    for entry in PAGES:
        sections.setdefault(entry.section, []).append(st.Page(
            entry.file, title=entry.title, icon=entry.icon, url_path="" if entry.default else entry.path,
            default=entry.default))
        if entry.default:
            sections[entry.section].append(st.Page(entry.file, title=entry.title, icon=entry.icon, url_path=entry.path,
                                                   visibility="hidden"))
    return sections


def navigate() -> StreamlitPage:
    """The tab's title and icon, the wide layout, and st.navigation over PAGES in the sidebar: the first thing a run
    sends. The page it chose is run with run()."""
    # Before the navigation: in a run that sets no icon of its own the browser shows the page's Material icon as the
    # tab's icon, fetched from fonts.gstatic.com, and nothing may leave the machine.
    st.set_page_config(page_title=APP_TITLE, page_icon=APP_ICON, layout="wide")
    if st.get_option("client.showSidebarNavigation") is False:  # off only for the legacy router (module docstring)
        st.set_option("client.showSidebarNavigation", True)
    # Built once per session (st.Page resolves its script's path: ~2 ms of every run), never shared between sessions:
    # st.navigation marks the chosen page callable, and a page shared by two sessions' runs at once could refuse one.
    built = st.session_state.get(_NAVIGATION)
    if built is None:
        built = st.session_state[_NAVIGATION] = navigation()
    return st.navigation(built)


def run(chosen: StreamlitPage) -> None:
    """Run the page navigate() chose, inside the frame (so its show() draws it)."""
    token = _IN_FRAME.set(True)
    try:
        chosen.run()
    finally:
        _IN_FRAME.reset(token)


def show(draw: Callable[[], None]) -> None:
    """The last line of every page script: `pages.show(page)` draws the page inside the frame.

    Run alone by the legacy router (a server's first request, see the module docstring), the script draws nothing:
    the frame's navigation ends that router for the life of the process, and a rerun serves the same URL, query
    string included, through app.py.
    """
    if _IN_FRAME.get():
        draw()
    else:
        navigate()
        st.rerun()
