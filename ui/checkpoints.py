"""User checkpoints: the model folders an operator puts in one models directory, listed by name before any loads.

Only the operator chooses where checkpoints come from (the ENCODER_EXPLORER_MODELS environment variable); the
browser only picks a folder *name* from the listing, so no path typed in the UI is ever opened. Each folder of the
directory is listed: a flat model folder or a Hugging Face cache folder (models--org--name/snapshots/<rev>/), read
as far as its config.json and safetensors header go (family, size, parameter count; encoder.pretrained.describe),
without loading a weight. A folder that cannot load is listed with the one sentence that says why, and cannot be
chosen: an unknown family or missing files, a link (the folder itself or any file the loader reads) that leads out
of the directory, or a model above the memory budget. Weights are read as safetensors only; nothing downloads.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from encoder.pretrained import REQUIRED_FILES, CheckpointInfo, describe, model_folder

from .folders import name_rule, operator_folder
from .resources import budget_bytes, check_budget

MODELS_ENV = "ENCODER_EXPLORER_MODELS"
_NAME = name_rule(128)
NBSP = "\u00a0"  # keeps a number on the line of its unit in the sidebar's narrow column


@dataclass(frozen=True)
class Checkpoint:
    """One folder of the models directory: what it holds, or why it cannot load."""

    name: str
    info: CheckpointInfo | None  # None when refused
    reason: str = ""  # one sentence: why it cannot load ('' when it can)

    @property
    def summary(self) -> str:
        """Family, shape, parameters and file size in one line, e.g. "RoBERTa · 3 layers × 4 heads, d_model 32 · ..."."""
        if self.info is None:
            return ""
        cfg = self.info.config
        return (f"{self.info.label} · {cfg.num_layers} layers × {cfg.num_heads} heads, d_model{NBSP}{cfg.d_model} · "
                f"{_count(self.info.params)}{NBSP}parameters · {_size(self.info.file_bytes)}")


def models_root() -> Path | None:
    return operator_folder(MODELS_ENV)


def scan() -> list[Checkpoint]:
    """Every folder of the models directory (hidden ones left out), sorted by name, loadable or with its reason."""
    root = models_root()
    if root is None:
        return []
    found = []
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or not child.is_dir():
            continue  # the cache's .locks, stray files
        found.append(_examine(root, child))
    return found


def list_checkpoints() -> list[str]:
    """Names of the folders that load (sorted): the sidebar's choices."""
    return [c.name for c in scan() if c.info is not None]


def refused() -> list[Checkpoint]:
    """The folders that cannot load, each with its reason."""
    return [c for c in scan() if c.info is None]


def find(name: str) -> Checkpoint | None:
    """The listing's entry for a folder name, or None."""
    return next((c for c in scan() if c.name == name), None)


def checkpoint_dir(name: str) -> Path:
    """The model folder (flat, or a cache folder's snapshot) of a listed checkpoint that loads; else ValueError."""
    root = models_root()
    if root is None:
        raise ValueError(f"No models directory is configured; an operator can set {MODELS_ENV}.")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("A checkpoint name may use letters, digits, '.', '_' and '-' only.")
    entry = find(name)
    if entry is None:
        raise ValueError(f"There is no checkpoint called {name!r} in the models directory.")
    if entry.info is None:
        raise ValueError(f"The checkpoint {name!r} cannot load: {entry.reason}")
    return model_folder(root / name)


def _examine(root: Path, child: Path) -> Checkpoint:
    """A folder of the directory, checked in the order a load would fail."""
    name = child.name
    if not _NAME.match(name):
        return Checkpoint(name, None, "Its name may use letters, digits, '.', '_' and '-' only; rename the folder.")
    if not _inside(child, root):
        return Checkpoint(name, None, "It is a link that leads out of the models folder, which is never followed.")
    try:
        folder = model_folder(child)
    except ValueError as err:
        return Checkpoint(name, None, str(err))
    if not _inside(folder, root):
        return Checkpoint(name, None, "Its snapshot leads out of the models folder, which is never followed.")
    outside = [f for f in REQUIRED_FILES if (folder / f).exists() and not _inside(folder / f, root)]
    if outside:
        return Checkpoint(name, None, f"Its {outside[0]} is a link that leads out of the models folder, which is "
                                      "never followed; copy the file into the folder.")
    info, reason = _read(str(folder), _stamp(folder), budget_bytes())
    return Checkpoint(name, info, reason)


def _stamp(folder: Path) -> tuple:
    """What changes when a model folder's files change: their sizes and times (after links)."""
    stamp = []
    for f in REQUIRED_FILES:
        try:
            st = (folder / f).stat()
        except OSError:
            stamp.append(None)
            continue
        stamp.append((st.st_size, st.st_mtime_ns))
    return tuple(stamp)


@functools.lru_cache(maxsize=256)
def _read(folder: str, stamp: tuple, budget: int) -> tuple[CheckpointInfo | None, str]:
    """describe() and the budget check, once per folder, version of its files and budget (the listing runs several
    times in every script run): (what it holds, '') or (None, why it cannot load)."""
    try:
        info = describe(folder)
        check_budget(info.config)
    except ValueError as err:
        return None, str(err)
    return info, ""


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (ValueError, OSError):
        return False
    return True


def _count(n: int) -> str:
    return f"{n / 1e9:.1f}{NBSP}B" if n >= 1e9 else f"{n / 1e6:.1f}{NBSP}M" if n >= 1e5 else f"{n / 1e3:.0f}{NBSP}k"


def _size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f}{NBSP}GB"
    return f"{n / 2**20:.1f}{NBSP}MB" if n >= 2**20 else f"{n / 2**10:.0f}{NBSP}kB"
