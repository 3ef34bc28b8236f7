"""Where lessons come from: the built-in ones (ui/lessons/builtin/), the operator's folder, and share links.

The operator's folder (ENCODER_EXPLORER_LESSONS) follows ui/checkpoints.py's rules: only the operator chooses the
folder; the browser picks a lesson by *name* from its listing, so nothing typed in a browser becomes a path; `..`,
absolute paths and symlinks that lead out of the folder are refused, and a file over the size cap is never read
whole. Lessons from there are read-only: editing one makes an in-memory copy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from .. import check_url_values
from ..folders import name_rule, operator_folder
from .format import MAX_BYTES, PACKED, Lesson, Slide, from_link, loads
from .pages import Page, pages

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
# The built-in lessons in the order the Lessons page lists them: the layer, its attention, training, the stack, LN.
BUILTINS = ("encoder-layer", "multi-head-attention", "training-vs-inference", "stack-bert-cls", "pre-ln-post-ln")
LESSONS_ENV = "ENCODER_EXPLORER_LESSONS"
FOLDER = "folder:"  # the reference of an operator's lesson: folder:NAME
SUFFIX = ".json"
_NAME = name_rule(64)


@dataclass(frozen=True)
class Entry:
    """A lesson on offer: `ref` opens it (open_lesson), `source` is "built-in" or "folder"."""

    ref: str
    title: str
    slides: int
    source: str


def builtin_names() -> list[str]:
    return list(BUILTINS)


@functools.cache
def load_builtin(name: str) -> Lesson:
    """A built-in lesson by name (read once: lessons are immutable); they read without a note (tested)."""
    if name not in BUILTINS:
        raise ValueError(f"There is no built-in lesson {name!r}; there are {', '.join(BUILTINS)}.")
    lesson, _ = loads((BUILTIN_DIR / f"{name}{SUFFIX}").read_bytes())
    return lesson


def lessons_root() -> Path | None:
    return operator_folder(LESSONS_ENV)


def operator_names() -> list[str]:
    """Names of the lesson files (NAME.json) in the operator's folder, sorted; empty without a folder."""
    root = lessons_root()
    if root is None:
        return []
    names = []
    for child in root.iterdir():
        name = child.name.removesuffix(SUFFIX)
        if child.name.endswith(SUFFIX) and _NAME.match(name) and _readable(child, root):
            names.append(name)
    return sorted(names)


def load_operator(name: str) -> tuple[Lesson, list[str]]:
    """A lesson of the operator's folder by name -> (lesson, notes); ValueError with one sentence otherwise."""
    root = lessons_root()
    if root is None:
        raise ValueError(f"No lessons folder is configured; an operator can set {LESSONS_ENV}.")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("A lesson's name may use letters, digits, '.', '_' and '-' only.")
    path = root / f"{name}{SUFFIX}"
    if not _readable(path, root):
        raise ValueError(f"There is no lesson called {name!r} in the lessons folder.")
    with path.open("rb") as f:
        data = f.read(MAX_BYTES + 1)  # never more than the cap, whatever the file's size says meanwhile
    return loads(data)


def _readable(path: Path, root: Path) -> bool:
    """A regular file inside the folder (after following any symlink)."""
    try:
        return path.is_file() and path.resolve().parent == root
    except OSError:
        return False


def catalogue() -> list[Entry]:
    """Every lesson on offer: the built-ins, then the operator's (a file that cannot be read is left out)."""
    entries = []
    for name in BUILTINS:
        lesson = load_builtin(name)
        entries.append(Entry(name, lesson.title, len(lesson.slides), "built-in"))
    for name in operator_names():
        try:
            lesson, _ = load_operator(name)
        except (ValueError, OSError):
            continue
        entries.append(Entry(FOLDER + name, lesson.title, len(lesson.slides), "folder"))
    return entries


def open_lesson(ref: str) -> tuple[Lesson, list[str]]:
    """A lesson by reference: a built-in's name, "folder:NAME", or a share link's "~…" value."""
    if not isinstance(ref, str) or not ref:
        raise ValueError("Choose a lesson.")
    if ref.startswith(PACKED):
        return from_link(ref)
    if ref.startswith(FOLDER):
        return load_operator(ref.removeprefix(FOLDER))
    return load_builtin(ref), []


def page_of(slide: Slide) -> Page:
    """The page a slide opens (its script for st.switch_page, its title)."""
    return pages()[slide.page]


def slide_problems(slide: Slide) -> list[str]:
    """What this server cannot show as the slide says, one sentence each (e.g. a model that is not installed)."""
    return check_url_values(slide.values())
