"""Value Zeroing (Mohebbi et al. 2023, "Quantifying Context Mixing in Transformers").

Per layer and input token t: set t's value vectors to zero in every head (the attention weights stay as computed),
recompute that layer's output, and score each position i by the cosine distance between its new and its intact
output. Row i, column t; rows normalised to sum to 1, as the authors' demo (hmohebbi/ValueZeroing, demo.py) does.

Choices, following the authors' code (modeling/customized_modeling_bert.py zeroes `value_layer`, the value vectors
with their bias, after the softmax): the whole value vector v_t = x_t W_V + b_V is zeroed; the layer's input is the
intact previous layer's output (layer by layer, not cascaded); the distance is 1 - cos, computed here as
|a/|a| - b/|b||^2 / 2 so that the small distances keep their digits. The rollout multiplies the per-layer maps
without adding a residual, as the demo's `compute_joint_attention(..., res=False)`.

The S re-runs of a layer are one batch: zeroing v_t changes row i's attention output by -sum_h alpha_h[i, t] f_h(x_t)
(f_h = v W_O^h), and the first FFN matrix is applied per head before the batch (LayerNorm's centring and gain are
linear, its scale is one number per row), so only the second FFN matrix runs on all S x S rows. Knocked-out heads are
already zero and zeroing their values changes nothing; with the whole attention sub-layer knocked out no value
reaches the output and every row is 0. Pre-LN layers are recomputed as they run (x + Attn, then x + FFN(LN2(.))).
Each layer's output tap is compared; a stack's final LayerNorm, where the config has one, is not applied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model import Encoder
from ..trace import Trace, model_device
from . import contributions as co


def zeroing_distances(model: Encoder, trace: Trace, layer: int) -> Tensor:
    """(S, S) cosine distance of position i's layer output (row) with token t's values zeroed (column) to the intact one."""
    co.check_supported(model, trace, "Value Zeroing")
    device = model_device(model)
    cfg, lay, off = trace.config, model.layers[layer], co.layer_knockout(trace, layer)
    seq = trace.seq_len
    alpha = co.attention_used(trace, layer, device)  # (H, S, S)
    if off.attn or not alpha.any():
        return torch.zeros(seq, seq)
    add1, output = co.taps_on(trace, layer, device, "add1", "output")
    f = co.head_outputs(lay, trace.heads[layer]["v"].to(device, torch.float32))  # (H, S, D)
    # The LayerNorm in front of the FFN: ln1 after the residual (Post-LN), ln2 (Pre-LN).
    ln = lay.ln1 if cfg.norm == "post" else lay.ln2
    gain, shift = co.ln_affine(ln, device)
    w1, b1, w2, b2 = lay.ffn.w1.weight.float(), co.bias(lay.ffn.w1), lay.ffn.w2.weight.float(), co.bias(lay.ffn.w2)
    # LN(a - d) W1^T = (gain * centre(a)) W1^T / s' - (gain * centre(d)) W1^T / s' + shift W1^T, s' the new row's std.
    base = ((add1 - add1.mean(-1, keepdim=True)) * gain) @ w1.T  # (S, d_ff)
    per_head = ((f - f.mean(-1, keepdim=True)) * gain) @ w1.T  # (H, S, d_ff)
    const = shift @ w1.T + b1  # (d_ff,)

    # The residual the FFN's output is added to: LN's output (Post-LN) or its input (Pre-LN), with b2 folded in
    # (unless the FFN is knocked out, which drops b2 too).
    b2 = torch.zeros_like(b2) if off.ffn else b2

    act_ = torch.relu_ if cfg.activation == "relu" else torch.ops.aten.gelu_  # in place: no fresh d_ff-wide tensor

    def outputs(weights: Tensor | None = None, heads_f: Tensor | None = None, heads_w1: Tensor | None = None,
                buf: Tensor | None = None) -> Tensor:
        """The layer's output with the attention outputs short of sum_h weights[t, i, h] f_h(x_t): weights (C, S, H),
        heads_f (C, H, D) is f_h(x_t) and heads_w1 (C, H, d_ff) is (gain * centre(f_h(x_t))) W1^T; buf (C, S, d_ff)
        is scratch. No weights: the intact layer. -> (C, S, D)."""
        changed = add1[None] if weights is None else torch.baddbmm(add1, weights, heads_f, alpha=-1.0)  # (C, S, D)
        if cfg.norm == "post":
            residual, _, inv = torch.native_layer_norm(changed, (cfg.d_model,), gain, shift + b2, ln.eps)
        else:
            inv = torch.rsqrt(changed.var(-1, unbiased=False, keepdim=True) + ln.eps)
            residual = changed + b2
        if off.ffn:
            add2 = residual
        else:
            if weights is None:
                pre = base[None].clone()
            else:  # (C, S, d_ff): base - sum_h alpha_h[i, t] (gain * centre(f_h(x_t))) W1^T
                pre = torch.baddbmm(base, weights, heads_w1, alpha=-1.0, out=buf[: len(weights)])
            act_(torch.addcmul(const, pre, inv, out=pre))  # act(LN(.) W1^T + b1), inv the new rows' 1/std
            add2 = torch.addmm(residual.reshape(-1, cfg.d_model), pre.view(-1, cfg.d_ff), w2.T).view(residual.shape)
        if cfg.norm == "post":
            return F.layer_norm(add2, (cfg.d_model,), lay.ln2.weight, lay.ln2.bias, lay.ln2.eps)
        return add2

    # The intact layer rebuilt by the same algebra must be the output tap, or this model is not the one written here.
    co.check_reproduces("Value Zeroing", layer, "output", outputs()[0], output)
    # Batched over the zeroed token t: weights[t, i, h] = alpha_h[i, t]; bmm over t contracts the heads.
    weights_all = alpha.permute(2, 1, 0).contiguous()  # (S, S, H)
    f_t = f.transpose(0, 1).contiguous()  # (S, H, D): token t's f_h
    per_head_t = per_head.transpose(0, 1).contiguous()  # (S, H, d_ff)
    chunks = list(co.row_chunks(seq, seq * cfg.d_ff * 4))  # the d_ff-wide scratch dominates
    buf = torch.empty(chunks[0].stop, seq, cfg.d_ff, device=device)
    dist = torch.empty(seq, seq)
    for cols in chunks:
        changed = outputs(weights_all[cols], f_t[cols], per_head_t[cols], buf)
        dist[:, cols] = co.cosine_distance(changed, output).T.cpu()
    return dist


def zeroing_layers(model: Encoder, trace: Trace, progress: co.Progress | None = None) -> Tensor:
    """(L, S, S) Value Zeroing per layer: row i, zeroed token t, rows normalised to sum to 1 (all 0 when nothing moved)."""
    co.check_supported(model, trace, "Value Zeroing")
    out = torch.zeros(trace.num_layers, trace.seq_len, trace.seq_len)
    for layer in range(trace.num_layers):
        out[layer] = co.normalise_rows(zeroing_distances(model, trace, layer))
        if progress is not None:
            progress(layer + 1, trace.num_layers)
    return out


co.register_with_rollout(
    "value_zeroing", "Value Zeroing",
    "How far each position's layer output turns (cosine distance) when one token's value vectors are zeroed in every "
    "head, scaled to sum to 1; it keeps the attention weights fixed and looks at one layer at a time.",
    "Value Zeroing's per-layer maps multiplied through the layers, as the authors' demo does: an estimate of how "
    "each position mixes the input tokens, not a re-run with a token zeroed in every layer.",
    zeroing_layers,
)
