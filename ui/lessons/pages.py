"""The app's pages as lessons need them: URL path, title and page script, from the page registry (ui/pages.py)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import pages as registry


@dataclass(frozen=True)
class Page:
    """One page of the app: `path` is its URL path ("inside-a-head"), `script` the file st.switch_page takes."""

    path: str
    title: str
    script: str
    default: bool = False

    @property
    def url(self) -> str:
        """The path a link opens it with: Streamlit serves the default page at "/" whatever its url_path."""
        return "/" if self.default else "/" + self.path


PLAYER = "lessons"  # the Lessons page (pages/lessons.py) picks and plays lessons: it is no view a slide can show


@functools.cache
def pages() -> dict[str, Page]:
    """Every page a slide can show, by URL path, in navigation order: all but the Lessons page."""
    return {e.path: Page(e.path, e.title, e.file, e.default) for e in registry.PAGES if e.path != PLAYER}


def default_page() -> Page:
    """The page "/" opens."""
    everything = list(pages().values())
    return next((p for p in everything if p.default), everything[0])


def page_named(path: str) -> Page | None:
    """The page for a URL path as a user may write it ("/diagram", "diagram", "" or "/" for the default page)."""
    name = path.strip().strip("/")
    if not name:
        return default_page()
    return pages().get(name)
