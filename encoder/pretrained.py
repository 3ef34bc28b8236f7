"""Load a Hugging Face encoder folder (config.json + model.safetensors + tokenizer.json) into our own Encoder.

The family (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT) comes from config.json; its
reader and tensor map are in encoder/families. A folder is loaded only when every key and tensor is accounted
for; otherwise a ValueError says what is missing or unknown. A folder laid out as the Hugging Face cache
(models--org--name/snapshots/<revision>/) works as a flat one.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from .config import EncoderConfig
from .families import Family, check_names, family_of, state_dict, strip_prefix
from .model import Encoder, pick_device
from .tokenizer import bundled_model_dir, tokenizer

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_REVISION = re.compile(r"^[0-9A-Za-z._-]{1,128}$")


def model_folder(folder: str | Path) -> Path:
    """The folder holding the model files: `folder` itself, or the snapshot a Hugging Face cache folder points at."""
    folder = Path(folder)
    snapshots = folder / "snapshots"
    if (folder / "config.json").exists() or not snapshots.is_dir():
        return folder
    ref = folder / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8", errors="replace").strip()
        if _REVISION.match(revision) and (snapshots / revision).is_dir():
            return snapshots / revision
    revisions = sorted(d for d in snapshots.iterdir() if d.is_dir())
    if len(revisions) == 1:
        return revisions[0]
    if not revisions:
        raise ValueError(f"The model folder {folder.name!r} has an empty snapshots folder; download the model again.")
    raise ValueError(f"The model folder {folder.name!r} holds {len(revisions)} snapshots and no refs/main naming one; "
                     "point at the snapshot folder you want (snapshots/<revision>).")


def read_config(folder: Path) -> dict:
    """config.json of a model folder as a dict; ValueError when it is not a JSON object."""
    try:
        hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"config.json in {folder.name!r} is not valid JSON ({err}).") from None
    if not isinstance(hf, dict):
        raise ValueError(f"config.json in {folder.name!r} is not a JSON object.")
    return hf


def _open(folder: str | Path | None) -> tuple[Path, dict[str, Any], Family, EncoderConfig]:
    """The model folder, its config.json, its family and our config for it; ValueError when any is missing or unknown."""
    folder = model_folder(folder) if folder is not None else bundled_model_dir()
    if not folder.is_dir():
        raise ValueError(f"The model folder {folder.name!r} does not exist.")
    absent = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if absent:
        hint = " (only safetensors weights are read; save with safe_serialization=True)" if (
            "model.safetensors" in absent and (folder / "pytorch_model.bin").exists()) else ""
        raise ValueError(f"The model folder {folder.name!r} is missing {', '.join(absent)}{hint}.")
    hf = read_config(folder)
    family = family_of(hf)
    return folder, hf, family, family.read_config(hf)


@dataclass(frozen=True)
class CheckpointInfo:
    """What a model folder holds, read from config.json and the safetensors header without loading any weights."""

    family: str  # config.json's model_type: "bert", "roberta", ...
    label: str  # for sentences: "RoBERTa"
    config: EncoderConfig  # the config the loader builds (DistilBERT's sinusoid shows once the table is read)
    params: int  # numbers in the encoder's tensors (task heads such as a pooler or an LM head not counted)
    file_bytes: int  # size of model.safetensors


def describe(folder: str | Path) -> CheckpointInfo:
    """Family, config, parameter count and file size of a model folder, checked as far as names go; no weights read.

    Raises the loader's ValueError for an unknown family, a config key we do not implement, or tensors missing or
    left over, so a listing can say which folders would load before any is loaded.
    """
    folder, _, family, cfg = _open(folder)
    path = folder / "model.safetensors"
    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = strip_prefix({name: f.get_slice(name).get_shape() for name in f.keys()}, family.prefix)
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"model.safetensors in {folder.name!r} could not be read ({err}).") from None
    wanted, _ = check_names(family, cfg, shapes)
    return CheckpointInfo(family=family.name, label=family.label, config=cfg,
                          params=sum(math.prod(shapes[name]) for name in wanted), file_bytes=path.stat().st_size)


_GLOBAL_RNG = threading.Lock()  # held while a load draws from, and then restores, torch's global RNG


def load_pretrained(folder: str | Path | None = None, device: str | torch.device | None = None) -> Encoder:
    """Our Encoder filled with a checkpoint of a supported family; default: the bundled all-MiniLM-L6-v2."""
    folder, hf, family, cfg = _open(folder)
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"model.safetensors in {folder.name!r} could not be read ({err}).") from None
    cfg = family.settle(cfg, hf, weights)
    state, _heads = state_dict(family, cfg, weights)  # the task heads (pooler, LM head) are not the encoder
    tokenizer(cfg.max_len, folder)  # a malformed tokenizer.json is refused now, not at the first sentence
    # Built on the CPU, not the meta device: meta's init goes through torch._refs, which imports torch._dynamo
    # (1.2-1.7 s of cold start; benchmarks/RESULTS-app.md). The random init is overwritten below, and fork_rng
    # keeps it from moving the caller's global RNG. fork_rng saves and restores process-wide state, so two sessions
    # loading at once take turns: otherwise one could restore a state the other had already moved.
    with _GLOBAL_RNG, torch.random.fork_rng(devices=[]):
        model = Encoder(cfg)
    expected = model.state_dict()
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(
                f"Shape mismatch for {name}: the checkpoint has {tuple(tensor.shape)}, "
                f"config.json implies {tuple(expected[name].shape)}."
            )
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
    model.tie_layers()  # ALBERT: assign=True gave each layer parameter objects of its own
    model.vocab_dir = folder
    model.family = family.name
    return model.to(pick_device(device)).eval().requires_grad_(False)
