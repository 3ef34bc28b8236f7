"""ALTI (Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the Transformer").

Per layer, the attention block's output after the residual and the first LayerNorm is split into one vector per
input token j: x~_ij = LN-scale_i * centre(sum_h alpha_h[i, j] f_h(x_j) + [i = j] x_i), where f_h(x_j) = v_j^h W_O^h.
What is left, LN's scale applied to W_O's bias plus LN's shift, is one bias term per row. A part's contribution is
its L1 proximity to the resultant y_i (the norm1 tap): max(0, ||y_i||_1 - ||x~_ij - y_i||_1), normalised per row,
and the layers are rolled out by multiplying those maps.

Choices, following the authors' code (mt-upc/transformer-contributions, src/contributions.py and the
`normalize_contributions(..., scaling='min_sum', resultant_norm=...)` call of their notebooks):
- the resultant y_i includes both biases; the parts do not;
- LN's scale is the row's own 1/sqrt(var + eps) (biased variance), so the parts plus the bias term equal the norm1
  tap; the authors' code divides by std(x + eps) = std(x), leaving eps out (1e-12 in all-MiniLM-L6-v2);
- the value bias b_V stays inside each token's value vector (v_j is the value tap);
- the rollout adds no residual (the maps include it already): R_l = M_l R_(l-1).

Pre-LN models: the attention block's output is x_i + Attn(LN1(x))_i, the add1 tap (LN1 acts inside each token's value
vector), so the parts are sum_h alpha_h[i, j] f_h(LN1(x)_j) + [i = j] x_i and the bias term is W_O's bias, as the
authors' code does for pre-LN models. Knocked-out heads contribute nothing; a knocked-out attention sub-layer leaves
the residual alone.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..model import Encoder
from ..trace import Trace, model_device
from . import contributions as co


def alti_parts(model: Encoder, trace: Trace, layer: int, rows: slice = slice(None)) -> tuple[Tensor, Tensor, Tensor]:
    """Layer `layer`'s attention block split per input token, for rows `rows` (R of them).

    Returns parts (R, S, D) (row i, token j), the bias term (R, D) and the resultant (R, D): parts.sum(1) + bias is
    the norm1 tap (Post-LN) or the add1 tap (Pre-LN).
    """
    co.check_supported(model, trace, "ALTI")
    device = model_device(model)
    lay = model.layers[layer]
    x, add1, norm1 = co.taps_on(trace, layer, device, "input", "add1", "norm1")
    ids = torch.arange(trace.seq_len, device=device)[rows]
    alpha = co.attention_used(trace, layer, device)[:, ids]  # (H, R, S)
    f = co.head_outputs(lay, trace.heads[layer]["v"].to(device, torch.float32))  # (H, S, D)
    b_o = torch.zeros_like(x[0]) if co.layer_knockout(trace, layer).attn else co.bias(lay.attn.out)
    if trace.config.norm == "pre":
        mixed = co.mix(alpha, f)  # (S, R, D), token-major: sum over heads of alpha f_h(x_j)
        mixed[ids, torch.arange(len(ids), device=device)] += x[ids]  # the residual: x_i is part of row i's token i
        return mixed.transpose(0, 1), b_o.expand(len(ids), -1), add1[ids]
    # Post-LN: LN1 applied per part. Centring is linear, so centre the few vectors that are mixed, not the S x S parts.
    centre = lambda t: t - t.mean(-1, keepdim=True)  # noqa: E731
    parts = co.mix(alpha, centre(f))  # (S, R, D), token-major
    parts[ids, torch.arange(len(ids), device=device)] += centre(x[ids])
    scale = co.ln_scale(lay.ln1, add1[ids])  # (R, D): gain / std of row i
    bias = centre(b_o) * scale + co.ln_affine(lay.ln1, device)[1]
    return parts.mul_(scale).transpose(0, 1), bias, norm1[ids]


def alti_scores(parts: Tensor, resultant: Tensor) -> Tensor:
    """ALTI's contributions before normalisation: max(0, ||y_i||_1 - ||x~_ij - y_i||_1), (R, S, D), (R, D) -> (R, S)."""
    # alti_parts hands out token-major tensors seen as (R, S, D): subtracting in that memory order is 3x faster.
    distance = (parts.transpose(0, 1) - resultant).abs_().sum(-1).T  # (R, S): ||x~_ij - y_i||_1
    return (resultant.abs().sum(-1, keepdim=True) - distance).clamp_min(0.0)


def alti_layers(model: Encoder, trace: Trace, progress: co.Progress | None = None) -> Tensor:
    """(L, S, S) ALTI per layer: row i, input token j, rows normalised to sum to 1."""
    co.check_supported(model, trace, "ALTI")
    seq, d_model = trace.seq_len, trace.config.d_model
    out = torch.zeros(trace.num_layers, seq, seq)
    for layer in range(trace.num_layers):
        for rows in co.row_chunks(seq, seq * d_model * 4):  # one (R, S, D) tensor per row chunk at a time
            parts, bias, resultant = alti_parts(model, trace, layer, rows)
            co.check_reproduces("ALTI", layer, "norm1" if trace.config.norm == "post" else "add1",
                                parts.sum(1) + bias, resultant)
            out[layer, rows] = co.normalise_rows(alti_scores(parts, resultant)).cpu()
        if progress is not None:
            progress(layer + 1, trace.num_layers)
    return out


co.register_with_rollout(
    "alti", "ALTI",
    "Each token's part of the attention block's output with its residual (and, Post-LN, the LayerNorm after it), "
    "scored by L1 closeness to that output, rows scaled to sum to 1 as the authors do; it ignores the feed-forward.",
    "ALTI's per-layer maps multiplied through the layers, as the authors roll them out: from each position back to "
    "the input tokens; the feed-forward sub-layers are ignored.",
    alti_layers,
)
