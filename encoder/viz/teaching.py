"""Plotly builders for the teaching pages: token attention across heads, training curves, gradient norms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from .figures import DIVERGING, _style, label

ATTENTION_SCALE = "Blues"


def token_attention(rows: Tensor, tokens: list[str], word: str, title: str, *, diff: bool = False,
                    presentation: bool = False) -> go.Figure:
    """(heads, keys) attention of one query token; with diff=True a symmetric diverging scale for a difference."""
    z = rows.detach().double().cpu().numpy()
    keys = [f"{label(t)} ({i})" for i, t in enumerate(tokens)]
    heads = [f"head {h}" for h in range(z.shape[0])]
    if diff:
        m = max(float(np.abs(z).max()), 1e-6)
        trace = go.Heatmap(z=z, x=keys, y=heads, zmid=0, zmin=-m, zmax=m, colorscale=DIVERGING,
                           hovertemplate="%{y} → %{x}: %{z:+.3f}<extra></extra>", colorbar=dict(title="Δ weight"))
    else:
        trace = go.Heatmap(z=z, x=keys, y=heads, zmin=0, zmax=1, colorscale=ATTENTION_SCALE,
                           hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>", colorbar=dict(title="weight"))
    fig = go.Figure(trace)
    fig.update_xaxes(title=f"key (what '{label(word)}' attends to)", tickangle=-45, tickvals=keys,
                     ticktext=[label(t) for t in tokens])
    fig.update_yaxes(autorange="reversed")
    return _style(fig, label(title, 120), presentation, height=max(320, 28 * z.shape[0] + 200))


def training_curves(curves: dict[str, list[float]], chance: float, *, presentation: bool = False) -> go.Figure:
    """Loss per step for several runs on one chart, with the chance level as a dashed line."""
    fig = go.Figure()
    for name, losses in curves.items():
        fig.add_trace(go.Scatter(y=losses, x=list(range(1, len(losses) + 1)), mode="lines", name=label(name, 60)))
    fig.add_hline(y=chance, line_dash="dash", line_color="#868e96", annotation_text="chance (guessing)",
                  annotation_position="top right")
    fig.update_xaxes(title="training step")
    fig.update_yaxes(title="cross-entropy loss", rangemode="tozero")
    return _style(fig, "Training loss: Post-LN needs warm-up, Pre-LN does not", presentation, height=460)


def grad_norm_chart(df: pd.DataFrame, x: str, y: str, color: str, title: str, *, log_y: bool = True,
                    presentation: bool = False) -> go.Figure:
    """Lines of `y` against `x`, one per value of `color` (e.g. gradient norm per layer for each placement)."""
    fig = go.Figure()
    for name, part in df.groupby(color, sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=label(str(name), 40)))
    fig.update_xaxes(title=x.replace("_", " "))
    fig.update_yaxes(title=y.replace("_", " "), type="log" if log_y else "linear")
    return _style(fig, label(title, 120), presentation, height=440)
