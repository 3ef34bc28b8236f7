"""The page registry: every page's sidebar section, URL path, title, icon and script, in one table.

app.py builds the navigation from it, the quiz links to pages through it, and the tools (devkit's load generator,
the browser tests, the screenshots) walk it. Adding a page is one row here and one script (README: Adding a page).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True)
class PageEntry:
    """One page: where the sidebar lists it, its URL path and title, and the script that draws it."""

    section: str  # the sidebar's group: Explore, Teach or Use
    path: str  # the URL path, /<path> (lecturers' saved links use it: never change one)
    title: str  # what the sidebar and the quiz's links call the page
    icon: str  # a Material icon, ":material/<name>:"
    file: str  # the page script, relative to app.py
    default: bool = False  # the page served at "/"

    @property
    def url(self) -> str:
        """The URL path the sidebar links to: "/" for the default page, else "/<path>"."""
        return "/" if self.default else f"/{self.path}"


PAGES: tuple[PageEntry, ...] = (
    PageEntry("Explore", "heatmaps", "Attention", ":material/grid_on:", "views/attention.py", default=True),
    PageEntry("Explore", "inside-a-head", "Inside a head", ":material/hub:", "views/heads.py"),
    PageEntry("Explore", "statistics", "Activations", ":material/monitoring:", "views/activations.py"),
    PageEntry("Explore", "diagram", "Data flow", ":material/account_tree:", "views/dataflow.py"),
    PageEntry("Explore", "wordpieces", "Tokens & embeddings", ":material/token:", "views/tokens.py"),
    PageEntry("Teach", "side-by-side", "Compare", ":material/compare:", "views/compare.py"),
    PageEntry("Teach", "walkthrough", "Step through a layer", ":material/footprint:", "views/step.py"),
    PageEntry("Teach", "warmup", "Training stability", ":material/show_chart:", "views/stability.py"),
    PageEntry("Teach", "word-order", "Position", ":material/shuffle:", "views/position.py"),
    PageEntry("Teach", "check", "Quiz", ":material/quiz:", "views/quiz.py"),
    PageEntry("Use", "embeddings", "Sentence embeddings", ":material/scatter_plot:", "views/embeddings.py"),
    PageEntry("Use", "trajectories", "Token trajectories", ":material/timeline:", "views/trajectories.py"),
    PageEntry("Use", "knockout", "Knock out heads", ":material/block:", "views/knockout.py"),
)
BY_PATH = {entry.path: entry for entry in PAGES}


def page(path: str) -> PageEntry:
    """The page at URL path `path` ("diagram", not "/diagram"); ValueError names the paths there are."""
    if path not in BY_PATH:
        raise ValueError(f"There is no page at /{path}; the pages are at {', '.join('/' + p for p in BY_PATH)}.")
    return BY_PATH[path]


def navigation() -> dict[str, list[st.Page]]:
    """What st.navigation takes: the pages as st.Page objects, by section, in the sidebar's order."""
    sections: dict[str, list[st.Page]] = {}
    for entry in PAGES:
        sections.setdefault(entry.section, []).append(
            st.Page(entry.file, title=entry.title, icon=entry.icon, url_path=entry.path, default=entry.default))
    return sections
