"""Side-by-side comparisons: the same weights in both norm placements, and one model on two sentences."""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from .model import Encoder
from .trace import Trace


def with_norm(model: Encoder, norm: str) -> Encoder:
    """The same weights wired as Post-LN or Pre-LN: both placements share every parameter name.

    The twin shares the original's tensors (nothing here writes to them), so it costs no extra memory.
    """
    if norm == model.cfg.norm:
        return model
    cfg = model.cfg.replace(norm=norm)
    with torch.device("meta"):
        twin = Encoder(cfg)
    twin.load_state_dict(model.state_dict(), strict=True, assign=True)
    if cfg.positional == "sinusoidal":  # a non-persistent buffer is not in the state dict
        twin.embed.register_buffer("pe", model.embed.pe, persistent=False)
    twin.vocab_dir = model.vocab_dir
    return twin.eval().requires_grad_(False)


def find_token(tokens: list[str], word: str) -> int | None:
    """Position of the first token equal to `word` (case-insensitive), or None."""
    word = word.strip().lower()
    return next((i for i, t in enumerate(tokens) if t.lower() == word), None)


def token_rows(trace: Trace, index: int, layer: int) -> Tensor:
    """Attention of query token `index` over all keys, for every head of `layer`: (num_heads, seq)."""
    if not 0 <= index < trace.seq_len:
        raise ValueError(f"Token position {index} is outside the sentence (0 to {trace.seq_len - 1}).")
    return trace.attention[layer, :, index, :]


def output_summary(traces: dict[str, Trace]) -> pd.DataFrame:
    """Per-layer output statistics (mean, std, RMS) of several traces side by side."""
    frames = []
    for name, trace in traces.items():
        df = trace.stats()
        df = df[df["tap"] == "output"][["layer", "mean", "std", "rms"]].set_index("layer")
        frames.append(df.add_prefix(f"{name} "))
    return pd.concat(frames, axis=1).reset_index()
