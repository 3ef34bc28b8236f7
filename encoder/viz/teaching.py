"""Plotly builders for the teaching pages: token attention across heads, training curves, gradient norms."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from . import style
from .text import label


def token_attention(rows: Tensor, tokens: list[str], word: str, title: str, *, diff: bool = False,
                    presentation: bool = False) -> go.Figure:
    """(heads, keys) attention of one query token; with diff=True a symmetric diverging scale for a difference."""
    z = rows.detach().double().cpu().numpy()
    keys = [f"{label(t)} ({i})" for i, t in enumerate(tokens)]
    heads = [f"head {h}" for h in range(z.shape[0])]
    if diff:
        m = max(float(np.abs(z).max()), 1e-6)
        trace = go.Heatmap(z=z, x=keys, y=heads, zmid=0, zmin=-m, zmax=m, colorscale=style.DIVERGING,
                           hovertemplate="%{y} → %{x}: %{z:+.3f}<extra></extra>",
                           colorbar=dict(title=style.bar_title("Δ weight")))
    else:
        trace = go.Heatmap(z=z, x=keys, y=heads, zmin=0, zmax=1, colorscale=style.ATTENTION_SCALE,
                           hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>", colorbar=dict(title=style.bar_title("weight")))
    fig = go.Figure(trace)
    fig.update_xaxes(title=f"key (what '{label(word)}' attends to)", tickangle=-45, tickvals=keys,
                     ticktext=[label(t) for t in tokens])
    fig.update_yaxes(autorange="reversed")
    return style.apply(fig, label(title, 120), presentation, height=max(320, 28 * z.shape[0] + 200))


def training_curves(curves: dict[str, list[float]], chance: float, *, presentation: bool = False) -> go.Figure:
    """Loss per step for several runs on one chart, with the chance level as a dashed line."""
    fig = go.Figure()
    for name, losses in curves.items():
        fig.add_trace(go.Scatter(y=losses, x=list(range(1, len(losses) + 1)), mode="lines", name=label(name, 60)))
    fig.add_hline(y=chance, line_dash="dash", line_color="#868e96", annotation_text="chance (guessing)",
                  annotation_position="top right")
    fig.update_xaxes(title="training step")
    fig.update_yaxes(title="cross-entropy loss", rangemode="tozero")
    return style.apply(fig, "Training loss: Post-LN needs warm-up, Pre-LN does not", presentation, height=460)


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values and labels for a log axis from lo to hi: 1-2-5 steps over up to 3 decades, else powers of 10.

    Plotly's own labels for a short log range read "5 6 7 8 9 1 2 3 4" (0.5 shown as 5); these say 0.5.
    """
    lo, hi = max(lo, 1e-300), max(hi, lo)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1, 2, 5) if last - first <= 3 else (1,)
    values = [m * 10.0**e for e in range(first, last + 1) for m in mantissas]
    inside = [v for v in values if lo / 1.0001 <= v <= hi * 1.0001]
    below = [v for v in values if v < lo / 1.0001][-1:]  # the neighbours on either side, shown if the range
    above = [v for v in values if v > hi * 1.0001][:1]  # margin reaches them (and always when inside < 2)
    ticks = below + inside + above
    return ticks, [f"{v:g}" for v in ticks]


def _log_range(lo: float, hi: float, ticks: list[float]) -> list[float]:
    """A log axis range (log10 units) holding the data with a margin, and at least two ticks."""
    if sum(lo / 1.0001 <= t <= hi * 1.0001 for t in ticks) < 2:
        lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    pad = 0.05 * max(math.log10(hi / lo), 0.2)
    return [math.log10(lo) - pad, math.log10(hi) + pad]


def grad_norm_chart(df: pd.DataFrame, x: str, y: str, color: str, title: str, *, x_title: str | None = None,
                    y_title: str | None = None, log_y: bool = True, floor: float | None = None,
                    presentation: bool = False, narrow: bool = False) -> go.Figure:
    """Lines of `y` against `x`, one per value of `color` (e.g. gradient norm per layer for each placement).

    narrow: the chart shares its row with another (its title is wrapped to fit).

    floor: values below it are drawn at it, and the subtitle says so (float rounding noise of ~1e-7 would
    otherwise become a dramatic zig-zag on a log axis).
    """
    df = df.copy()
    note = ""
    if floor is not None and (df[y] < floor).any():
        df[y] = df[y].clip(lower=floor)
        note = f"Values below {floor:g} (float rounding) are drawn at {floor:g}."
    fig = go.Figure()
    for name, part in df.groupby(color, sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=label(str(name), 40),
                                 line=dict(width=3), marker=dict(size=9)))
    fig.update_xaxes(title=x_title or x.replace("_", " "))
    fig.update_yaxes(title=y_title or y.replace("_", " "), type="log" if log_y else "linear")
    values = df[y].to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if log_y and values.size:
        lo, hi = float(values.min()), float(values.max())
        ticks, text = log_ticks(lo, hi)
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=text, range=_log_range(lo, hi, ticks))
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return style.apply(fig, label(title, 120), presentation, note, height=440, narrow=narrow, legend_above=True,
                       wide=True)  # full width: a long title in lines that fit 1024 px with the sidebar open
