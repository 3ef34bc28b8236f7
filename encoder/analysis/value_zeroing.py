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
    gain, shift = ln.weight.float(), co.bias(ln)
    w1, b1, w2, b2 = lay.ffn.w1.weight.float(), co.bias(lay.ffn.w1), lay.ffn.w2.weight.float(), co.bias(lay.ffn.w2)
    # LN(a - d) W1^T = (gain * centre(a)) W1^T / s' - (gain * centre(d)) W1^T / s' + shift W1^T, s' the new row's std.
    base = ((add1 - add1.mean(-1, keepdim=True)) * gain) @ w1.T  # (S, d_ff)
    per_head = ((f - f.mean(-1, keepdim=True)) * gain) @ w1.T  # (H, S, d_ff)
    const = shift @ w1.T + b1  # (d_ff,)

    def outputs(delta: Tensor, weights: Tensor | None = None, heads_w1: Tensor | None = None) -> Tensor:
        """The layer's output when the attention outputs lose `delta` (C, S, D), the sum over heads of weights (C, S, H)
        times f_h(x_t); heads_w1 (C, H, d_ff) is (gain * centre(f_h(x_t))) W1^T, the same loss in front of W1."""
        changed = add1 - delta  # (C, S, D): add1 with the zeroed token's share taken out
        inv = torch.rsqrt(changed.var(-1, unbiased=False, keepdim=True) + ln.eps)  # (C, S, 1): the new rows' LN scale
        normed = F.layer_norm(changed, (cfg.d_model,), gain, shift, ln.eps)
        if off.ffn:
            ffn = torch.zeros_like(normed)
        else:
            pre = base.expand(len(delta), -1, -1)
            if weights is not None:  # (C, S, d_ff): base - sum_h alpha_h[i, t] (gain * centre(f_h(x_t))) W1^T
                pre = torch.baddbmm(pre, weights, heads_w1, alpha=-1.0)
            hidden = lay.ffn.act(pre * inv + const)  # act(LN(.) W1^T + b1)
            ffn = hidden @ w2.T + b2
        if cfg.norm == "post":
            return F.layer_norm(normed + ffn, (cfg.d_model,), lay.ln2.weight, lay.ln2.bias, lay.ln2.eps)
        return changed + ffn

    # The intact layer rebuilt by the same algebra must be the output tap, or this model is not the one written here.
    intact = outputs(torch.zeros(1, seq, cfg.d_model, device=device))[0]
    co.check_reproduces("Value Zeroing", layer, "output", intact, output)
    # Batched over the zeroed token t: weights[t, i, h] = alpha_h[i, t]; bmm over t contracts the heads.
    weights_all = alpha.permute(2, 1, 0).contiguous()  # (S, S, H)
    f_t = f.transpose(0, 1).contiguous()  # (S, H, D): token t's f_h
    per_head_all = per_head.transpose(0, 1).contiguous()  # (S, H, d_ff)
    dist = torch.empty(seq, seq)
    for cols in co.row_chunks(seq, 3 * seq * cfg.d_ff * 4):  # the hidden tensors dominate
        weights = weights_all[cols]
        delta = torch.bmm(weights, f_t[cols])  # (C, S, D): what token t's values added to row i
        dist[:, cols] = co.cosine_distance(outputs(delta, weights, per_head_all[cols]), output).T.cpu()
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
