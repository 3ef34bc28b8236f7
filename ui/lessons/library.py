"""Where lessons come from: the built-in ones (ui/lessons/builtin/), the operator's folder, and share links.

The operator's folder (ENCODER_EXPLORER_LESSONS) follows ui/checkpoints.py's rules: only the operator chooses the
folder; the browser picks a lesson by *name* from its listing, so nothing typed in a browser becomes a path; `..`,
absolute paths and symlinks that lead out of the folder are refused, and a file over the size cap is never read
whole. Lessons from there are read-only: editing one makes an in-memory copy. A .json file of the folder that is not
offered is named by shelf() with what to change; the folder is read afresh each time, so a fixed file shows up.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from encoder.viz.text import printable

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
BAD_NAME = ("Its name may use letters, digits, '.', '_' and '-' only, start with a letter or digit and have at most 64 "
            "characters before .json; rename the file.")
MAX_LEFT_OUT = 10  # sentences left_out() gives before "and N more"


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
    files, _ = _listing()
    return [file.removesuffix(SUFFIX) for file, why in files if not why]


def _listing() -> tuple[list[tuple[str, str]], str]:
    """One listing of the operator's folder: (file name, '' or why it cannot be offered) for each file that looks
    like a lesson, sorted by lesson name, and '' or the sentence saying the server cannot list the folder. Not
    lessons, so not listed: folders, hidden files (a Mac's ._ copies) and names not ending in .json."""
    root = lessons_root()
    if root is None:
        return [], ""
    try:
        children = list(root.iterdir())
    except OSError as err:  # the built-in lessons stay on offer
        return [], (f"The server cannot list the lessons folder ({err.strerror or 'no reason given'}), so none of its "
                    "lessons is offered; check the folder's permissions.")
    found = []
    for child in children:
        if child.name.startswith(".") or not child.name.lower().endswith(SUFFIX) or child.is_dir():
            continue
        if not child.name.endswith(SUFFIX) or not _NAME.match(child.name.removesuffix(SUFFIX)):
            found.append((child.name, BAD_NAME))
        elif not _readable(child, root):
            found.append((child.name, "It is a link to a file outside the lessons folder (or to none), which is never "
                                      "followed; copy the lesson file itself into the folder."))
        else:
            found.append((child.name, ""))
    return sorted(found, key=lambda f: (f[0][: -len(SUFFIX)], f[0])), ""


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


@dataclass(frozen=True)
class Shelf:
    """What the Lessons page offers, from one listing and one read of the operator's folder: every lesson on offer
    (the built-ins first), and one sentence per lesson file that is not (MAX_LEFT_OUT at most, then how many more;
    a folder the server cannot list gives that one sentence)."""

    entries: list[Entry]
    left_out: list[str]


def shelf() -> Shelf:
    """The lessons on offer and the files left out, the folder read afresh (a fixed file shows up)."""
    builtins = {name: load_builtin(name) for name in BUILTINS}
    entries = [Entry(name, lesson.title, len(lesson.slides), "built-in") for name, lesson in builtins.items()]
    files, unlisted = _listing()
    said = []
    for file, read in _operator_lessons(files):
        if isinstance(read, Lesson):
            entries.append(Entry(FOLDER + file.removesuffix(SUFFIX), read.title, len(read.slides), "folder"))
        else:
            said.append(f"“{_shown(file)}” in the lessons folder was left out: {read}")
    if len(said) > MAX_LEFT_OUT:
        more = len(said) - MAX_LEFT_OUT
        said = [*said[:MAX_LEFT_OUT], f"And {more} more lesson file{'s were' if more > 1 else ' was'} left out."]
    return Shelf(entries, [unlisted] if unlisted else said)


def catalogue() -> list[Entry]:
    """Every lesson on offer: the built-ins, then the operator's that read (Shelf.left_out says why the others do not)."""
    return shelf().entries


def left_out() -> list[str]:
    """Shelf.left_out: one sentence per lesson file of the operator's folder that is not on offer; empty when every
    one is offered."""
    return shelf().left_out


def _operator_lessons(files: list[tuple[str, str]]) -> list[tuple[str, Lesson | str]]:
    """(file name, its lesson or the sentence why it cannot be offered) for each lesson file of a listing."""
    out: list[tuple[str, Lesson | str]] = []
    for file, why in files:
        if why:
            out.append((file, why))
            continue
        try:
            lesson, _ = load_operator(file.removesuffix(SUFFIX))
        except ValueError as err:
            out.append((file, str(err)))
        except OSError as err:  # unreadable, or gone since the folder was listed
            out.append((file, f"The server cannot read it ({err.strerror or 'no reason given'}); check its permissions."))
        else:
            out.append((file, lesson))
    return out


def _shown(file: str) -> str:
    """A file name as it may be shown: bytes that are not UTF-8 (surrogates in Python) as �, control characters
    visible, at most 80 characters."""
    return printable("".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in file), 80)


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
