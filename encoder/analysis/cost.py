"""What a config costs: parameters per sub-layer (exactly the model's) and FLOPs of one forward pass.

FLOP convention: a multiply-add counts as 2 FLOPs, so a (T, a) @ (a, b) product costs 2*T*a*b; a bias add,
a residual add or a scale costs 1 FLOP per element. The elementwise rest is an estimate, stated here once:
LayerNorm ~8 FLOPs per element (mean, variance, normalise, scale, shift), softmax ~5 per score (max,
subtract, exp, sum, divide), ReLU 1, GELU ~8 and SiLU ~4 per element, RoPE 3 per element of q and k. Dropout is
the identity at inference: 0. A gated FFN (GeGLU, SwiGLU) has two d_ff-wide projections and one product more.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import pandas as pd

from ..config import EncoderConfig
from ..window import scored_pairs

LAYERNORM_FLOPS = 8  # per element
SOFTMAX_FLOPS = 5  # per attention score
ROTARY_FLOPS = 3  # per element of q and k: x_i cos - x_j sin
ACTIVATION_FLOPS = {"relu": 1, "gelu": 8, "gelu_tanh": 8, "silu": 4}  # per hidden unit


def _layer_name(i: int) -> str:
    return f"layer {i}"


def _counted_layers(config: EncoderConfig) -> range:
    """The layers whose parameters are their own: all of them, or layer 0 alone when every layer shares its weights."""
    return range(1 if config.share_layers else config.num_layers)


def param_counts(config: EncoderConfig) -> pd.DataFrame:
    """One row per parameter group (block, part, weights, biases, params); sums to the built model's count.

    With share_layers only layer 0's rows appear: every layer uses those very tensors.
    """
    d, d_ff, e = config.d_model, config.d_ff, config.d_embed or config.d_model
    bias = int(config.bias)
    rows: list[tuple[str, str, int, int]] = [("embeddings", "token embedding", config.vocab_size * e, 0)]
    if config.positional == "learned":
        rows.append(("embeddings", "position embedding", (config.pos_offset + config.max_len) * e, 0))
    if config.type_vocab_size:
        rows.append(("embeddings", "segment embedding", config.type_vocab_size * e, 0))
    if config.embed_norm:
        rows.append(("embeddings", "LayerNorm", e, e * bias))
    if config.d_embed:
        rows.append(("embeddings", "projection to d_model", e * d, d * bias))
    ffn = [("FFN W1", d * d_ff, d_ff)] if config.ffn == "plain" else [
        ("FFN W (activated)", d * d_ff, d_ff), ("FFN V (linear)", d * d_ff, d_ff)]
    for i in _counted_layers(config):
        block = _layer_name(i)
        # W_Q, W_K, W_V live in one (3D, D) matrix in the model; here each projection gets its own row.
        rows += [(block, f"attention {w}", d * d, d * bias) for w in ("W_Q", "W_K", "W_V")]
        rows.append((block, "attention W_O", d * d, d * bias))
        if i or config.first_norm1:
            rows.append((block, "LayerNorm 1", d, d * bias))
        rows += [(block, part, weights, biases * bias) for part, weights, biases in ffn]
        rows.append((block, "FFN W2", d_ff * d, d * bias))
        rows.append((block, "LayerNorm 2", d, d * bias))
    if config.final_norm:
        rows.append(("final", "LayerNorm", d, d * bias))
    df = pd.DataFrame(rows, columns=["block", "part", "weights", "biases"])
    df["params"] = df["weights"] + df["biases"]
    return df


def param_summary(config: EncoderConfig) -> dict[str, int]:
    """Totals for a cost panel: embeddings, one layer (layer 0), all layers, final norm, total."""
    df = param_counts(config)
    by_block = df.groupby("block", sort=False)["params"].sum()
    layers = int(sum(by_block.get(_layer_name(i), 0) for i in _counted_layers(config)))
    return {
        "embeddings": int(by_block.get("embeddings", 0)),
        "per_layer": int(by_block.get(_layer_name(0), 0)),
        "layers": layers,
        "final": int(by_block.get("final", 0)),
        "total": int(df["params"].sum()),
    }


def flops(config: EncoderConfig, seq: int) -> pd.DataFrame:
    """One row per (block, part) of one forward on `seq` tokens: kind, matmul (multiply-adds x 2), other, flops.

    A sliding-window layer counts the scores its blocks compute (window.scored_pairs), not T^2.
    """
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq={seq!r} must be a whole number of tokens, 1 or more.")
    T, d, d_ff, H = seq, config.d_model, config.d_ff, config.num_heads
    e, bias = config.d_embed or config.d_model, int(config.bias)
    ln = LAYERNORM_FLOPS * T * d
    gated = config.ffn != "plain"
    # (block, part, matrix-product FLOPs, other FLOPs): biases, scales and elementwise ops go in the second.
    rows: list[tuple[str, str, int, int]] = []
    extra = (config.positional in ("sinusoidal", "learned")) + (config.type_vocab_size > 0)
    rows.append(("embeddings", "lookup + position/segment adds", 0, extra * T * e))
    if config.embed_norm:
        rows.append(("embeddings", "LayerNorm", 0, LAYERNORM_FLOPS * T * e))
    if config.d_embed:
        rows.append(("embeddings", "projection to d_model", 2 * T * e * d, T * d * bias))
    for i in range(config.num_layers):
        block = _layer_name(i)
        pairs = scored_pairs(T, config.layer_window(i) // 2)  # per head
        rows.append((block, "Q, K, V projections", 2 * T * d * 3 * d, T * 3 * d * bias))
        if config.positional == "rotary":
            rows.append((block, "rotary positions on Q, K", 0, ROTARY_FLOPS * 2 * T * d))
        rows += [
            (block, "scores QK^T / sqrt(d_head)", 2 * pairs * d, H * pairs),
            (block, "softmax", 0, SOFTMAX_FLOPS * H * pairs),
            (block, "weights x V", 2 * pairs * d, 0),
            (block, "W_O", 2 * T * d * d, T * d * bias),
            (block, "residual add 1", 0, T * d),
        ]
        if i or config.first_norm1:
            rows.append((block, "LayerNorm 1", 0, ln))
        rows += [
            (block, "FFN W1", 2 * T * d * (2 if gated else 1) * d_ff, (2 if gated else 1) * T * d_ff * bias),
            (block, f"FFN {config.ffn_activation}", 0, ACTIVATION_FLOPS[config.ffn_activation] * T * d_ff),
            *([(block, "FFN gate product", 0, T * d_ff)] if gated else []),
            (block, "FFN W2", 2 * T * d_ff * d, T * d * bias),
            (block, "residual add 2", 0, T * d),
            (block, "LayerNorm 2", 0, ln),
        ]
    if config.final_norm:
        rows.append(("final", "LayerNorm", 0, ln))
    df = pd.DataFrame(rows, columns=["block", "part", "matmul", "other"])
    df.insert(2, "kind", ["matmul" if m else "elementwise" for m in df["matmul"]])
    df["flops"] = df["matmul"] + df["other"]
    return df


def flops_summary(config: EncoderConfig, seq: int) -> dict[str, int]:
    """Totals of flops(): all, matmul-only, per layer; about 24*T*d^2 + 4*T^2*d per layer when d_ff = 4d."""
    df = flops(config, seq)
    return {
        "total": int(df["flops"].sum()),
        "matmul": int(df["matmul"].sum()),
        "per_layer": int(df.loc[df["block"] == _layer_name(0), "flops"].sum()),
    }


class Panel(NamedTuple):
    """What a cost panel shows: the totals, and layer 0's parameters and FLOPs by part."""
    params: dict[str, int]
    ops: dict[str, int]
    layer_params: pd.DataFrame  # part, params
    layer_flops: pd.DataFrame  # part, flops


@functools.lru_cache(maxsize=64)
def panel(config: EncoderConfig, seq: int) -> Panel:
    """The cost panel of `config` on `seq` tokens, computed once per pair (a config is frozen): the Diagram page
    shows it on every run, and building its tables took ~4 ms. The frames are shared; treat them as read-only."""
    counts, ops = param_counts(config), flops(config, seq)
    first = _layer_name(0)
    return Panel(param_summary(config), flops_summary(config, seq),
                 counts[counts["block"] == first][["part", "params"]], ops[ops["block"] == first][["part", "flops"]])
