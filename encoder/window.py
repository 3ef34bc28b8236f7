"""Sliding-window attention without a full T x T softmax: the queries are taken in blocks, each against its keys only.

Query i sees the keys j with |i - j| <= radius (ModernBERT: local_attention = 128, radius 64). A block of `b`
queries starting at s needs only the keys s - radius .. s + b - 1 + radius, so the scores, the softmax and the
weighted sum cost T * (b + 2 * radius) instead of T * T. The trace still wants the (H, T, T) pattern the app
draws, so each block's weights are copied into a zeroed full-size pattern: one memset and a copy, no exp.
benchmarks/families_bench.py measures it against the full masked softmax.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

MIN_BLOCK = 32  # a small window would otherwise mean many tiny matrix products


def block_size(radius: int) -> int:
    """How many queries banded_attention takes at once (the radius: measured best in benchmarks/families_bench.py)."""
    return max(radius, MIN_BLOCK)


def scored_pairs(seq: int, radius: int) -> int:
    """How many (query, key) scores one head computes at `seq` tokens: seq^2 without a window, fewer in blocks."""
    if not radius or seq <= radius + 1:  # the window holds every key: plain attention
        return seq * seq
    block = block_size(radius)
    return sum((min(start + block, seq) - start) * (min(seq, start + block + radius) - max(0, start - radius))
               for start in range(0, seq, block))


def band_mask(seq: int, radius: int, device: torch.device | None = None) -> Tensor:
    """(seq, seq) bool, True where key j lies outside query i's window: |i - j| > radius."""
    pos = torch.arange(seq, device=device)
    return (pos[:, None] - pos[None, :]).abs() > radius


def banded_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    radius: int,
    pad_mask: Tensor | None,
    out: Tensor | None,
    drop: Callable[[Tensor], Tensor],
) -> tuple[Tensor, Tensor]:
    """q, k, v (B, H, T, dh); pad_mask (B, T) True at padding -> pattern (B, H, T, T), zero outside the band; z (B, H, T, dh).

    `out` is the tensor to write the pattern into (the trace's buffer), or None. Keys outside the window get -inf
    (every window holds its own query, so no row is all -inf); padded keys get the lowest float instead, so a
    padding query whose whole window is padding gets a finite row (as in transformers) rather than NaN, which
    would reach the real tokens through its value vector.
    """
    B, H, T, dh = q.shape
    pattern = out.zero_() if out is not None else q.new_zeros(B, H, T, T)
    z = q.new_empty(B, H, T, dh)
    q = q * (1.0 / math.sqrt(dh))
    pos = torch.arange(T, device=q.device)
    low = torch.finfo(q.dtype).min
    block = block_size(radius)
    for start in range(0, T, block):
        stop = min(start + block, T)
        lo, hi = max(0, start - radius), min(T, stop + radius)  # the keys any query of this block can see
        scores = q[:, :, start:stop] @ k[:, :, lo:hi].transpose(-2, -1)  # (B, H, b, hi - lo)
        outside = (pos[start:stop, None] - pos[None, lo:hi]).abs() > radius  # (b, hi - lo)
        if pad_mask is not None:
            scores.masked_fill_(pad_mask[:, None, None, lo:hi], low)  # (B, 1, 1, hi - lo)
        weights = torch.softmax(scores.masked_fill_(outside, float("-inf")), dim=-1)
        pattern[:, :, start:stop, lo:hi] = weights
        z[:, :, start:stop] = drop(weights) @ v[:, :, lo:hi]
    return pattern, z
