"""What ALTI, Value Zeroing and DecompX share: the models they are exact for, a layer's weights per head, and the rules
the papers share (LayerNorm applied per part, a bias split over the parts, row normalisation, rollout).

Each method recomputes pieces of a layer from the model's own modules and the trace's taps, so it is exact only for
the layer it was written for. `check_supported` refuses anything else with a sentence naming the missing piece, and
`check_reproduces` compares every reconstruction with the tap it must equal, so a model we do not understand is
refused instead of measured wrongly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn

from ..model import Encoder, EncoderLayer, Knockout, knockouts
from ..trace import Trace
from .measures import Maps, Measure, register

# The config fields these methods were written and tested against, written out: a field added to EncoderConfig later
# (gated FFNs, no biases, sliding windows...) is accepted only at its default, the 2017 layer's behaviour, until
# someone checks the algebra here against it and adds it to this set.
KNOWN_FIELDS = frozenset({
    "d_model", "num_heads", "d_ff", "num_layers", "dropout", "activation", "norm", "positional", "layer_norm_eps",
    "max_len", "vocab_size", "seed", "final_norm", "embed_norm", "type_vocab_size",
})
_CHUNK_BYTES = 64 * 2**20  # what one batch of rows may hold in its largest temporary
_ATTN_CHILDREN = {"qkv", "out", "drop"}
_FFN_CHILDREN = {"w1", "w2", "drop"}
_PLACEMENT = {"post": "Post-LN", "pre": "Pre-LN"}

Progress = Callable[[int, int], None]  # progress(done, total), called after each layer


def check_supported(model: Encoder, trace: Trace, method: str, norms: tuple[str, ...] = ("post", "pre")) -> None:
    """ValueError naming what `method` cannot handle in this model or trace; None when it is exact here."""
    cfg = trace.config
    if model.cfg != cfg:
        raise ValueError(f"{method}: this trace was computed by another model; run the sentence through this model first.")
    if trace.train:
        raise ValueError(f"{method} recomputes the layers without dropout, but this trace ran with dropout on "
                         "(training mode); switch dropout (training mode) off.")
    if (bad := trace.first_nonfinite()) is not None:
        raise ValueError(f"{method}: this trace has NaN or Inf from layer {bad[0]}'s {bad[1]} on, so there is nothing to "
                         "measure; lower the learning rate or the depth, or pick another model.")
    if cfg.norm not in norms:
        raise ValueError(f"{method} decomposes {' and '.join(_PLACEMENT[n] for n in norms)} layers only, as its paper "
                         f"and code do; this model is {_PLACEMENT[cfg.norm]}, so {method} is not computed for it.")
    for field in dataclasses.fields(cfg):
        if field.name in KNOWN_FIELDS:
            continue
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
        if getattr(cfg, field.name) != default:
            raise ValueError(f"{method} is written for the 2017 encoder layer and does not handle "
                             f"{field.name}={getattr(cfg, field.name)!r}; set it to {default!r} to use {method}.")
    if cfg.activation not in ("gelu", "relu"):
        raise ValueError(f"{method} handles the GELU and ReLU feed-forward only, not activation={cfg.activation!r}.")
    for i, layer in enumerate(model.layers):
        _check_layer(i, layer, method)


def _check_layer(i: int, layer: EncoderLayer, method: str) -> None:
    for name, module, expected in (("attention", layer.attn, _ATTN_CHILDREN), ("feed-forward", layer.ffn, _FFN_CHILDREN)):
        children = {n for n, _ in module.named_children()}
        if children != expected:
            extra = ", ".join(sorted(children ^ expected))
            raise ValueError(f"{method}: layer {i}'s {name} sub-layer has parts the method does not model ({extra}).")
    for name in ("ln1", "ln2"):
        ln = getattr(layer, name)
        if not isinstance(ln, nn.LayerNorm):  # RMSNorm, say, neither centres nor has LayerNorm's statistics
            raise ValueError(f"{method} needs LayerNorm in every layer; layer {i}'s {name} is {type(ln).__name__}.")


def check_reproduces(method: str, layer: int, tap: str, rebuilt: Tensor, actual: Tensor) -> None:
    """ValueError when a reconstruction misses the tap it must equal: the model computes something the method does not."""
    scale = 1.0 + float(actual.abs().max()) if actual.numel() else 1.0
    err = float((rebuilt - actual).abs().max()) if actual.numel() else 0.0
    if not err <= 1e-3 * scale:  # also true for NaN
        raise ValueError(f"{method}: layer {layer}'s {tap} is not reproduced by the method's algebra (off by {err:.2g}); "
                         "this model computes something the method does not model, so no number is shown.")


def layer_knockout(trace: Trace, layer: int) -> Knockout:
    """What the trace knocked out in this layer (heads, the attention or the FFN sub-layer)."""
    return knockouts(trace.config, trace.ablate)[layer]


def attention_used(trace: Trace, layer: int, device: torch.device) -> Tensor:
    """(H, S, S) the attention that reached W_O: knocked-out heads (or the whole sub-layer) as zeros."""
    off = layer_knockout(trace, layer)
    alpha = trace.attention[layer].to(device)
    if off.attn:
        return torch.zeros_like(alpha)
    if off.heads:
        alpha = alpha.index_fill(0, torch.tensor(off.heads, device=device), 0.0)
    return alpha


def bias(linear: nn.Linear) -> Tensor:
    """A linear layer's bias, or zeros for one without."""
    if linear.bias is not None:
        return linear.bias.float()
    return torch.zeros(linear.out_features, device=linear.weight.device)


def ln_affine(ln: nn.LayerNorm, device: torch.device) -> tuple[Tensor, Tensor]:
    """A LayerNorm's gain and shift, (D,) each: ones and zeros where it has none."""
    size = ln.normalized_shape[-1]
    gain = ln.weight.float() if ln.weight is not None else torch.ones(size, device=device)
    shift = ln.bias.float() if ln.bias is not None else torch.zeros(size, device=device)
    return gain, shift


def value_weight(layer: EncoderLayer) -> tuple[Tensor, Tensor]:
    """W_V (D, D) and b_V (D,): the value rows of the fused qkv projection (q | k | v, heads in order within each)."""
    d = layer.attn.out.in_features
    return layer.attn.qkv.weight[2 * d:].float(), bias(layer.attn.qkv)[2 * d:]


def head_outputs(layer: EncoderLayer, v: Tensor) -> Tensor:
    """f_h(x_j) = v_j^h W_O^h: each head's value of each token after its slice of W_O, (H, S, d_head) -> (H, S, D)."""
    heads, _, d_head = v.shape
    w_o = layer.attn.out.weight.float().view(-1, heads, d_head)  # (D, H, d_head): column block h is W_O^h
    return torch.bmm(v, w_o.permute(1, 2, 0))


def mix(alpha: Tensor, f: Tensor) -> Tensor:
    """sum_h alpha_h[i, j] f_h(x_j) for every row i and token j, token-major: (H, R, S), (H, S, D) -> (S, R, D).

    One batched matmul per token j over the heads (torch.einsum picks a far slower path for this pattern); the
    result stays in the layout bmm writes, where the elementwise steps that follow run fastest.
    """
    return torch.bmm(alpha.permute(2, 1, 0).contiguous(), f.transpose(0, 1).contiguous())


def ln_scale(ln: nn.LayerNorm, pre: Tensor) -> Tensor:
    """gamma / sqrt(var(pre) + eps) per row, (R, D): LayerNorm's scale with the statistics of the whole vector."""
    var = pre.var(-1, unbiased=False, keepdim=True)
    return ln_affine(ln, pre.device)[0] / torch.sqrt(var + ln.eps)


def ln_parts(parts: Tensor, scale: Tensor) -> Tensor:
    """LayerNorm without its shift applied to each part: (parts - their own mean) * the whole row's scale.

    parts (..., D) and scale broadcast against each other (scale (R, D) is gain / std of row r). The centring is
    linear, so the parts still sum to LN(sum) - shift.
    """
    return (parts - parts.mean(-1, keepdim=True)).mul_(scale)


def split_bias(parts: Tensor, shift: Tensor) -> Tensor:
    """Add a bias to the parts in shares |part . bias| / sum |part . bias| (DecompX's "absdot" rule), in place.

    parts (R, S, D), shift (D,) or (R, D). When every share is 0 (a zero bias, or parts orthogonal to it) the bias
    is split equally, so the parts always sum to the biased total; the authors' code drops it then.
    """
    shift = shift.expand(parts.shape[0], parts.shape[-1])
    dots = torch.bmm(parts, shift[:, :, None])[..., 0].abs_()  # (R, S)
    total = dots.sum(-1, keepdim=True)
    shares = torch.where(total > 0, dots / torch.where(total > 0, total, 1.0), 1.0 / parts.shape[1])
    return parts.add_(shares[..., None] * shift[:, None, :])


def normalise_rows(m: Tensor) -> Tensor:
    """Each row divided by its sum; a row of zeros stays zeros (never NaN)."""
    total = m.sum(-1, keepdim=True)
    return torch.where(total > 0, m / torch.where(total > 0, total, 1.0), 0.0)


def roll_out(maps: Tensor) -> Tensor:
    """(L, S, S) per-layer maps -> their products R_l = M_l R_(l-1), in float64, as the authors' rollout (no residual
    added: these maps already include it)."""
    out = torch.empty_like(maps, dtype=torch.float64)
    rolled = torch.eye(maps.shape[-1], dtype=torch.float64)
    for layer in range(maps.shape[0]):
        rolled = maps[layer].double() @ rolled
        out[layer] = rolled
    return out.float()


def row_chunks(rows: int, bytes_per_row: int) -> Iterator[slice]:
    """Slices over `rows` so that one chunk holds at most _CHUNK_BYTES of the caller's largest temporary."""
    size = max(1, _CHUNK_BYTES // max(1, bytes_per_row))
    for start in range(0, rows, size):
        yield slice(start, min(rows, start + size))


def taps_on(trace: Trace, layer: int, device: torch.device, *names: str) -> list[Tensor]:
    """The named taps of one layer on the model's device, as float32."""
    return [trace.taps[layer][name].to(device, torch.float32) for name in names]


def activation_slope(activation: str, pre: Tensor) -> Tensor:
    """act(h) / h per element, the activation's zero-origin slope: Phi(h) for GELU (GELU(h) = h Phi(h)), 1[h > 0] for ReLU.

    DecompX's "GeLU_ZO" computes GELU(h) / (h + 1e-12); Phi(h) is the same number without the division.
    """
    if activation == "gelu":
        return 0.5 * (1.0 + torch.erf(pre * 0.7071067811865476))
    return (pre > 0).to(pre.dtype)


def cosine_distance(a: Tensor, b: Tensor) -> Tensor:
    """1 - cos(a, b) over the last axis, as |a/|a| - b/|b||^2 / 2: exact near 0, where 1 - cos loses its digits."""
    ua = a / torch.linalg.vector_norm(a, dim=-1, keepdim=True).clamp_min(1e-30)
    ub = b / torch.linalg.vector_norm(b, dim=-1, keepdim=True).clamp_min(1e-30)
    return (0.5 * (ua - ub).square().sum(-1)).clamp(0.0, 2.0)


def register_with_rollout(key: str, label: str, describe: str, describe_rollout: str,
                          layers: Callable[[Encoder, Trace, Progress | None], Tensor]) -> None:
    """Register a per-layer measure (key) and its rollout (key_rollout), both computed by layers() -> (L, S, S)."""

    def per_layer(model: Encoder, trace: Trace, progress: Progress | None = None) -> Maps:
        return Maps(layers=layers(model, trace, progress))

    def rolled(model: Encoder, trace: Trace, progress: Progress | None = None) -> Maps:
        return Maps(layers=roll_out(layers(model, trace, progress)))

    register(Measure(key, f"{label} (per layer)", describe, per_layer))
    register(Measure(f"{key}_rollout", f"{label} (rolled out)", describe_rollout, rolled, cumulative=True))
