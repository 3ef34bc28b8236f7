"""run(model, text) -> Trace: one forward pass, every tap kept as plain CPU tensors."""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import Tensor

from ._buffers import attention_arena
from .config import EncoderConfig
from .knockout import check_ablate
from .model import TAPS, Encoder, flow_order
from .tokenizer import encode, readable, special_positions, special_tokens

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
    # heads[layer]: q, k, v, z (num_heads, seq, d_head) and concat (seq, d_model), the input of W_O; z is a view of
    # concat. q is unscaled: softmax(q k^T / sqrt(d_head)) is this layer's attention.
    heads: list[dict[str, Tensor]]
    max_tokens: int  # the tokenisation was cut at this many tokens, special tokens ([CLS], [SEP]) included
    ablate: frozenset[tuple[int, int | str]] = frozenset()  # knock-outs applied: (layer, head), (layer, "attn"|"ffn")
    final: Tensor | None = None  # (seq, d_model) after the stack's final LayerNorm, if the config has one
    notice: str = ""  # e.g. a fallback from GPU to CPU
    # The tokens this model's tokenizer puts around a sentence: ("[CLS]", "[SEP]"), ("<s>", "</s>"), or () for none.
    special_tokens: tuple[str, ...] = ()
    special_positions: tuple[int, ...] = ()  # positions holding one of them (also where the text itself typed one)
    # The tokens as figures label them, one per token: byte-level BPE's "Ġthe" as "▁the" (tokenizer.readable); the
    # model reads `tokens`.
    labels: list[str] = field(default_factory=list)

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

    @functools.cached_property
    def _stats(self) -> pd.DataFrame:
        # Cached on this instance only: dataclasses.replace() makes a new Trace, which computes its own.
        return tap_stats(self.taps)

    def stats(self) -> pd.DataFrame:
        """One row per (layer, tap): mean, std, min, max, RMS, fraction of exact zeros, count of NaN/Inf."""
        return self._stats.copy()

    def first_nonfinite(self) -> tuple[int, str] | None:
        """(layer, tap) where NaN or Inf first appears in data-flow order, or None."""
        stats = self._stats
        bad = stats[stats["nonfinite"].to_numpy() > 0]  # a mask: DataFrame.query parses its string each call (~2 ms)
        if bad.empty:
            return None
        order = flow_order(self.config.norm)  # Pre-LN computes norm1 before attn: TAPS order would blame attn
        layer, tap = min(zip(bad["layer"], bad["tap"], strict=True), key=lambda lt: (lt[0], order.index(lt[1])))
        return int(layer), str(tap)


def _tap_row(x: Tensor) -> list[float]:
    """mean, std, min, max, RMS, fraction of exact zeros and NaN/Inf count of one tap; sums in float64."""
    n = x.numel()
    wide = x.reshape(-1).double()
    var, mean = torch.var_mean(wide, correction=0)
    lo, hi = torch.aminmax(x)  # exact in float32
    rms = torch.linalg.vector_norm(wide) / math.sqrt(n)
    zeros = n - int(torch.count_nonzero(x))
    mean = mean.item()
    nonfinite = 0 if math.isfinite(mean) else int((~torch.isfinite(x)).sum())  # any NaN/Inf makes the mean one
    return [mean, math.sqrt(var.item()), lo.item(), hi.item(), rms.item(), zeros / n, nonfinite]


def tap_stats(taps: list[dict[str, Tensor]]) -> pd.DataFrame:
    """Statistics of every tap of every layer as a DataFrame in layer, then data-flow order."""
    # A layer's input is the previous layer's output, and post-LN's output is its norm2: reduce each tensor once.
    seen: dict[tuple, list[float]] = {}
    rows = []
    for i, layer in enumerate(taps):
        for name in TAPS:
            x = layer[name]
            key = (x.data_ptr(), x.shape, x.stride())
            if key not in seen:
                seen[key] = _tap_row(x)
            rows.append([i, name, *seen[key]])
    df = pd.DataFrame(rows, columns=["layer", "tap", *STAT_COLUMNS])
    df["nonfinite"] = df["nonfinite"].astype(int)
    return df


def model_device(model: Encoder) -> torch.device:
    return next(model.parameters()).device


def trace_ids(
    model: Encoder,
    ids: list[int],
    tokens: list[str],
    *,
    text: str,
    truncated: bool = False,
    max_tokens: int | None = None,
    ablate: Iterable | None = None,
    train: bool = False,
    seed: int | None = None,
) -> Trace:
    """One forward pass of `model` on one sequence of token ids, kept as a Trace: the one place a Trace is built.

    train=True applies dropout for this call only, drawn from a generator seeded by `seed` (default: the
    config's seed), so the same call gives the same dropout mask in any process.
    """
    cfg, device = model.cfg, model_device(model)
    knocked = check_ablate(cfg, ablate)
    gen = torch.Generator(device=device).manual_seed(cfg.seed if seed is None else seed) if train else None
    # Inside the arena the layers write their patterns straight into `attention` (L, 1, H, T, T): no stack copy.
    with torch.inference_mode(), attention_arena(model.layers, cfg.num_heads, len(ids), device) as attention:
        emb = model.embed(torch.tensor([ids], device=device), gen)
        out, _, taps = model.forward_embedded(emb, None, gen, knocked)
    cpu = lambda t: t[0].float().cpu()  # noqa: E731  (a view, no copy, when already float32 on the CPU)
    specials = special_tokens(cfg.max_len, model.vocab_dir)
    return Trace(
        config=cfg,
        text=text,
        tokens=list(tokens),
        token_ids=list(ids),
        truncated=truncated,
        device=str(device),
        train=train,
        attention=cpu(attention.transpose(0, 1)),
        hidden_states=torch.stack([cpu(emb)] + [cpu(t["output"]) for t in taps]),
        taps=[{name: cpu(t[name]) for name in TAPS} for t in taps],
        heads=[_heads(t, cpu, cfg.num_heads) for t in taps],
        max_tokens=cfg.max_len if max_tokens is None else max_tokens,
        ablate=knocked,
        final=cpu(out) if model.final_ln is not None else None,
        special_tokens=specials,
        special_positions=special_positions(tokens, specials),
        labels=readable(tokens, cfg.max_len, model.vocab_dir),
    )


def _heads(taps: dict[str, Tensor], cpu: Callable[[Tensor], Tensor], num_heads: int) -> dict[str, Tensor]:
    """One layer's per-head taps for the trace; z is kept as a view of concat, so it costs no memory."""
    concat = cpu(taps["concat"])  # (T, D)
    z = concat.view(concat.shape[0], num_heads, -1).transpose(0, 1)  # (H, T, dh)
    return dict(q=cpu(taps["q"]), k=cpu(taps["k"]), v=cpu(taps["v"]), z=z, concat=concat)


def check_max_tokens(cfg: EncoderConfig, max_tokens: int | None) -> int:
    """The token limit to tokenise with: max_tokens, or the config's max_len; ValueError when it is out of range."""
    if max_tokens is None:
        return cfg.max_len
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, numbers.Integral) or not 2 <= max_tokens <= cfg.max_len:
        raise ValueError(
            f"max_tokens={max_tokens!r} must be a whole number from 2 to this model's max_len={cfg.max_len} "
            "(special tokens such as [CLS] and [SEP] count); sentence-transformers uses 256 for all-MiniLM-L6-v2."
        )
    return int(max_tokens)


def run(
    model: Encoder,
    text: str,
    *,
    max_tokens: int | None = None,
    ablate: Iterable | None = None,
    device: str | torch.device | None = None,
    train: bool = False,
    seed: int | None = None,
) -> Trace:
    """Tokenize `text` (at most max_tokens tokens), run one forward pass and return every tap.

    ablate knocks out heads or sub-layers for this pass only: {(layer, head), (layer, "attn"), (layer, "ffn")}.
    train=True applies seeded dropout for this pass only (see trace_ids). The model itself is never changed.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence to encode; the input is empty.")
    cfg = model.cfg
    limit = check_max_tokens(cfg, max_tokens)
    knocked = check_ablate(cfg, ablate)  # before the tokenizer and any copy of the model; ablate may be an iterator
    enc = encode(text, limit, model.vocab_dir)
    if max(enc.ids) >= cfg.vocab_size:
        raise ValueError(
            f"vocab_size={cfg.vocab_size} is smaller than the tokenizer's vocabulary; use {max(enc.ids) + 1} or more."
        )
    target = torch.device(device) if device is not None else model_device(model)
    if target != model_device(model):
        model = copy.deepcopy(model).to(target)  # a private copy: the shared model stays where it is
    return trace_ids(model, enc.ids, enc.tokens, text=text, truncated=enc.truncated, max_tokens=limit, ablate=knocked,
                     train=train, seed=seed)
