"""Rotary position embedding (RoPE, Su et al. 2021, "RoFormer"): positions enter attention by turning q and k.

RoFormer's R_{theta,m} turns each pair of dimensions of a query or key at position m by the angle m * theta_i,
theta_i = theta^(-2i/d) for pair i < d/2. Since two turns compose, q_m . k_n depends on m - n only: the scores see
relative positions, and nothing is added to the embeddings. We pair dimension i with i + d/2 (the layout of
GPT-NeoX and ModernBERT, whose checkpoints we load); RoFormer's equations pair 2i with 2i + 1, which is the same
rotation after a fixed permutation of the head's dimensions (tests/encoder/test_families.py checks both).
"""

from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(seq: int, d_head: int, theta: float, device: torch.device) -> tuple[Tensor, Tensor]:
    """cos and sin of m * theta^(-2i/d_head) for positions m < seq and pairs i < d_head/2: two (seq, d_head/2) tensors."""
    # float32 throughout, in the order ModernBERT computes them, so a loaded checkpoint matches it bit for bit
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.int64, device=device).float() / d_head))
    angle = torch.arange(seq, device=device).float()[:, None] * inv_freq  # (T, d_head/2)
    return angle.cos(), angle.sin()


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Turn each pair (x_i, x_{i + d/2}) of x (..., T, d) by its angle: (x_i cos - x_{i+d/2} sin, x_{i+d/2} cos + x_i sin)."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., T, d/2) each
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
