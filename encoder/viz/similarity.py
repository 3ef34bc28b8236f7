"""Similarity figures: cosine similarity between positional vectors and between tokens' vectors, in [-1, 1]."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from torch import Tensor

from ..analysis import embeddings
from . import axes, style
from .text import label


def cosine_matrix(vectors: Tensor) -> Tensor:
    """(N, N) cosine similarity between the rows of an (N, D) table, in float64."""
    return embeddings.cosine_matrix(vectors.detach().double().cpu())


def position_similarity(table: Tensor, *, presentation: bool = False) -> go.Figure:
    """Cosine similarity between every pair of positional vectors, colours fixed to [-1, 1]."""
    z = axes.block_mean(cosine_matrix(table).numpy(), axes.MAX_CELLS // 2, axes.MAX_CELLS // 2)  # (P, P): smooth, 256 cells do
    ticks = axes.bounds(table.shape[0], z.shape[0])[:-1]
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=ticks, y=ticks, zmid=0, zmin=-1, zmax=1, colorscale=style.DIVERGING,
                               hovertemplate="positions %{y} and %{x}: %{z:.3f}<extra></extra>",
                               colorbar=dict(title=style.bar_title("cos"), thickness=18, len=1)))
    fig.update_xaxes(title="position")
    fig.update_yaxes(title="position", autorange="reversed")
    return style.apply(fig, "Cosine similarity between positions", presentation, height=520, narrow=True)


def token_similarity(vectors: Tensor, tokens: list[str], title: str, *, presentation: bool = False) -> go.Figure:
    """Cosine similarity between the (seq, d) vectors of the tokens, colours fixed to [-1, 1]; below its page's first
    screen, so on a projector as tall as every token's label needs (axes.map_height)."""
    if vectors.ndim != 2 or vectors.shape[0] != len(tokens):
        raise ValueError(f"Expected one vector per token, got {tuple(vectors.shape)} for {len(tokens)} tokens.")
    pos = list(range(len(tokens)))
    cats = axes.categories(tokens, pos)
    z = axes.block_mean(cosine_matrix(vectors).numpy(), axes.MAX_CELLS, axes.MAX_CELLS)
    height = axes.map_height(len(tokens), presentation, axes.MAP_TOP, style.PRESENT_TALLEST)
    axis = axes.map_axis(cats, tokens, pos, presentation, height, axes.MAP_TOP)
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cats, y=cats, zmid=0, zmin=-1, zmax=1, colorscale=style.DIVERGING,
                               hovertemplate="%{y} and %{x}: %{z:.3f}<extra></extra>",
                               colorbar=dict(title=style.bar_title("cos"), thickness=18, len=1)))
    fig.update_xaxes(tickangle=-45, **axes.key_axis(axis, cats, tokens, pos))
    fig.update_yaxes(autorange="reversed", **axis)
    return style.apply(fig, label(title, 120), presentation, height=height, tallest=height)

