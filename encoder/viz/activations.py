"""Activation figures over a Trace: statistics per tap in data-flow order, residual-stream and per-token norms,
histograms, and value maps of (rows, width) tensors such as a tap or a positional table (diverging colours at 0).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from ..model import flow_order
from ..trace import Trace
from . import axes, style
from .text import label


def tap_profile(stats: pd.DataFrame, layer: int, norm: str = "post", *, train: bool = False,
                presentation: bool = False) -> go.Figure:
    """Mean, std and RMS at each tap of one layer in data-flow order (pass the trace's config.norm and train)."""
    rows = stats[stats["layer"] == layer].set_index("tap")
    if rows.empty:
        raise ValueError(f"The statistics have no layer {layer}; choose a layer from 0 to {int(stats['layer'].max())}.")
    rows = rows.reindex([t for t in flow_order(norm) if t in rows.index])
    taps = list(rows.index)
    extra = rows[["min", "max", "zero_frac", "nonfinite"]].to_numpy()
    data = []
    styles = (("rms", "#1c7ed6", "solid", 15), ("std", "#f08c00", "dash", 9), ("mean", "#2f9e44", "dot", 9))
    for col, colour, dash, size in styles:  # RMS and std often coincide: the big RMS marker stays visible
        data.append(go.Scatter(
            x=taps, y=rows[col], name=col if col != "rms" else "RMS", mode="lines+markers", customdata=extra,
            line=dict(color=colour, dash=dash, width=3), marker=dict(size=size),
            hovertemplate=f"%{{x}}: {col} %{{y:.4g}}<br>min %{{customdata[0]:.3g}}, max %{{customdata[1]:.3g}}"
                          "<br>zeros %{customdata[2]:.1%}, NaN/Inf %{customdata[3]}<extra></extra>",
        ))
    bad = rows[rows["nonfinite"] > 0]
    title = f"Layer {layer}: mean, std, RMS per tap"  # short: half a 1024 px projector at 26 px
    if not bad.empty:
        data.append(go.Scatter(
            x=list(bad.index), y=[0] * len(bad), name="NaN/Inf", mode="markers+text",
            marker=dict(symbol="x", size=18, color="#e03131"), text=[f"NaN/Inf: {k}" for k in bad["nonfinite"]],
            textposition="top center", textfont=dict(color="#e03131"), hoverinfo="skip",
        ))
        title += f" ⚠ NaN/Inf first at '{bad.index[0]}'"
    fig = go.Figure(data, layout=dict(xaxis=dict(type="category", title="tap"), yaxis=dict(title="value", zeroline=True)))
    return style.apply(fig, title, presentation, style.mode_note(train).removeprefix(" · "), height=480, narrow=True)


def residual_norms(traces: dict[str, Trace], *, log_y: bool = False, presentation: bool = False) -> go.Figure:
    """Mean per-token L2 norm of the residual stream after the embeddings and after each layer, one line per trace."""
    data = []
    depth = 0
    for name, trace in traces.items():
        norms = trace.hidden_states.double().norm(dim=-1).mean(-1)  # (L + 1,): embeddings, then after layer 0, 1...
        depth = max(depth, len(norms))
        where = ["the embeddings"] + [f"after layer {i}" for i in range(len(norms) - 1)]
        data.append(go.Scatter(
            x=list(range(-1, len(norms) - 1)), y=norms.numpy(), name=label(name, 40), mode="lines+markers",
            line=dict(width=3), marker=dict(size=9), customdata=where,
            hovertemplate="%{customdata}: %{y:.4g}<extra>%{fullData.name}</extra>",
        ))
    # Layers are counted from 0, like the Layer sliders; the point before layer 0 is the embeddings.
    step = max(1, math.ceil(depth / 13))
    ticks = list(range(-1, depth - 1))[::step]
    fig = go.Figure(data, layout=dict(
        xaxis=dict(title="after layer (as on the sliders)", tickmode="array", tickvals=ticks,
                   ticktext=["embeddings" if t < 0 else str(t) for t in ticks]),
        yaxis=dict(title="mean ‖x‖₂ per token", type="log" if log_y else "linear", rangemode="tozero"),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
    ))
    train = any(t.train for t in traces.values())
    return style.apply(fig, "Residual stream norm by depth", presentation, style.mode_note(train).removeprefix(" · "),
                       height=460, narrow=True, legend_above=True)


def token_norms(trace: Trace, layer: int, tap: str, *, presentation: bool = False) -> go.Figure:
    """L2 norm of each token's vector at one tap of one layer."""
    axes.check(trace, layer, tap=tap)
    norms = trace.taps[layer][tap].double().norm(dim=-1).numpy()  # (T,)
    pos = list(range(trace.seq_len))
    cats = axes.categories(trace.labels, pos)
    fig = go.Figure(go.Bar(x=cats, y=norms, marker_color="#4c6ef5", hovertemplate="%{x}: ‖x‖₂ = %{y:.4g}<extra></extra>"),
                    layout=dict(xaxis=dict(title="token", tickangle=-45,
                                           **axes.token_axis(cats, trace.labels, pos, presentation)),
                                yaxis=dict(title="‖x‖₂")))
    bad = int((~np.isfinite(norms)).sum())
    note = f" ⚠ {bad} token(s) with NaN/Inf (no bar)" if bad else ""
    return style.apply(fig, f"Layer {layer}, {tap}: ‖x‖₂ per token{note}", presentation,
                       style.mode_note(trace.train).removeprefix(" · "), height=460, narrow=True)


def tap_histogram(trace: Trace, layer: int, tap: str, bins: int = 60, *, presentation: bool = False) -> go.Figure:
    """Histogram of the finite values at one tap of one layer; the title counts the NaN/Inf left out."""
    axes.check(trace, layer, tap=tap)
    x = trace.taps[layer][tap].double().flatten().numpy()
    finite = x[np.isfinite(x)]
    dropped = x.size - finite.size
    data, notes = [], []
    if finite.size:
        counts, edges = np.histogram(finite, bins=max(1, int(bins)))
        data.append(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), marker_color="#7950f2",
                           hovertemplate="%{x:.3g}: %{y} values<extra></extra>"))
    else:
        notes.append(dict(text="No finite values to plot", showarrow=False, font=dict(size=20, color="#e03131")))
    fig = go.Figure(data, layout=dict(xaxis=dict(title="value"), yaxis=dict(title="count"), bargap=0,
                                      annotations=notes))
    note = f" ⚠ {dropped:,} NaN/Inf dropped" if dropped else ""
    return style.apply(fig, f"Layer {layer}, {tap}: {finite.size:,} values{note}", presentation,
                       style.mode_note(trace.train).removeprefix(" · "), height=440, narrow=True)


def _clipped(m: float, z: np.ndarray) -> dict:
    """Colour bar that says when a few outliers (e.g. BERT's huge dimensions) saturate the scale."""
    over = np.isfinite(z) & (np.abs(z) > m)
    return dict(thickness=18, len=1, title=style.bar_title(f"clipped at ±{m:.3g}" if over.any() else "value"))


def tensor_heatmap(
    x: Tensor, tokens: list[str], title: str, *, max_cols: int = axes.MAX_CELLS, subtitle: str = "",
    presentation: bool = False,
) -> go.Figure:
    """Values of a (seq, width) tensor, tokens as rows, diverging colours centred at 0; wide tensors block-averaged."""
    if x.ndim != 2 or x.shape[0] != len(tokens):
        raise ValueError(f"Expected a (seq, width) tensor with one row per token, got {tuple(x.shape)} for {len(tokens)} tokens.")
    pos = list(range(len(tokens)))
    z = axes.block_mean(x.detach().double().cpu().numpy(), axes.MAX_CELLS, max_cols)
    cats = axes.categories(tokens, pos)
    b = axes.bounds(x.shape[1], z.shape[1])
    m = style.symmetric_range(z, 99.5)  # a few outlier dimensions would otherwise wash every other value out
    note = f" (columns averaged in blocks of ~{x.shape[1] / z.shape[1]:.1f})" if z.shape[1] < x.shape[1] else ""
    height = max(360, min(900, 26 * len(cats) + 180))
    rows = axes.map_axis(cats, tokens, pos, presentation, min(height, style.PRESENT_HEIGHT) if presentation else height, 0)
    fig = go.Figure(go.Heatmap(
        z=z.astype(np.float32), x=b[:-1], y=cats, zmid=0, zmin=-m, zmax=m, colorscale=style.DIVERGING,
        hovertemplate="%{y}, dim %{x}: %{z:.3f}<extra></extra>", colorbar=_clipped(m, z),
    ), layout=dict(xaxis=dict(title="dimension" + note), yaxis=dict(autorange="reversed", **rows)))
    return style.apply(fig, label(title, 120), presentation, subtitle, height=height)


def positional_heatmap(table: Tensor, title: str, *, presentation: bool = False) -> go.Figure:
    """A (positions, d_model) positional table as a heatmap, diverging colours centred at 0."""
    z = axes.block_mean(table.detach().double().cpu().numpy(), axes.MAX_CELLS, axes.MAX_CELLS)
    rows, cols = axes.bounds(table.shape[0], z.shape[0])[:-1], axes.bounds(table.shape[1], z.shape[1])[:-1]
    m = style.symmetric_range(z, 99.5)  # a few outlier dimensions would otherwise wash every other value out
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cols, y=rows, zmid=0, zmin=-m, zmax=m, colorscale=style.DIVERGING,
                               hovertemplate="position %{y}, dim %{x}: %{z:.3f}<extra></extra>",
                               colorbar=_clipped(m, z)),
                    layout=dict(xaxis=dict(title="dimension"), yaxis=dict(title="position", autorange="reversed")))
    return style.apply(fig, label(title, 120), presentation, height=520, narrow=True)

