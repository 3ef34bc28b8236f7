"""Side-by-side comparisons: the same weights in both norm placements, and one model on two sentences."""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from ..config import EncoderConfig
from ..model import Encoder, sinusoidal_table
from ..tokenizer import SPACE_MARK
from ..trace import Trace


def variant_config(config: EncoderConfig, **changes: object) -> EncoderConfig:
    """The config of variant(model, **changes): RoBERTa's position offset goes with its table when that is left out."""
    if changes.get("positional", "learned") != "learned" and config.pos_offset:
        changes = {**changes, "pos_offset": 0}
    return config.replace(**changes)


def variant(model: Encoder, **changes: object) -> Encoder:
    """The same weights under a changed config, e.g. norm="pre" or positional="none".

    Post-LN and Pre-LN share every parameter name, so one state dict loads into both; a variant without
    positions simply leaves the position table out. The variant shares the original's tensors (nothing here
    writes to them), so it costs no extra memory.
    """
    cfg = variant_config(model.cfg, **changes)
    if cfg == model.cfg:
        return model
    with torch.device("meta"):
        twin = Encoder(cfg)
    source = model.state_dict()
    missing = [name for name in twin.state_dict() if name not in source]
    if missing:
        raise ValueError(f"These weights cannot be reused under {changes}: {', '.join(missing[:3])} would be new.")
    twin.load_state_dict({k: source[k] for k in twin.state_dict()}, strict=True, assign=True)
    if cfg.positional == "sinusoidal":  # a non-persistent buffer is not in the state dict
        width = cfg.d_embed or cfg.d_model
        pe = model.embed.pe if model.cfg.positional == "sinusoidal" else sinusoidal_table(cfg.max_len, width)
        twin.embed.register_buffer("pe", pe.to(next(model.parameters()).device), persistent=False)
    twin.tie_layers()
    twin.vocab_dir, twin.family = model.vocab_dir, model.family
    return twin.eval().requires_grad_(False)


def find_token(tokens: list[str], word: str) -> int | None:
    """Position of the first token equal to `word` (case-insensitive), or None.

    A word-start mark ("▁", as Trace.labels show SentencePiece's and byte-level BPE's leading space) is ignored on
    both sides, so "it" finds RoBERTa's "▁it" as it finds BERT's "it".
    """
    def bare(text: str) -> str:
        return text.strip().lower().removeprefix(SPACE_MARK)

    word = bare(word)
    return next((i for i, t in enumerate(tokens) if bare(t) == word), None)


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
