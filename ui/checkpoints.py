"""User checkpoints: BERT-style folders that the operator puts in one models directory.

Only the operator chooses where checkpoints come from (the ENCODER_EXPLORER_MODELS environment variable);
the browser only picks a folder *name* from the listing, so no path typed in the UI is ever opened, and `..`
or a symlink that leads out of the directory is refused. Weights are read as safetensors only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MODELS_ENV = "ENCODER_EXPLORER_MODELS"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def models_root() -> Path | None:
    raw = os.environ.get(MODELS_ENV, "").strip()
    if not raw:
        return None
    root = Path(raw).expanduser().resolve()
    return root if root.is_dir() else None


def list_checkpoints() -> list[str]:
    """Names of the folders in the models directory that hold a model.safetensors (sorted)."""
    root = models_root()
    if root is None:
        return []
    names = []
    for child in root.iterdir():
        if _NAME.match(child.name) and child.is_dir() and _inside(child, root) and (child / "model.safetensors").exists():
            names.append(child.name)
    return sorted(names)


def checkpoint_dir(name: str) -> Path:
    """The folder of a listed checkpoint; anything else raises ValueError."""
    root = models_root()
    if root is None:
        raise ValueError(f"No models directory is configured; an operator can set {MODELS_ENV}.")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("A checkpoint name may use letters, digits, '.', '_' and '-' only.")
    folder = root / name
    if not folder.is_dir() or not _inside(folder, root):
        raise ValueError(f"There is no checkpoint called {name!r} in the models directory.")
    return folder


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True
