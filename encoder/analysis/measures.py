"""What the model uses, beside raw attention: token-to-token measures from one traced forward pass, in one registry.

A measure maps a (model, trace) to how much each position takes from each token, per layer: row i of layer l's map
is position i (after layer l), column j a token. Per-layer measures look inside layer l alone (j is a position
entering that layer); cumulative ones reach back through layers 0..l to the input tokens. Every measure here is
computed from the model's own modules and the trace's taps; none changes the shared model.

The app's Measure choice, the head view's lines and the faithfulness chart all read MEASURES; adding a measure is
one `register(Measure(...))` call in the module that computes it.

Registered here: raw attention, rollout, the value-weighted norms ‖α f(x)‖ of Kobayashi et al. 2020 (row-normalised
and raw), the attention block with its residual path and LayerNorm (Kobayashi et al. 2021) and attention flow
(Abnar & Zuidema 2020). The value path reads the trace's per-head values and the layer's W_O; nothing is re-run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..model import Encoder
from ..trace import Trace
from .embeddings import attention_rollout, residual_attention


@dataclass(frozen=True)
class Maps:
    """One measure's numbers for one trace."""

    layers: Tensor  # (L, T, T): row i, column j; non-negative
    heads: Tensor | None = None  # (L, H, T, T) where the measure has a per-head form, else None
    rows: tuple[int, ...] | None = None  # the rows computed, when not all of them (e.g. flow for one token)


@dataclass(frozen=True)
class Measure:
    """A registered measure: how it is named, what it says about itself, and how it is computed."""

    key: str  # its value in the URL and the settings table
    label: str  # its name on screen
    describe: str  # one true sentence: what it includes and what it ignores
    compute: Callable[..., Maps]  # compute(model, trace, **options) -> Maps
    per_head: bool = False  # Maps.heads is set: the one-head map, the grid and the model view can show it
    cumulative: bool = False  # layer l's map reaches back through layers 0..l to the input tokens
    rows_sum_to_one: bool = True
    needs_token: bool = False  # computed for one chosen output token only (compute(..., token=i))


MEASURES: dict[str, Measure] = {}


def register(measure: Measure) -> Measure:
    """Add a measure to the registry (each key once)."""
    if measure.key in MEASURES:
        raise ValueError(f"A measure named {measure.key!r} is already registered.")
    MEASURES[measure.key] = measure
    return measure


def check_trace(trace: Trace) -> None:
    """Refuse a trace the value path cannot reproduce: with dropout on, the weights that mixed the values are unknown."""
    if trace.train:
        raise ValueError("This measure decomposes the forward pass without dropout; switch dropout (training mode) off.")


def special_positions(trace: Trace) -> tuple[int, ...]:
    """Positions of the model's special tokens ([CLS]/[SEP], <s>/</s>, ...: what its tokenizer wraps every sentence in)."""
    return trace.special_positions


def normalise_rows(x: Tensor) -> Tensor:
    """Each row (last axis) of a non-negative x divided by its sum; a row that sums to 0 stays 0, never NaN."""
    return x / x.sum(-1, keepdim=True).clamp(min=torch.finfo(x.dtype).tiny)


def special_share(maps: Maps, specials: Iterable[int]) -> Tensor:
    """(L,): per layer, the mean over rows (the computed ones) of each row's share on the special columns.

    Rows are scaled to sum 1 first, so measures with and without normalised rows compare; a zero row counts 0.
    For raw attention this is the mean over heads and rows of the weight on [CLS]/[SEP].
    """
    rows = normalise_rows(maps.layers.double())  # (L, T, T)
    if maps.rows is not None:
        rows = rows[:, list(maps.rows)]
    return rows[..., list(specials)].sum(-1).mean(-1).float()


def _knocked_heads(trace: Trace, layer: int) -> list[int]:
    """The heads whose output never reached W_O in this layer (all of them when the sub-layer was knocked out)."""
    if (layer, "attn") in trace.ablate:
        return list(range(trace.num_heads))
    return sorted(h for i, h in trace.ablate if i == layer and isinstance(h, int))


def _head_weights(model: Encoder, trace: Trace, layer: int) -> tuple[Tensor, Tensor]:
    """W_O split by head, (H, dh, D), and its bias (D,), as the forward pass used them: a knocked-out head's slice is
    zero, and a knocked-out attention sub-layer zeroes the bias too."""
    check_trace(trace)
    out = model.layers[layer].attn.out
    heads, d_head = trace.num_heads, trace.config.d_head
    # y = concat W^T + b, and concat holds head h in columns h*dh..(h+1)*dh: head h meets those rows of W^T.
    w = out.weight.detach().to("cpu", torch.float32).T.reshape(heads, d_head, -1)  # (H, dh, D), a view of W_O
    w = w.clone(memory_format=torch.contiguous_format)  # our own copy: callers change it in place
    bias = (out.bias.detach().to("cpu", torch.float32).clone() if out.bias is not None  # bias=False: no b_O
            else torch.zeros(w.shape[-1], dtype=torch.float32))
    w[_knocked_heads(trace, layer)] = 0.0
    if (layer, "attn") in trace.ablate:
        bias.zero_()
    return w, bias


def value_vectors(model: Encoder, trace: Trace, layer: int) -> tuple[Tensor, Tensor]:
    """f_h(x_j) = v_j^h W_O^h, each head's value of each token after its slice of W_O, (H, T, D), and W_O's bias (D,).

    The attention output is Σ_h Σ_j α^h_ij f_h(x_j) + b (Kobayashi et al. 2020). Knocked-out heads give zeros.
    """
    w, bias = _head_weights(model, trace, layer)
    return torch.bmm(trace.heads[layer]["v"], w), bias  # (H, T, dh) @ (H, dh, D)


def _value_heads(model: Encoder, trace: Trace, per_row: bool) -> Tensor:
    """‖α^h_ij f_h(x_j)‖ = α^h_ij ‖f_h(x_j)‖ for every layer and head, (L, H, T, T); per_row: each head's rows sum to 1."""
    out = torch.empty_like(trace.attention)
    for layer in range(trace.num_layers):
        w, _ = _head_weights(model, trace, layer)
        # ‖v W_h‖² = v (W_h W_h^T) v^T: a dh x dh Gram per head instead of the (H, T, D) values themselves.
        v = trace.heads[layer]["v"]  # (H, T, dh)
        norms = ((v @ (w @ w.transpose(1, 2))) * v).sum(-1).clamp(min=0.0).sqrt()  # (H, T)
        torch.mul(trace.attention[layer], norms[:, None, :], out=out[layer])
        if per_row:  # in place, while the layer is in cache
            out[layer].div_(out[layer].sum(-1, keepdim=True).clamp(min=torch.finfo(out.dtype).tiny))
    return out


def _live_mean(heads: Tensor, trace: Trace) -> Tensor:
    """The mean over the heads that were not knocked out, (L, H, T, T) -> (L, T, T); zeros where none is left."""
    live = torch.ones(heads.shape[:2], dtype=heads.dtype)  # (L, H)
    for layer in range(heads.shape[0]):
        live[layer, _knocked_heads(trace, layer)] = 0.0
    count = live.sum(1).clamp(min=1.0)[:, None, None]
    return torch.einsum("lh,lhij->lij", live, heads) / count


def _value_raw(model: Encoder, trace: Trace) -> Maps:
    heads = _value_heads(model, trace, per_row=False)
    return Maps(layers=_live_mean(heads, trace), heads=heads)


def _value(model: Encoder, trace: Trace) -> Maps:
    heads = _value_heads(model, trace, per_row=True)  # per head, as Kobayashi et al. 2020 compare with α
    return Maps(layers=_live_mean(heads, trace), heads=heads)


@dataclass(frozen=True)
class BlockParts:
    """The attention block's output split by input token: Σ_j parts[r, j] + rest[r] is the tap's row rows[r]."""

    parts: Tensor  # (R, T, D), float64
    rest: Tensor  # (R, D): what belongs to no token (W_O's bias, and LayerNorm's shift in Post-LN)
    rows: tuple[int, ...]
    tap: str  # "norm1" (Post-LN) or "add1" (Pre-LN)


def _block_terms(model: Encoder, trace: Trace, layer: int, out: Tensor | None = None) -> tuple[Tensor, ...]:
    """The block's per-token pieces in the space of its output: head values u (T, H, D), residual r (T, D), bias (D,)
    in float32, each row's scale 1/s (T,) and the shift (D,) in float64. Post-LN: u = γ ⊙ centred f, and so on.

    u is laid out token-major for the Gram matrices and written into `out` when given: on a server that unmaps
    every freed buffer (ui/resources.py), a fresh (T, H, D) tensor per layer costs more in page faults than its maths.
    """
    w, bias = _head_weights(model, trace, layer)
    x = trace.taps[layer]["input"]
    if trace.config.norm == "post":
        ln = model.layers[layer].ln1
        gamma = ln.weight.detach().to("cpu", torch.float32)
        # LN(y) = γ ⊙ (y − mean y) / s + β, s = sqrt(var y + eps): linear in y but for s, one number per row.
        # Centring f = v W_h is centring W_h's columns, so it is folded into the (H, dh, D) weights once.
        w.sub_(w.mean(-1, keepdim=True)).mul_(gamma)  # in place: w is _head_weights' own copy
        bias.sub_(bias.mean()).mul_(gamma)
        x = (x - x.mean(-1, keepdim=True)).mul_(gamma)
        # the forward normalised add1 in float32 too; the scale's own rounding is ~1e-7 of it
        inv_s = torch.rsqrt(trace.taps[layer]["add1"].var(-1, correction=0).double() + ln.eps)  # (T,)
        shift = (ln.bias.detach().to("cpu", torch.float64) if ln.bias is not None
                 else torch.zeros(bias.shape, dtype=torch.float64))
    else:  # Pre-LN: add1 = x + attn(LN1(x)); no LayerNorm follows inside the block
        inv_s = torch.ones(trace.seq_len, dtype=torch.float64)
        shift = torch.zeros(bias.shape, dtype=torch.float64)
    v = trace.heads[layer]["v"]  # (H, T, dh)
    u = torch.empty(v.shape[1], v.shape[0], w.shape[-1]) if out is None else out  # (T, H, D)
    for head in range(v.shape[0]):
        torch.mm(v[head], w[head], out=u[:, head])  # f_h(x_j) for every j, as u[:, h]
    return u, x, bias, inv_s, shift


def block_parts(model: Encoder, trace: Trace, layer: int, rows: Iterable[int] | None = None) -> BlockParts:
    """Token j's part of row i after the attention block (Kobayashi et al. 2021): Post-LN decomposes norm1 =
    LN(x + attn); Pre-LN decomposes add1 = x + attn(LN1(x)), since no LayerNorm follows the attention there.

    Part (i, j) = g(Σ_h α^h_ij f_h(x_j) + [i = j] x_i), with g the LayerNorm's centring and scaling at row i's
    scale (Post-LN) or the identity (Pre-LN). The biases are in `rest`. (R, T, D) floats: ask for a few rows of
    a long sentence.
    """
    u, res, bias, inv_s, shift = (t.double() for t in _block_terms(model, trace, layer))
    picked = tuple(range(trace.seq_len)) if rows is None else tuple(int(r) for r in rows)
    index = torch.tensor(picked, dtype=torch.long)
    a = trace.attention[layer][:, index].double()  # (H, R, T)
    parts = torch.einsum("hrj,jhd->rjd", a, u)  # (R, T, D)
    parts[torch.arange(len(picked)), index] += res[index]  # the residual path: token i's own vector
    scale = inv_s[index]
    return BlockParts(parts=parts * scale[:, None, None], rest=bias * scale[:, None] + shift, rows=picked,
                      tap="norm1" if trace.config.norm == "post" else "add1")


def block_norms(model: Encoder, trace: Trace, layer: int, out: Tensor | None = None) -> Tensor:
    """‖part (i, j)‖ of block_parts for every pair, (T, T) float64, without building the (T, T, D) parts.

    ‖Σ_h α^h_ij u_hj‖² = α_ij^T G_j α_ij with G_j the heads' Gram matrix at token j: T·H² numbers, not T²·D.
    Summed in float32 (the trace's precision); the lengths agree with block_parts' float64 parts to about 1e-6.
    `out` is a (T, H, D) float32 scratch buffer to reuse.
    """
    u, res, _, inv_s, _ = _block_terms(model, trace, layer, out)
    gram = torch.bmm(u, u.transpose(1, 2))  # (T, H, H): G_j
    a = trace.attention[layer].permute(2, 1, 0).contiguous()  # (T_j, T_i, H): α_ij as a vector over heads
    squared = torch.bmm(a, gram).mul_(a).sum(-1).T.double()  # (T_i, T_j)
    own = torch.diagonal(trace.attention[layer], dim1=1, dim2=2).T.contiguous()  # (T, H): α^h_ii (a view: bmm copies)
    diag = torch.bmm(own[:, None, :], u)[:, 0] + res  # (T, D): at i = j the residual path joins the attention's part
    squared.diagonal().copy_((diag.double() ** 2).sum(-1))
    return squared.clamp(min=0.0).sqrt() * inv_s[:, None]


def _block(model: Encoder, trace: Trace) -> Maps:
    check_trace(trace)
    scratch = torch.empty(trace.seq_len, trace.num_heads, trace.config.d_model)  # one (T, H, D) for every layer
    norms = torch.stack([block_norms(model, trace, layer, scratch) for layer in range(trace.num_layers)])
    return Maps(layers=normalise_rows(norms).float())


_FLOW_SCALE = 2**30  # capacities in [0, 1] as integers for scipy's solver: exact to about 1e-9, within int32
FLOW_MAX_TOKENS = 128


def attention_flow(attention: Tensor, token: int) -> Tensor:
    """Attention flow (Abnar & Zuidema 2020) into one position: (L, H, T, T) -> (L, T), each row summing to 1.

    The graph has a node per position and depth (depth 0: the input tokens); an edge from (l + 1, i) down to
    (l, j) carries residual_attention(...)[l, i, j]. Row l, column j is the maximum flow from position `token`
    after layer l to input token j, divided by the row's sum, as in the authors' code. The flows are solved by
    scipy's Dinic algorithm on integer capacities (2^30 per unit).
    """
    from scipy.sparse import csr_array  # only flow needs scipy: importing it costs the other measures nothing
    from scipy.sparse.csgraph import maximum_flow

    a = residual_attention(attention).numpy()  # (L, T, T)
    depth, seq, _ = a.shape
    caps = np.rint(a * _FLOW_SCALE).astype(np.int32)
    i, j = np.meshgrid(np.arange(seq), np.arange(seq), indexing="ij")
    out = np.zeros((depth, seq))
    for layer in range(depth):
        tails = np.concatenate([(d + 1) * seq + i.ravel() for d in range(layer + 1)])
        heads = np.concatenate([d * seq + j.ravel() for d in range(layer + 1)])
        cap = caps[: layer + 1].ravel()
        keep = cap > 0
        n = (layer + 2) * seq
        graph = csr_array((cap[keep], (tails[keep], heads[keep])), shape=(n, n))
        source = (layer + 1) * seq + token
        out[layer] = [maximum_flow(graph, source, sink).flow_value for sink in range(seq)]
    return normalise_rows(torch.from_numpy(out)).float()


def _flow(model: Encoder, trace: Trace, token: int | None = None) -> Maps:
    if token is None or isinstance(token, bool) or not isinstance(token, (int, np.integer)) \
            or not 0 <= token < trace.seq_len:
        raise ValueError(f"Attention flow is computed for one output token; choose a position from 0 to "
                         f"{trace.seq_len - 1}.")
    if trace.seq_len > FLOW_MAX_TOKENS:
        raise ValueError(f"Attention flow solves one max-flow problem per token and layer; it is offered up to "
                         f"{FLOW_MAX_TOKENS} tokens, and this sentence has {trace.seq_len}. Shorten it.")
    layers = torch.zeros(trace.num_layers, trace.seq_len, trace.seq_len)
    layers[:, int(token)] = attention_flow(_live_attention(trace), int(token))
    return Maps(layers=layers, rows=(int(token),))


def _live_attention(trace: Trace) -> Tensor:
    """The attention averaged over the heads that were not knocked out, as one head, (L, 1, T, T); a layer whose
    attention was knocked out has zero rows, so rollout and flow carry it through the residual path alone."""
    return _live_mean(trace.attention, trace)[:, None]


def _raw(model: Encoder, trace: Trace) -> Maps:
    return Maps(layers=trace.attention.mean(1), heads=trace.attention)


def _rollout(model: Encoder, trace: Trace) -> Maps:
    return Maps(layers=attention_rollout(_live_attention(trace)))


# In the order the Measure choice lists them.
register(Measure("raw", "Raw attention", "The softmax weights alone: they ignore how long each value vector is, the "
                 "residual path, LayerNorm and the feed-forward sub-layer.", _raw, per_head=True))
register(Measure("value", "Value-weighted", "Each head's weight times the length of the token's value after W_O, "
                 "‖α f(x)‖, rows scaled to sum 1 per head: it ignores the residual path, LayerNorm and the "
                 "feed-forward sub-layer.", _value, per_head=True))
register(Measure("value_raw", "Value-weighted (unscaled)", "Each head's weight times the length of the token's value "
                 "after W_O, ‖α f(x)‖, as a length: it ignores the residual path, LayerNorm and the feed-forward "
                 "sub-layer.", _value_raw, per_head=True, rows_sum_to_one=False))
register(Measure("block", "With residual and norm", "How long token j's part of position i is after the attention "
                 "block, through the values, W_O, the residual path and LayerNorm's scaling (Pre-LN: the sum before "
                 "the next LayerNorm), rows scaled to sum 1: it ignores the biases and the feed-forward sub-layer.",
                 _block))
register(Measure("rollout", "Rollout", "Head-averaged attention mixed half and half with the residual path and "
                 "multiplied through the layers: it ignores the values, W_O, LayerNorm and the feed-forward sub-layer.",
                 _rollout, cumulative=True))
register(Measure("flow", "Attention flow", "The maximum flow from each input token to the chosen token through the "
                 "head-averaged attention with the residual path, for that one token: it ignores the values, W_O, "
                 "LayerNorm and the feed-forward sub-layer.", _flow, cumulative=True, needs_token=True))
