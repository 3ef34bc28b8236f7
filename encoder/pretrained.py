"""Load a Hugging Face encoder folder (config.json + model.safetensors + tokenizer.json) into our own Encoder.

The family (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT) comes from config.json; its
reader and tensor map are in encoder/families. A folder is loaded only when every key and tensor is accounted
for; otherwise a ValueError says what is missing or unknown. A folder laid out as the Hugging Face cache
(models--org--name/snapshots/<revision>/) works as a flat one.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .families import family_of, state_dict
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


_GLOBAL_RNG = threading.Lock()  # held while a load draws from, and then restores, torch's global RNG


def load_pretrained(folder: str | Path | None = None, device: str | torch.device | None = None) -> Encoder:
    """Our Encoder filled with a checkpoint of a supported family; default: the bundled all-MiniLM-L6-v2."""
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
    cfg = family.read_config(hf)
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
