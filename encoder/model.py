"""A Transformer encoder written from the equations, in paper order: embeddings, attention, FFN, layer, stack.

Every module returns what it computed (the taps) instead of storing it: one model object is shared by all
browser sessions, so nothing here may keep per-call state. Dropout takes an explicit torch.Generator, so a
training-mode pass never touches the module's train/eval flag or the global RNG.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._buffers import pattern_buffer
from .config import EncoderConfig
from .devices import pick_device
from .knockout import KEEP_ALL, SUBLAYERS, Knockout, check_ablate, knockouts  # noqa: F401  (imported from here too)
from .rotary import rope_angles, rotate
from .window import banded_attention

# The attention's own taps, per head: q, k, v and z (the weighted sum of values) are (B, H, T, d_head); concat is
# Concat(z_1..z_h), (B, T, D), the tensor W_O multiplies. q is unscaled: softmax(q k^T / sqrt(d_head)) is the pattern
# (in a sliding-window layer, over the keys inside the window; the others get 0). With rotary positions q and k are
# the turned vectors, after RoPE: the ones whose dot products are the scores.
HEAD_TAPS = ("q", "k", "v", "z", "concat")


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


def layer_norm(cfg: EncoderConfig, width: int | None = None) -> nn.LayerNorm:
    """A LayerNorm over d_model (or `width`) with the config's epsilon; without a shift when cfg.bias is off."""
    return nn.LayerNorm(width or cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)


class Embeddings(nn.Module):
    """Token embedding + positional encoding (+ BERT's token type and LayerNorm), then dropout.

    With d_embed set, all of this is d_embed wide and a Linear `proj` then maps it to d_model (ELECTRA, ALBERT).
    Rotary positions add nothing here: they turn q and k inside attention.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        width = cfg.d_embed or cfg.d_model
        self.tok = nn.Embedding(cfg.vocab_size, width)
        if cfg.positional == "learned":
            self.pos = nn.Embedding(cfg.pos_offset + cfg.max_len, width)
        elif cfg.positional == "sinusoidal":
            self.register_buffer("pe", sinusoidal_table(cfg.max_len, width), persistent=False)
        self.seg = nn.Embedding(cfg.type_vocab_size, width) if cfg.type_vocab_size else None
        self.ln = layer_norm(cfg, width) if cfg.embed_norm else None
        self.drop = Dropout(cfg.dropout)
        self.proj = nn.Linear(width, cfg.d_model, bias=cfg.bias) if cfg.d_embed else None

    def positions(self, seq: int) -> Tensor | None:
        """The (seq, width) positional term of an unpadded sequence, or None when nothing is added."""
        if self.cfg.positional == "learned":
            return self.pos.weight[self.cfg.pos_offset : self.cfg.pos_offset + seq]
        if self.cfg.positional == "sinusoidal":
            return self.pe[:seq]
        return None

    def forward(self, ids: Tensor, gen: torch.Generator | None = None) -> Tensor:
        """ids (B, T) -> (B, T, d_model)."""
        x = self.tok(ids)  # (B, T, width)
        pad = self.cfg.pos_offset - 1
        if self.cfg.pos_offset and (ids == pad).any():
            # RoBERTa counts positions over the real tokens only; a padding token takes the row pos_offset - 1
            real = (ids != pad).long()
            x = x + self.pos(torch.cumsum(real, dim=1) * real + pad)
        elif (pos := self.positions(ids.shape[1])) is not None:
            x = x + pos
        if self.seg is not None:
            x = x + self.seg.weight[0]  # single-segment input: every token has type 0
        if self.ln is not None:
            x = self.ln(x)
        x = self.drop(x, gen)
        return self.proj(x) if self.proj is not None else x


class MultiHeadSelfAttention(nn.Module):
    """MultiHead(X) = Concat(head_1..head_h) W_O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i; no causal mask.

    `window` > 0 lets a query see only the keys at most window/2 positions away; `theta` > 0 turns q and k by
    rotary positions with that base before the scores.
    """

    def __init__(self, cfg: EncoderConfig, window: int = 0, theta: float = 0.0):
        super().__init__()
        self.num_heads, self.d_head = cfg.num_heads, cfg.d_head
        self.window, self.theta = window, theta
        # W_Q, W_K, W_V of all heads stacked in one matrix: one GEMM instead of 3h small ones.
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)  # W_O
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
        if self.theta:
            cos, sin = rope_angles(T, self.d_head, self.theta, x.device)  # (T, dh/2) each
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        buf = pattern_buffer(self, (B, self.num_heads, T, T))  # inside run(): the trace's attention tensor, else None
        if self.window and T > self.window // 2 + 1:  # else the window holds every key: plain attention is the same
            pattern, z = banded_attention(q, k, v, self.window // 2, pad_mask, buf, lambda a: self.drop(a, gen))
        else:
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


ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu_,  # in place: the pre-activation is no tap
    "gelu": F.gelu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
}


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to each position separately.

    Gated (Shazeer 2020, "GLU Variants Improve Transformer"): FFN(x) = (act(x W + b) * (x V + c)) W_2 + b_2 with
    act = GELU (GeGLU) or SiLU (SwiGLU). Then w1 holds W and V stacked, (2 d_ff, D): rows [:d_ff] are W, the
    activated half, rows [d_ff:] are V, the linear half, as ModernBERT stores its Wi.
    """

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.gated = cfg.ffn != "plain"
        self.w1 = nn.Linear(cfg.d_model, (2 if self.gated else 1) * cfg.d_ff, bias=cfg.bias)
        self.w2 = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATION_FNS[cfg.ffn_activation]
        self.drop = Dropout(cfg.dropout)

    def hidden(self, x: Tensor) -> Tensor:
        """The d_ff-wide tensor W_2 reads: act(x W_1 + b_1), or act(x W + b) * (x V + c) when gated."""
        if self.gated:
            a, linear = self.w1(x).chunk(2, dim=-1)  # (B, T, d_ff) each
            return self.act(a) * linear
        return self.act(self.w1(x))

    def forward(self, x: Tensor, gen: torch.Generator | None = None, off: bool = False) -> tuple[Tensor, Tensor]:
        """x (B, T, D) -> hidden (B, T, d_ff), output (B, T, D); off=True knocks the output out (zeros)."""
        hidden = self.hidden(x)  # (B, T, d_ff)
        y = self.w2(self.drop(hidden, gen))  # (B, T, D)
        return hidden, torch.zeros_like(y) if off else y


class Wire(NamedTuple):
    """One tap of a layer: the operation that computes it and the taps it reads, with what travels on each edge."""

    tap: str
    # "input"; "attn", "ln1", "ln2" (the layer's modules); "w1" (FeedForward.hidden: act(x W_1 + b_1), or with a gated
    # FFN act(x W + b) * (x V + c)); "w2"; "+" (sum); "=" (same tensor). ln1 is the identity in a ModernBERT-style
    # layer 0 (first_norm1=False); "attn" includes RoPE and the sliding window when the config has them.
    op: str
    inputs: tuple[tuple[str, str], ...] = ()  # (tap read, edge kind)


# The wiring of one encoder layer per norm placement: its taps in the order EncoderLayer.forward computes them, and
# the data-flow edges between them. Edge kinds: "qkv" into attention; "drop1", "drop2" the dropout in front of each
# residual add; "hidden" the FFN's d_ff-wide tensor (and the dropout on it; for GeGLU/SwiGLU the gated product, not
# an activation of one projection); "res" a residual connection; "" plain.
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
    """One encoder layer; post: LN(x + Dropout(f(x))), pre: x + Dropout(f(LN(x))); wired as PLACEMENTS says.

    `index` is the layer's place in the stack: it sets the attention window and RoPE's theta (ModernBERT
    alternates global and windowed layers), and whether ln1 is the identity (first_norm1=False, layer 0).
    """

    def __init__(self, cfg: EncoderConfig, index: int = 0):
        super().__init__()
        self.norm = cfg.norm
        theta = cfg.layer_theta(index) if cfg.positional == "rotary" else 0.0
        self.attn = MultiHeadSelfAttention(cfg, cfg.layer_window(index), theta)
        self.ffn = FeedForward(cfg)
        self.ln1 = nn.Identity() if index == 0 and not cfg.first_norm1 else layer_norm(cfg)
        self.ln2 = layer_norm(cfg)
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
        self.layers = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.final_ln = layer_norm(cfg) if cfg.final_norm else None
        self.vocab_dir = None  # folder of the tokenizer.json to use; None = the bundled WordPiece vocabulary
        self.family = None  # the checkpoint family it was loaded from ("bert", "roberta", ...); None = built here
        self.tie_layers()

    def tie_layers(self) -> None:
        """With share_layers, make every layer hold layer 0's very parameters (ALBERT); else do nothing.

        Called again after anything that replaces parameter objects (to_empty, load_state_dict with assign).
        """
        if not self.cfg.share_layers:
            return
        first = self.layers[0]
        for layer in self.layers[1:]:
            for mine, theirs in zip(layer.modules(), first.modules(), strict=True):
                for name, param in theirs.named_parameters(recurse=False):
                    setattr(mine, name, param)

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
        w1 = {id(layer.ffn.w1) for layer in self.layers if layer.ffn.gated}
        for module in self.modules():
            if isinstance(module, nn.Linear):
                fan_out, fan_in = module.weight.shape
                if id(module) in qkv:  # Xavier per projection, as if W_Q, W_K, W_V were separate matrices
                    fan_out = fan_in
                elif id(module) in w1:  # a gated w1 stacks W and V, each d_ff x d_model
                    fan_out //= 2
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                module.weight.copy_(torch.rand(module.weight.shape, generator=gen) * 2 * bound - bound)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen))
        if self.cfg.positional == "sinusoidal":  # again: build_model's to_empty() leaves buffers uninitialised
            self.embed.pe.copy_(sinusoidal_table(self.cfg.max_len, self.embed.pe.shape[1]))


def build_model(config: EncoderConfig, device: str | torch.device | None = None) -> Encoder:
    """A randomly initialised Encoder, bit-identical for the same config and seed; the global RNG is untouched."""
    with torch.device("meta"):
        model = Encoder(config)  # no parameters drawn from the global RNG
    model.to_empty(device="cpu")
    model.tie_layers()  # to_empty made new parameter objects
    model.init_weights(torch.Generator().manual_seed(config.seed))
    return model.to(pick_device(device)).eval().requires_grad_(False)
