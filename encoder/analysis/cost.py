"""What a config costs: parameters per sub-layer (exactly the model's) and FLOPs of one forward pass.

FLOP convention: a multiply-add counts as 2 FLOPs, so a (T, a) @ (a, b) product costs 2*T*a*b; a bias add,
a residual add or a scale costs 1 FLOP per element. The elementwise rest is an estimate, stated here once:
LayerNorm ~8 FLOPs per element (mean, variance, normalise, scale, shift), softmax ~5 per score (max,
subtract, exp, sum, divide), ReLU 1 and GELU ~8 per element. Dropout is the identity at inference: 0.
"""

from __future__ import annotations

import pandas as pd

from ..config import EncoderConfig

LAYERNORM_FLOPS = 8  # per element
SOFTMAX_FLOPS = 5  # per attention score
ACTIVATION_FLOPS = {"relu": 1, "gelu": 8}  # per hidden unit


def _layer_name(i: int) -> str:
    return f"layer {i}"


def param_counts(config: EncoderConfig) -> pd.DataFrame:
    """One row per parameter group (block, part, weights, biases, params); sums to the built model's count."""
    d, d_ff = config.d_model, config.d_ff
    rows: list[tuple[str, str, int, int]] = [("embeddings", "token embedding", config.vocab_size * d, 0)]
    if config.positional == "learned":
        rows.append(("embeddings", "position embedding", config.max_len * d, 0))
    if config.type_vocab_size:
        rows.append(("embeddings", "segment embedding", config.type_vocab_size * d, 0))
    if config.embed_norm:
        rows.append(("embeddings", "LayerNorm", d, d))
    for i in range(config.num_layers):
        block = _layer_name(i)
        # W_Q, W_K, W_V live in one (3D, D) matrix in the model; here each projection gets its own row.
        rows += [(block, f"attention {w}", d * d, d) for w in ("W_Q", "W_K", "W_V")]
        rows.append((block, "attention W_O", d * d, d))
        rows.append((block, "LayerNorm 1", d, d))
        rows.append((block, "FFN W1", d * d_ff, d_ff))
        rows.append((block, "FFN W2", d_ff * d, d))
        rows.append((block, "LayerNorm 2", d, d))
    if config.final_norm:
        rows.append(("final", "LayerNorm", d, d))
    df = pd.DataFrame(rows, columns=["block", "part", "weights", "biases"])
    df["params"] = df["weights"] + df["biases"]
    return df


def param_summary(config: EncoderConfig) -> dict[str, int]:
    """Totals for a cost panel: embeddings, one layer, all layers, final norm, total."""
    df = param_counts(config)
    by_block = df.groupby("block", sort=False)["params"].sum()
    layers = int(sum(by_block.get(_layer_name(i), 0) for i in range(config.num_layers)))
    return {
        "embeddings": int(by_block.get("embeddings", 0)),
        "per_layer": int(by_block.get(_layer_name(0), 0)),
        "layers": layers,
        "final": int(by_block.get("final", 0)),
        "total": int(df["params"].sum()),
    }


def flops(config: EncoderConfig, seq: int) -> pd.DataFrame:
    """One row per (block, part) of one forward on `seq` tokens: kind, matmul (multiply-adds x 2), other, flops."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq={seq!r} must be a whole number of tokens, 1 or more.")
    T, d, d_ff, H = seq, config.d_model, config.d_ff, config.num_heads
    ln = LAYERNORM_FLOPS * T * d
    # (block, part, matrix-product FLOPs, other FLOPs): biases, scales and elementwise ops go in the second.
    rows: list[tuple[str, str, int, int]] = []
    extra = (config.positional != "none") + (config.type_vocab_size > 0)
    rows.append(("embeddings", "lookup + position/segment adds", 0, extra * T * d))
    if config.embed_norm:
        rows.append(("embeddings", "LayerNorm", 0, ln))
    for i in range(config.num_layers):
        block = _layer_name(i)
        rows += [
            (block, "Q, K, V projections", 2 * T * d * 3 * d, T * 3 * d),
            (block, "scores QK^T / sqrt(d_head)", 2 * T * T * d, H * T * T),
            (block, "softmax", 0, SOFTMAX_FLOPS * H * T * T),
            (block, "weights x V", 2 * T * T * d, 0),
            (block, "W_O", 2 * T * d * d, T * d),
            (block, "residual add 1", 0, T * d),
            (block, "LayerNorm 1", 0, ln),
            (block, "FFN W1", 2 * T * d * d_ff, T * d_ff),
            (block, f"FFN {config.activation}", 0, ACTIVATION_FLOPS[config.activation] * T * d_ff),
            (block, "FFN W2", 2 * T * d_ff * d, T * d),
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
