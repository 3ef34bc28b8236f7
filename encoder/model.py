"""A Transformer encoder written from the equations, in paper order: embeddings, attention, FFN, layer, stack.

Every module returns what it computed (the taps) instead of storing it: one model object is shared by all
browser sessions, so nothing here may keep per-call state. Dropout takes an explicit torch.Generator, so a
training-mode pass never touches the module's train/eval flag or the global RNG.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._buffers import pattern_buffer
from .config import EncoderConfig
from .devices import pick_device

# The attention's own taps, per head: q, k, v and z (the weighted sum of values) are (B, H, T, d_head); concat is
# Concat(z_1..z_h), (B, T, D), the tensor W_O multiplies. q is unscaled: softmax(q k^T / sqrt(d_head)) is the pattern.
HEAD_TAPS = ("q", "k", "v", "z", "concat")
SUBLAYERS = ("attn", "ffn")


@dataclass(frozen=True)
class Knockout:
    """What one layer zeroes in a forward pass: some heads' outputs before W_O, or a whole sub-layer's output."""

    heads: tuple[int, ...] = ()
    attn: bool = False
    ffn: bool = False


KEEP_ALL = Knockout()


class Dropout(nn.Module):
    """Inverted dropout; active only when a generator is passed (the trace's train mode)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor, gen: torch.Generator | None = None) -> Tensor:
        if gen is None or self.p == 0.0:
            return x
        keep = torch.rand(x.shape, generator=gen, device=gen.device).to(x.device) >= self.p
        return x * keep / (1.0 - self.p)


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), as in the paper."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = pos / torch.pow(10000.0, i / d_model)  # (T, ceil(D/2))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


class Embeddings(nn.Module):
    """Token embedding + positional encoding (+ BERT's token type and LayerNorm), then dropout."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.positional == "learned":
            self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        elif cfg.positional == "sinusoidal":
            self.register_buffer("pe", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
        self.seg = nn.Embedding(cfg.type_vocab_size, cfg.d_model) if cfg.type_vocab_size else None
        self.ln = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.embed_norm else None
        self.drop = Dropout(cfg.dropout)

    def positions(self, seq: int) -> Tensor | None:
        """The (seq, d_model) positional term, or None when the config has none."""
        if self.cfg.positional == "learned":
            return self.pos.weight[:seq]
        if self.cfg.positional == "sinusoidal":
            return self.pe[:seq]
        return None

    def forward(self, ids: Tensor, gen: torch.Generator | None = None) -> Tensor:
        x = self.tok(ids)  # (B, T, D)
        pos = self.positions(ids.shape[1])
        if pos is not None:
            x = x + pos
        if self.seg is not None:
            x = x + self.seg.weight[0]  # single-segment input: every token has type 0
        if self.ln is not None:
            x = self.ln(x)
        return self.drop(x, gen)


class MultiHeadSelfAttention(nn.Module):
    """MultiHead(X) = Concat(head_1..head_h) W_O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i; no causal mask."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.num_heads, self.d_head = cfg.num_heads, cfg.d_head
        # W_Q, W_K, W_V of all heads stacked in one matrix: one GEMM instead of 3h small ones.
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)  # W_O
        self.drop = Dropout(cfg.dropout)

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | None,
        gen: torch.Generator | None = None,
        off: Knockout = KEEP_ALL,
    ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """x (B, T, D), pad_mask (B, T) True at padding -> output (B, T, D), pattern (B, H, T, T), HEAD_TAPS."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, self.d_head).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, dh)
        buf = pattern_buffer(self, (B, self.num_heads, T, T))  # inside run(): the trace's attention tensor, else None
        # QK^T / sqrt(d_k) with the scale applied to Q: T*D multiplies instead of H*T*T, one pass less over the scores.
        scores = torch.matmul(q * (1.0 / math.sqrt(self.d_head)), k.transpose(-2, -1), out=buf)  # (B, H, T, T)
        if pad_mask is not None:
            scores.masked_fill_(pad_mask[:, None, None, :], float("-inf"))
        pattern = torch.softmax(scores, dim=-1, out=buf)  # rows sum to 1 over the keys
        z = self.drop(pattern, gen) @ v  # (B, H, T, dh): each head's weighted sum of the values
        if off.heads:  # knock-out: these heads' outputs never reach W_O
            z = z.index_fill(1, torch.tensor(off.heads, device=z.device), 0.0)
        concat = z.transpose(1, 2).reshape(B, T, D)  # (B, T, D): Concat(head_1..head_h)
        y = self.out(concat)
        if off.attn:
            y = torch.zeros_like(y)
        return y, pattern, dict(q=q, k=k, v=v, z=z, concat=concat)


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = F.relu_ if cfg.activation == "relu" else F.gelu  # ReLU in place: the pre-activation is no tap
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: Tensor, gen: torch.Generator | None = None, off: bool = False) -> tuple[Tensor, Tensor]:
        """x (B, T, D) -> hidden (B, T, d_ff), output (B, T, D); off=True knocks the output out (zeros)."""
        hidden = self.act(self.w1(x))  # (B, T, d_ff)
        y = self.w2(self.drop(hidden, gen))  # (B, T, D)
        return hidden, torch.zeros_like(y) if off else y


class Wire(NamedTuple):
    """One tap of a layer: the operation that computes it and the taps it reads, with what travels on each edge."""

    tap: str
    op: str  # "input"; "attn", "ln1", "ln2" (the layer's modules); "w1" (act(x W_1 + b_1)), "w2"; "+" (sum); "=" (same tensor)
    inputs: tuple[tuple[str, str], ...] = ()  # (tap read, edge kind)


# The wiring of one encoder layer per norm placement: its taps in the order EncoderLayer.forward computes them, and
# the data-flow edges between them. Edge kinds: "qkv" into attention; "drop1", "drop2" the dropout in front of each
# residual add; "hidden" the FFN's d_ff-wide tensor (and the dropout on it); "res" a residual connection; "" plain.
# The diagram (viz/diagram.py) and the step-through (ui/steps.py) are drawn from this table; tests/encoder/test_model.py
# runs the forward for both placements and recomputes every tap from the taps this table says it reads.
PLACEMENTS: dict[str, tuple[Wire, ...]] = {
    # Post-LN, the 2017 paper: LN(x + Dropout(Sublayer(x))).
    "post": (
        Wire("input", "input"),
        Wire("attn", "attn", (("input", "qkv"),)),
        Wire("add1", "+", (("attn", "drop1"), ("input", "res"))),
        Wire("norm1", "ln1", (("add1", ""),)),
        Wire("ffn_hidden", "w1", (("norm1", ""),)),
        Wire("ffn", "w2", (("ffn_hidden", "hidden"),)),
        Wire("add2", "+", (("ffn", "drop2"), ("norm1", "res"))),
        Wire("norm2", "ln2", (("add2", ""),)),
        Wire("output", "=", (("norm2", ""),)),
    ),
    # Pre-LN (Xiong et al. 2020): x + Dropout(Sublayer(LN(x))); the residual stream is never normalised in the layer.
    "pre": (
        Wire("input", "input"),
        Wire("norm1", "ln1", (("input", ""),)),
        Wire("attn", "attn", (("norm1", "qkv"),)),
        Wire("add1", "+", (("attn", "drop1"), ("input", "res"))),
        Wire("norm2", "ln2", (("add1", ""),)),
        Wire("ffn_hidden", "w1", (("norm2", ""),)),
        Wire("ffn", "w2", (("ffn_hidden", "hidden"),)),
        Wire("add2", "+", (("ffn", "drop2"), ("add1", "res"))),
        Wire("output", "=", (("add2", ""),)),
    ),
}
DROPOUTS = ("drop1", "drop2")  # the edge kinds that carry EncoderLayer.drop1 and drop2


def placement(norm: str) -> tuple[Wire, ...]:
    """The wiring table of a norm placement ("post" or "pre")."""
    if norm not in PLACEMENTS:
        raise ValueError(f"norm={norm!r} is not supported; choose 'post' or 'pre'.")
    return PLACEMENTS[norm]


def flow_order(norm: str) -> tuple[str, ...]:
    """The tap names in the order a Post-LN or Pre-LN layer computes them."""
    return tuple(wire.tap for wire in placement(norm))


def flow_edges(norm: str) -> list[tuple[str, str, str]]:
    """The data-flow edges (tail tap, head tap, kind) of a placement, in computation order."""
    return [(tail, wire.tap, kind) for wire in placement(norm) for tail, kind in wire.inputs]


TAPS = flow_order("post")  # the canonical order of the tap vocabulary (and of Trace.stats() rows)


class EncoderLayer(nn.Module):
    """One encoder layer; post: LN(x + Dropout(f(x))), pre: x + Dropout(f(LN(x))); wired as PLACEMENTS says."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.norm = cfg.norm
        self.attn = MultiHeadSelfAttention(cfg)
        self.ffn = FeedForward(cfg)
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.drop1 = Dropout(cfg.dropout)
        self.drop2 = Dropout(cfg.dropout)

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | None = None,
        gen: torch.Generator | None = None,
        off: Knockout = KEEP_ALL,
    ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """x (B, T, D) -> output (B, T, D), attention pattern (B, H, T, T), taps by name (TAPS and HEAD_TAPS).

        `off` zeroes knocked-out heads or sub-layers.
        """
        if self.norm == "post":
            attn, pattern, heads = self.attn(x, pad_mask, gen, off)
            add1 = x + self.drop1(attn, gen)
            norm1 = self.ln1(add1)
            hidden, ffn = self.ffn(norm1, gen, off.ffn)
            add2 = norm1 + self.drop2(ffn, gen)
            out = norm2 = self.ln2(add2)
        else:
            norm1 = self.ln1(x)
            attn, pattern, heads = self.attn(norm1, pad_mask, gen, off)
            add1 = x + self.drop1(attn, gen)
            norm2 = self.ln2(add1)
            hidden, ffn = self.ffn(norm2, gen, off.ffn)
            out = add2 = add1 + self.drop2(ffn, gen)
        taps = dict(input=x, attn=attn, add1=add1, norm1=norm1, ffn_hidden=hidden, ffn=ffn, add2=add2, norm2=norm2, output=out)
        return out, pattern, taps | heads


class Encoder(nn.Module):
    """Embeddings followed by N identical layers (6 in the original), plus an optional final LayerNorm."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.final_ln = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if cfg.final_norm else None
        self.vocab_dir = None  # folder of the tokenizer.json to use; None = the bundled WordPiece vocabulary

    def forward(
        self, ids: Tensor, pad_mask: Tensor | None = None, gen: torch.Generator | None = None, ablate: Iterable | None = None
    ) -> tuple[Tensor, list[Tensor], list[dict[str, Tensor]]]:
        """ids (B, T) -> final output (B, T, D), per-layer patterns [(B, H, T, T)], per-layer taps."""
        return self.forward_embedded(self.embed(ids, gen), pad_mask, gen, ablate)

    def forward_embedded(
        self, x: Tensor, pad_mask: Tensor | None = None, gen: torch.Generator | None = None, ablate: Iterable | None = None
    ) -> tuple[Tensor, list[Tensor], list[dict[str, Tensor]]]:
        """The layer stack on already-embedded input x (B, T, D); `ablate` as in check_ablate."""
        patterns, taps = [], []
        for layer, off in zip(self.layers, knockouts(self.cfg, ablate), strict=True):
            x, pattern, tap = layer(x, pad_mask, gen, off)
            patterns.append(pattern)
            taps.append(tap)
        if self.final_ln is not None:
            x = self.final_ln(x)
        return x, patterns, taps

    @torch.no_grad()
    def init_weights(self, gen: torch.Generator) -> None:
        """Xavier-uniform linear weights, zero biases, unit LayerNorms, N(0, 1) embeddings; all from `gen`."""
        qkv = {id(layer.attn.qkv) for layer in self.layers}  # by identity: d_ff = 3 * d_model has the same shape
        for module in self.modules():
            if isinstance(module, nn.Linear):
                fan_out, fan_in = module.weight.shape
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                if id(module) in qkv:  # Xavier per projection, as if W_Q, W_K, W_V were separate matrices
                    bound = math.sqrt(6.0 / (2 * fan_in))
                module.weight.copy_(torch.rand(module.weight.shape, generator=gen) * 2 * bound - bound)
                module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen))
        if self.cfg.positional == "sinusoidal":  # again: build_model's to_empty() leaves buffers uninitialised
            self.embed.pe.copy_(sinusoidal_table(self.cfg.max_len, self.cfg.d_model))


def _whole(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def check_ablate(cfg: EncoderConfig, ablate: Iterable | None) -> frozenset[tuple[int, int | str]]:
    """Validate knock-outs {(layer, head), (layer, "attn"), (layer, "ffn")}; ValueError names a bad one."""
    if ablate is None:
        return frozenset()
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
        raise ValueError(f"ablate={ablate!r} must be a set of pairs such as {{(0, 3), (1, 'ffn')}}.")
    items = set()
    for item in ablate:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValueError(f"ablate item {item!r} must be a pair: (layer, head), (layer, 'attn') or (layer, 'ffn').")
        layer, what = item
        if not _whole(layer) or not 0 <= layer < cfg.num_layers:
            raise ValueError(f"ablate item {tuple(item)!r}: layer {layer!r} does not exist; "
                             f"choose a layer from 0 to {cfg.num_layers - 1}.")
        if isinstance(what, str) and what not in SUBLAYERS:
            raise ValueError(f"ablate item {tuple(item)!r}: {what!r} is no sub-layer; use 'attn', 'ffn' or a head number.")
        if not isinstance(what, str) and (not _whole(what) or not 0 <= what < cfg.num_heads):
            raise ValueError(f"ablate item {tuple(item)!r}: head {what!r} does not exist; "
                             f"choose a head from 0 to {cfg.num_heads - 1}.")
        items.add((int(layer), what if isinstance(what, str) else int(what)))
    return frozenset(items)


def knockouts(cfg: EncoderConfig, ablate: Iterable | None) -> list[Knockout]:
    """check_ablate's pairs sorted into one Knockout per layer."""
    items = check_ablate(cfg, ablate)
    return [
        Knockout(
            heads=tuple(sorted(h for i, h in items if i == layer and isinstance(h, int))),
            attn=(layer, "attn") in items,
            ffn=(layer, "ffn") in items,
        )
        for layer in range(cfg.num_layers)
    ]


def build_model(config: EncoderConfig, device: str | torch.device | None = None) -> Encoder:
    """A randomly initialised Encoder, bit-identical for the same config and seed; the global RNG is untouched."""
    with torch.device("meta"):
        model = Encoder(config)  # no parameters drawn from the global RNG
    model.to_empty(device="cpu")
    model.init_weights(torch.Generator().manual_seed(config.seed))
    return model.to(pick_device(device)).eval().requires_grad_(False)
