"""What the encoder's output is for: sentence vectors and their similarity, token trajectories, attention rollout.

Pooling follows how all-MiniLM-L6-v2 is used by sentence-transformers: the attention-mask-weighted mean of the
last layer's token vectors, scaled to length 1. [CLS] pooling is BERT's input to a classifier (seed 003 on the
N-layer stack). Numbers only; the figures are in encoder/viz.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..trace import Trace

POOLINGS = ("mean", "cls")


def mean_pool(hidden: Tensor, mask: Tensor | None = None) -> Tensor:
    """sum_t m_t h_t / sum_t m_t over the tokens, then L2-normalised: (..., T, D), mask (..., T) -> (..., D)."""
    if mask is None:
        mask = torch.ones(hidden.shape[:-1], dtype=hidden.dtype, device=hidden.device)
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # (..., T, 1): padding counts 0
    # sentence-transformers clamps the token count at 1e-9 and F.normalize the norm at 1e-12: the same here.
    mean = (hidden * weights).sum(-2) / weights.sum(-2).clamp(min=1e-9)
    return F.normalize(mean, dim=-1)


def cls_pool(hidden: Tensor) -> Tensor:
    """The vector at position 0 ([CLS]), L2-normalised: (..., T, D) -> (..., D)."""
    return F.normalize(hidden[..., 0, :], dim=-1)


def sentence_embedding(trace: Trace, pooling: str = "mean") -> Tensor:
    """The sentence's unit vector (d_model,) from the encoder's output: "mean" (all-MiniLM-L6-v2) or "cls" pooling."""
    if pooling == "mean":
        return mean_pool(trace.output)  # one sentence, no padding: every token counts
    if pooling == "cls":
        return cls_pool(trace.output)
    raise ValueError(f"pooling={pooling!r} is not supported; choose 'mean' or 'cls'.")


def cosine_matrix(vectors: Tensor) -> Tensor:
    """Cosine similarity of every pair of rows: (n, D) -> (n, n), 1 on the diagonal (0 for an all-zero row)."""
    unit = F.normalize(vectors.double(), dim=-1)
    return (unit @ unit.T).to(vectors.dtype)


def token_similarity(trace: Trace, i: int, j: int) -> list[float]:
    """Cosine similarity of tokens i and j after the embeddings and after every layer (num_layers + 1 values)."""
    for name, k in (("i", i), ("j", j)):
        if not 0 <= k < trace.seq_len:
            raise ValueError(f"{name}={k} is not a token position; choose one from 0 to {trace.seq_len - 1}.")
    states = trace.hidden_states.double()  # (L + 1, T, D)
    return F.cosine_similarity(states[:, i], states[:, j], dim=-1).tolist()


@dataclass(frozen=True)
class PCA:
    """A principal-component projection: coords = (x - mean) @ components.T."""

    coords: Tensor  # (n, k)
    components: Tensor  # (k, D), orthonormal rows
    mean: Tensor  # (D,)
    shares: Tensor  # (k,): each component's share of the total variance


def pca(x: Tensor, k: int = 2) -> PCA:
    """Principal components of the rows of x (n, D) by an SVD of the centred data, in float64; signs fixed."""
    x = x.double()
    mean = x.mean(0)
    centred = x - mean  # (n, D)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)  # vh (min(n, D), D)
    # An SVD's signs are arbitrary: make each component's largest loading positive, so a plot never flips over.
    flip = torch.sign(vh.gather(1, vh.abs().argmax(1, keepdim=True)))  # (min(n, D), 1)
    vh = vh * torch.where(flip == 0, 1.0, flip)
    total = (s**2).sum()
    components = torch.zeros(k, x.shape[1], dtype=x.dtype)
    shares = torch.zeros(k, dtype=x.dtype)
    m = min(k, vh.shape[0])  # fewer rows or features than k: the rest stay zero
    components[:m] = vh[:m]
    if total > 0:
        shares[:m] = s[:m] ** 2 / total
    return PCA(coords=centred @ components.T, components=components, mean=mean, shares=shares)


def trajectories(trace: Trace) -> tuple[Tensor, Tensor]:
    """Each token's hidden state after the embeddings and after every layer in one 2-D PCA fitted on all of them.

    Returns the points (num_layers + 1, seq, 2) and the two components' shares of the variance (2,).
    """
    depth, seq, d_model = trace.hidden_states.shape
    fit = pca(trace.hidden_states.reshape(depth * seq, d_model), k=2)  # one projection for every layer
    return fit.coords.reshape(depth, seq, 2).float(), fit.shares.float()  # (L + 1, T, 2), (2,)


def residual_attention(attention: Tensor) -> Tensor:
    """The head-averaged attention with the residual path mixed in, 0.5 A + 0.5 I, rows renormalised, in float64.

    (L, H, T, T) -> (L, T, T): the per-layer graph that both rollout and attention flow (Abnar & Zuidema 2020) use.
    """
    if attention.dim() != 4 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"Expected attention of shape (layers, heads, T, T), got {tuple(attention.shape)}.")
    a = attention.double().mean(1)  # (L, T, T): head average
    a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
    return a / a.sum(-1, keepdim=True)


def attention_rollout(attention: Tensor) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020): (L, H, T, T) -> (L, T, T), the rollout through layers 0..l.

    Per layer the heads are averaged and the residual path is mixed in (residual_attention); the layers are then
    multiplied, R_l = A_l R_(l-1). Row i of R_l estimates how much of position i after layer l comes from each
    input token. It assumes attention alone moves information and that heads and the residual path weigh equally;
    it ignores the values, W_O and the FFN.
    """
    a = residual_attention(attention)
    out = torch.empty_like(a)
    rolled = torch.eye(a.shape[-1], dtype=a.dtype)
    for layer in range(a.shape[0]):
        rolled = a[layer] @ rolled
        out[layer] = rolled
    return out.float()
