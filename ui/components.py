"""The app's own browser components, each registered with the shared base joined before its own code.

ui/component_base.js (payload decoding, inflating, text-only DOM helpers, export, mount and cleanup) and
ui/component_base.css are joined with a component's ui/<stem>.js and ui/<stem>.css into one ES module and one
style sheet when the component is registered: no build step, nothing fetched from elsewhere. tests/js loads the
same join under node's test runner.

Where the app runs under a Streamlit server, the join is written to a file and served as one
(`/_stcore/bidi-components/encoder_explorer.<name>/<digest>/<stem>.js`): the browser fetches a component's code
once per page load, where inline code would travel in every run's message of every mounted component (about
0.19 MB per settled run of Inside a head, which mounts four). Streamlit serves files only for a component declared
with an asset folder, which an installed package declares in its pyproject.toml; the app is not installed, so the
declaration is made here, in the registry of the running server. The digest in the path changes with the code, so
no browser keeps an old copy. Where the folder cannot be written, the code stays inline.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.components.v2.get_bidi_component_manager import get_bidi_component_manager
from streamlit.components.v2.manifest_scanner import ComponentConfig, ComponentManifest
from streamlit.runtime import Runtime

HERE = Path(__file__).parent
BASE = "component_base"
PACKAGE = "encoder_explorer"
# Where the joined files are written, one folder per user: writable in the container too (deploy/Containerfile
# keeps /tmp writable).
OWNER = os.getuid() if hasattr(os, "getuid") else None
ASSETS = Path(tempfile.gettempdir()) / ("encoder-explorer-components" + (f"-{OWNER}" if OWNER is not None else ""))


def joined(stem: str, ext: str) -> str:
    """The base's file and the component's file of one kind ("js" or "css"), one after the other."""
    return "\n".join((HERE / f"{name}.{ext}").read_text(encoding="utf-8") for name in (BASE, stem))


def written(name: str, stem: str, code: dict[str, str], root: Path) -> dict[str, str] | None:
    """Write a component's joined code under root/<name>/<digest>/; the paths relative to root/<name>, or None.

    Each file is written whole and then renamed into place, so two servers starting together (the replicas of
    deploy/serve.sh) never serve half a file: they write the same bytes to the same path. root must be this user's
    alone: in a shared /tmp, a folder another user can write to would let them swap the code the browser runs.
    """
    digest = hashlib.sha256("\0".join(code[ext] for ext in sorted(code)).encode()).hexdigest()[:16]
    folder = root / name / digest
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        made = root.stat()
        if OWNER is not None and (made.st_uid != OWNER or made.st_mode & 0o022):
            return None
        folder.mkdir(parents=True, exist_ok=True)
        for ext, text in code.items():
            target = folder / f"{stem}.{ext}"
            if target.is_file() and target.read_text(encoding="utf-8") == text:
                continue
            fd, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, target)
    except OSError:
        return None
    return {ext: f"{digest}/{stem}.{ext}" for ext in code}


def register(name: str, stem: str, root: Path = ASSETS) -> Callable[..., Any]:
    """st.components.v2.component `encoder_explorer.<name>` from ui/<stem>.js and .css, joined with the base.

    File-backed, the folder is declared on the registry of the runtime a mount runs in, at that mount: a module is
    imported once, but AppTest gives every app its own runtime, and a declaration made on another one is not seen.
    """
    full = f"{PACKAGE}.{name}"
    code = {ext: joined(stem, ext) for ext in ("js", "css")}
    paths = written(name, stem, code, root)
    if paths is None:
        return st.components.v2.component(full, js=code["js"], css=code["css"])
    manifest = ComponentManifest(name=PACKAGE, version="1", components=[ComponentConfig(name=name, asset_dir=".")])
    made: list[Callable[..., Any]] = []
    lock = threading.Lock()

    def mount(*args: Any, **kwargs: Any) -> Any:
        if not Runtime.exists():  # bare Python draws nothing, and there is no registry to declare the folder on
            return None
        with lock:
            manager = get_bidi_component_manager()
            if manager.get_component_asset_root(full) is None:
                manager.register_from_manifest(manifest, root / name)
            if not made:
                made.append(st.components.v2.component(full, js=paths["js"], css=paths["css"]))
        return made[0](*args, **kwargs)

    return mount
