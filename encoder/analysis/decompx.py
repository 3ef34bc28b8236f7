"""DecompX (Modarressi et al. 2023, "DecompX: Explaining Transformers Decisions by Propagating Token Decomposition").

Every position's vector is carried as a sum of one part per input token, (S, S, D): row s, token k. Through a layer
(Post-LN, the paper's setting), following the authors' code (mohsenfayyaz/DecompX, src/modeling_bert.py, with the
configuration their demos use: biases included, bias_decomp_type "absdot", FFN_approx_type "GeLU_ZO", both
LayerNorms, aggregation "vector"):
- attention: each part goes through W_V (without its bias), the heads' attention weights and W_O; W_O applied to the
  value bias, plus W_O's bias, is one bias; the residual adds the layer's input parts;
- a bias is split over the parts of a row in proportion to |part . bias| ("absdot");
- LayerNorm: each part is centred on its own mean and multiplied by gain / std of the whole row; the shift is split
  by absdot;
- FFN: each part goes through W1, b1 is split by absdot, the activation is replaced per element by its zero-origin
  slope at the operating point, act(h) / h (Phi(h) for GELU, 1[h > 0] for ReLU), then W2, and b2 is split by absdot;
- the first layer (and every layer of the per-layer view) starts from one part per token, the layer's input x_k,
  and keeps the value bias inside each token's value vector, as the authors' code does when it has no incoming parts.

Every step is linear in the parts given the row's own numbers (std, h), so the parts of every layer sum to that
layer's output tap. The maps are the parts' norms, normalised per row. "Aggregated" carries the parts through all
layers (row s, input token k); "per layer" decomposes each layer alone (row s, position k entering the layer).

Memory: the parts are S x S x d_model floats per layer; the layers are streamed (one incoming, one value-projected
copy), and a model whose two copies would pass MAX_BYTES is refused with the token count that fits. Pre-LN models
are refused: the paper and the authors' code decompose the Post-LN layer only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor

from ..model import Encoder
from ..trace import Trace, model_device
from . import contributions as co
from .measures import Maps, Measure, register

MAX_BYTES = 1 << 30  # the two S x S x d_model float32 copies a layer holds at once (805 MB at 512 tokens, d_model 384)
METHOD = "DecompX"


def check_size(trace: Trace) -> None:
    """ValueError when the decomposition of this trace would pass MAX_BYTES."""
    seq, d_model = trace.seq_len, trace.config.d_model
    need = 2 * seq * seq * d_model * 4
    if need > MAX_BYTES:
        fits = math.isqrt(MAX_BYTES // (8 * d_model))
        raise ValueError(f"DecompX keeps {seq} x {seq} x {d_model} numbers per layer, twice ({need / 2**20:.0f} MB), "
                         f"over its {MAX_BYTES / 2**20:.0f} MB bound; shorten the sentence to at most {fits} tokens.")


def _ffn_parts(model: Encoder, trace: Trace, layer: int, parts: Tensor, rows: slice, device: torch.device) -> Tensor:
    """The FFN applied to the parts of rows `rows` (R, S, D) -> (R, S, D), its biases split by absdot."""
    lay, cfg = model.layers[layer], trace.config
    (norm1,) = co.taps_on(trace, layer, device, "norm1")
    w1, b1, w2, b2 = lay.ffn.w1.weight.float(), co.bias(lay.ffn.w1), lay.ffn.w2.weight.float(), co.bias(lay.ffn.w2)
    pre = norm1[rows] @ w1.T + b1  # (R, d_ff): the operating point h, recomputed from the tap
    slope = co.activation_slope(cfg.activation, pre)  # (R, d_ff)
    r, s, d = parts.shape
    d_ff = w1.shape[0]
    # b1's shares: |part W1^T . b1| = |part . (b1 W1)|, computed in d_model.
    dots = (parts @ (b1 @ w1)).abs_()  # (R, S)
    total = dots.sum(-1, keepdim=True)
    shares = torch.where(total > 0, dots / torch.where(total > 0, total, 1.0), 1.0 / s)  # (R, S)
    if 2 * s * d_ff <= d * d_ff + s * d:  # fewer multiplications part by part than through one matrix per row
        hidden = (parts.reshape(r * s, d) @ w1.T).view(r, s, d_ff)  # (R, S, d_ff)
        hidden.mul_(slope[:, None, :])
        out = (hidden.view(r * s, d_ff) @ w2.T).view(r, s, d)
    else:  # long sentences: row s's FFN is the matrix W1^T diag(slope_s) W2^T, (R, D, D), applied to its S parts
        out = torch.bmm(parts, (w1.T * slope[:, None, :]) @ w2.T)
    out += shares[..., None] * ((slope * b1) @ w2.T)[:, None, :]  # b1's share after the slope and W2
    return co.split_bias(out, b2)


def _layer(model: Encoder, trace: Trace, layer: int, parts: Tensor | None, device: torch.device) -> Tensor:
    """One Post-LN layer's output parts (S, S, D) from its input parts (S, S, D), or from x_k alone when parts is None.

    When parts is given it is overwritten with the result, row chunk by row chunk (each row's residual is read first).
    """
    lay, cfg, off = model.layers[layer], trace.config, co.layer_knockout(trace, layer)
    seq, d_model, heads, d_head = trace.seq_len, cfg.d_model, cfg.num_heads, cfg.d_head
    x, add1, add2 = co.taps_on(trace, layer, device, "input", "add1", "add2")
    alpha = co.attention_used(trace, layer, device)  # (H, S, S)
    attends = not off.attn
    w_o = lay.attn.out.weight.float()
    if parts is None:
        f = co.head_outputs(lay, trace.heads[layer]["v"].to(device, torch.float32))  # (H, S, D), value bias inside
        shift = co.bias(lay.attn.out)
        out = torch.empty(seq, seq, d_model, device=device)
    else:
        w_v, b_v = co.value_weight(lay)
        on = torch.ones(heads, device=device)
        if off.heads:
            on[list(off.heads)] = 0.0
        shift = w_o @ (b_v * on.repeat_interleave(d_head)) + co.bias(lay.attn.out)  # W_O b_V over live heads, + b_O
        # The value path of every part, head-major so one matmul per head mixes the rows: (H, S_src, S * d_head).
        values = torch.empty(heads, seq, seq * d_head, device=device)
        flat = parts.view(seq * seq, d_model)
        for h in range(heads):
            values[h] = (flat @ w_v[h * d_head:(h + 1) * d_head].T).view(seq, seq * d_head)
        out = parts
    width = max(cfg.d_ff, heads * d_head) * 4 * seq * 3
    for rows in co.row_chunks(seq, width):
        r = rows.stop - rows.start
        if parts is None:
            res = torch.zeros(r, seq, d_model, device=device)
            res[torch.arange(r, device=device), torch.arange(rows.start, rows.stop, device=device)] = x[rows]
            if attends:
                res += co.mix(alpha[:, rows], f).transpose(0, 1)
        else:
            res = parts[rows].clone()  # the residual: this row's incoming parts
            if attends:
                mixed = torch.bmm(alpha[:, rows], values)  # (H, R, S * d_head)
                mixed = mixed.view(heads, r * seq, d_head).permute(1, 0, 2).reshape(r * seq, heads * d_head)
                res += (mixed @ w_o.T).view(r, seq, d_model)
        if attends:
            co.split_bias(res, shift)
        res = co.split_bias(co.ln_parts(res, co.ln_scale(lay.ln1, add1[rows])[:, None]), co.ln_affine(lay.ln1, device)[1])
        if not off.ffn:
            res += _ffn_parts(model, trace, layer, res, rows, device)
        out[rows] = co.split_bias(co.ln_parts(res, co.ln_scale(lay.ln2, add2[rows])[:, None]), co.ln_affine(lay.ln2, device)[1])
    return out


def decompose(model: Encoder, trace: Trace, carry: bool = True) -> Iterator[Tensor]:
    """Yield each layer's output parts (S, S, D): row s, token k, summing over k to the layer's output tap.

    carry=True (DecompX's aggregation "vector"): k is an input token, the parts carried through the layers before.
    carry=False: each layer alone, k a position entering that layer. The yielded tensor is reused by the next layer.
    """
    co.check_supported(model, trace, METHOD, norms=("post",))
    check_size(trace)
    device = model_device(model)
    parts = None
    for layer in range(trace.num_layers):
        out = _layer(model, trace, layer, parts if carry else None, device)
        (output,) = co.taps_on(trace, layer, device, "output")
        co.check_reproduces(METHOD, layer, "output", out.sum(1), output)
        yield out
        parts = out


def decompx_layers(model: Encoder, trace: Trace, carry: bool = True, progress: co.Progress | None = None) -> Tensor:
    """(L, S, S) the norms of the parts, row-normalised: row s, token k (carry=True) or entering position (False)."""
    maps = torch.zeros(trace.num_layers, trace.seq_len, trace.seq_len)
    with torch.inference_mode():
        for layer, parts in enumerate(decompose(model, trace, carry)):
            maps[layer] = co.normalise_rows(torch.linalg.vector_norm(parts, dim=-1)).cpu()
            if progress is not None:
                progress(layer + 1, trace.num_layers)
    return maps


def final_parts(model: Encoder, trace: Trace) -> Tensor:
    """(S, S, D) the last layer's output parts per input token, for projecting onto a target direction."""
    with torch.inference_mode():
        *_, parts = decompose(model, trace, carry=True)
    return parts.cpu()


def _decompx(model: Encoder, trace: Trace, progress: co.Progress | None = None) -> Maps:
    return Maps(layers=decompx_layers(model, trace, True, progress))


def _decompx_layer(model: Encoder, trace: Trace, progress: co.Progress | None = None) -> Maps:
    return Maps(layers=decompx_layers(model, trace, False, progress))


register(Measure(
    "decompx", "DecompX (aggregated)",
    "The norm of each input token's part of a position's vector, carried through attention, both LayerNorms and the "
    "FFN (its activation taken as act(h)/h at the operating point, biases shared by |part . bias|), rows summing to 1.",
    _decompx, cumulative=True,
))
register(Measure(
    "decompx_layer", "DecompX (per layer)",
    "DecompX for one layer alone: the norm of each entering position's part of the layer's output, through attention, "
    "both LayerNorms and the FFN (activation taken as act(h)/h at the operating point), rows summing to 1.",
    _decompx_layer,
))
