"""run(model, text) -> Trace: one forward pass, every tap kept as plain CPU tensors."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import Tensor

from .config import EncoderConfig
from .model import TAPS, Encoder
from .tokenizer import encode

STAT_COLUMNS = ("mean", "std", "min", "max", "rms", "zero_frac", "nonfinite")


@dataclass(frozen=True, eq=False)
class Trace:
    """Everything one forward pass computed, for one sentence (batch of one)."""

    config: EncoderConfig
    text: str
    tokens: list[str]
    token_ids: list[int]
    truncated: bool
    device: str
    train: bool
    attention: Tensor  # (num_layers, num_heads, seq, seq); rows sum to 1
    hidden_states: Tensor  # (num_layers + 1, seq, d_model): embeddings, then each layer's output
    taps: list[dict[str, Tensor]]  # taps[layer][name]: (seq, d_model), ffn_hidden (seq, d_ff)
    final: Tensor | None = None  # (seq, d_model) after the stack's final LayerNorm, if the config has one
    notice: str = ""  # e.g. a fallback from GPU to CPU
    _stats: list = field(default_factory=list, repr=False)

    @property
    def num_layers(self) -> int:
        return self.attention.shape[0]

    @property
    def num_heads(self) -> int:
        return self.attention.shape[1]

    @property
    def seq_len(self) -> int:
        return len(self.tokens)

    @property
    def output(self) -> Tensor:
        """The encoder's output: contextual representations for each position, (seq, d_model)."""
        return self.final if self.final is not None else self.hidden_states[-1]

    def stats(self) -> pd.DataFrame:
        """One row per (layer, tap): mean, std, min, max, RMS, fraction of exact zeros, count of NaN/Inf."""
        if not self._stats:  # computed once, in one vectorised pass per tensor shape
            self._stats.append(tap_stats(self.taps))
        return self._stats[0].copy()

    def first_nonfinite(self) -> tuple[int, str] | None:
        """(layer, tap) where NaN or Inf first appears in data-flow order, or None."""
        df = self.stats()
        bad = df[df["nonfinite"] > 0]
        if bad.empty:
            return None
        row = bad.iloc[0]
        return int(row["layer"]), str(row["tap"])


def _reduce(x: Tensor) -> Tensor:
    """x (..., seq, width) -> (..., 7) statistics over the last two dims."""
    flat = x.flatten(-2).double()
    finite = torch.isfinite(flat)
    return torch.stack(
        [
            flat.mean(-1),
            flat.std(-1, correction=0),
            flat.amin(-1),
            flat.amax(-1),
            flat.square().mean(-1).sqrt(),
            (flat == 0).double().mean(-1),
            (~finite).sum(-1).double(),
        ],
        dim=-1,
    )


def tap_stats(taps: list[dict[str, Tensor]]) -> pd.DataFrame:
    """Statistics of every tap of every layer as a DataFrame in layer, then data-flow order."""
    wide = [t for t in TAPS if t != "ffn_hidden"]
    model = _reduce(torch.stack([torch.stack([layer[t] for t in wide]) for layer in taps]))  # (L, 8, 7)
    hidden = _reduce(torch.stack([layer["ffn_hidden"] for layer in taps]))  # (L, 7)
    rows = []
    for i in range(len(taps)):
        for name in TAPS:
            vals = hidden[i] if name == "ffn_hidden" else model[i, wide.index(name)]
            rows.append([i, name, *vals.tolist()])
    df = pd.DataFrame(rows, columns=["layer", "tap", *STAT_COLUMNS])
    df["nonfinite"] = df["nonfinite"].astype(int)
    return df


def model_device(model: Encoder) -> torch.device:
    return next(model.parameters()).device


def run(
    model: Encoder, text: str, *, device: str | torch.device | None = None, train: bool = False, seed: int | None = None
) -> Trace:
    """Tokenize `text`, run one forward pass and return every tap; the model itself is never changed.

    train=True applies dropout for this call only, drawn from a generator seeded by `seed` (default: the
    config's seed), so the same call gives the same dropout mask in any process.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence to encode; the input is empty.")
    cfg = model.cfg
    enc = encode(text, cfg.max_len, model.vocab_dir)
    if max(enc.ids) >= cfg.vocab_size:
        raise ValueError(
            f"vocab_size={cfg.vocab_size} is smaller than the tokenizer's vocabulary; use {max(enc.ids) + 1} or more."
        )
    target = torch.device(device) if device is not None else model_device(model)
    if target != model_device(model):
        model = copy.deepcopy(model).to(target)  # a private copy: the shared model stays where it is
    gen = torch.Generator(device=target).manual_seed(cfg.seed if seed is None else seed) if train else None
    ids = torch.tensor([enc.ids], device=target)
    with torch.inference_mode():
        emb = model.embed(ids, gen)
        out, patterns, taps = model.forward_embedded(emb, None, gen)
    cpu = lambda t: t[0].float().cpu()  # noqa: E731
    return Trace(
        config=cfg,
        text=text,
        tokens=enc.tokens,
        token_ids=enc.ids,
        truncated=enc.truncated,
        device=str(target),
        train=train,
        attention=torch.stack([cpu(p) for p in patterns]),
        hidden_states=torch.stack([cpu(emb)] + [cpu(t["output"]) for t in taps]),
        taps=[{name: cpu(t[name]) for name in TAPS} for t in taps],
        final=cpu(out) if model.final_ln is not None else None,
    )
