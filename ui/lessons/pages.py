"""The app's pages as lessons need them: URL path, title and page file, read from app.py's navigation.

This is the one place the lessons learn which pages exist. It reads the `st.Page(...)` calls of app.py as text (the
frame is a Streamlit script and cannot be imported), so a page added there is a page a lesson can open. When the
page registry of issue 22 lands, `pages()` should read it instead; nothing else here needs to change.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"


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


@functools.cache
def pages() -> dict[str, Page]:
    """Every page of the app by URL path, in navigation order."""
    calls = [n for n in ast.walk(ast.parse(APP.read_text(encoding="utf-8")))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "Page"]
    found: dict[str, Page] = {}
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        words = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        script = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        if isinstance(script, str) and isinstance(words.get("url_path"), str):
            path = words["url_path"]
            found[path] = Page(path, str(words.get("title", path)), script, words.get("default") is True)
    if not found:
        raise RuntimeError(f"No st.Page(..., url_path=...) calls found in {APP.name}; lessons cannot name a page.")
    return found


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
