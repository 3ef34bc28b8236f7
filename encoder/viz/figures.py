"""Plotly figure builders over a Trace: attention maps, tap statistics, norms and positional tables.

User text reaches plotly only through `label()`: plotly renders tags such as <b>, <br> and <a> in titles, ticks and
hover text, so '<', '>' and '&' become entities, which it shows literally. Large maps are block-averaged.
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
import unicodedata

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio
from torch import Tensor

from ..analysis import embeddings as _embeddings
from ..config import EncoderConfig
from ..model import TAPS, flow_order
from ..trace import Trace
from .diagram import printable

SPECIAL = frozenset({"[CLS]", "[SEP]"})
ATTENTION_SCALE = "Blues"
DIVERGING = "RdBu_r"  # blue negative, white zero, red positive
FONT = "Helvetica, Arial, sans-serif"
MAX_CELLS = 512  # rows or columns of a heatmap beyond which values are block-averaged
# Presentation mode: every figure fits a 1280x720 or 1024x768 projector whole, below Streamlit's 60 px header, and no
# label is smaller than 14 px (the back row of a lecture room reads 14 px on a 2 m wide screen).
# The compact presentation frame (app.py) plus a page's own controls leave ~430 px below them at 1280x720, so a figure
# at most PRESENT_HEIGHT tall is whole on screen at first load; a diagram scales to at most DIAGRAM_HEIGHT (its pages
# have fewer controls above it).
PRESENT_HEIGHT = 420
DIAGRAM_HEIGHT = 480
MIN_PRESENT_FONT = 14
SCALES = ("fixed", "auto", "row")  # attention colour scales: 0 to 1, 0 to this map's largest weight, per row
PRETRAINED_TAG = "all-MiniLM-L6-v2"


def label(text: str, limit: int = 24) -> str:
    """User text made safe for any plotly label: control characters visible, shortened, '<', '>', '&' escaped."""
    return html.escape(printable(text, limit), quote=False)


def safe_filename(name: str, limit: int = 80) -> str:
    """Only [A-Za-z0-9_-], at most `limit` characters, never empty."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", name)
    name = re.sub(r"-{2,}", "-", name).strip("-_")[:limit].rstrip("-_")
    return name or "figure"


def png_config(filename: str) -> dict:
    """Plotly config whose camera button saves a 3x PNG under `filename`."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 3, "filename": safe_filename(filename)}}


def model_tag(config: EncoderConfig, model_key: str | None = None) -> str:
    """A short name of the model for file names: the pretrained model's name, a checkpoint's folder, or the
    custom config's main choices (custom-post-relu-d64-h4-L2)."""
    if model_key == "pretrained":
        return PRETRAINED_TAG
    if model_key and model_key.startswith("ckpt:"):
        return safe_filename(model_key.removeprefix("ckpt:"), 30)
    return (f"custom-{config.norm}-{config.activation}-d{config.d_model}-h{config.num_heads}-L{config.num_layers}"
            if model_key is not None or not config.embed_norm else f"bert-L{config.num_layers}-d{config.d_model}")


def export_name(trace: Trace, *parts: object, model: str | None = None) -> str:
    """File name: the model, the view and its layer/head (`parts`) and the sentence's first words, e.g.
    all-MiniLM-L6-v2_attention_L2_H5_the-cat-sat-on. `model` defaults to model_tag(trace.config)."""
    ascii_text = unicodedata.normalize("NFKD", " ".join(trace.text.split()[:200])).encode("ascii", "ignore").decode()
    words = [w for w in (re.sub(r"[^a-z0-9]+", "", w) for w in ascii_text.lower().split()) if w][:4]
    tag = model_tag(trace.config) if model is None else model
    names = [safe_filename(str(p), 40) for p in (tag, *parts)]
    return safe_filename("_".join(p for p in [*names, "-".join(words)] if p), 140)


@functools.cache
def _white() -> dict:
    """The plotly_white template as a plain dict, resolved once (plotly validates a named template per figure)."""
    return pio.templates["plotly_white"].to_plotly_json()


@functools.cache
def _scale(name: str) -> list[list]:
    """A named plotly.py colour scale as explicit stops (plotly.js's own scale of the same name can differ)."""
    return plotly.colors.get_colorscale(name)


def _layout(title: str, presentation: bool, subtitle: str = "", height: int | None = None) -> dict:
    """Common look: white template, large fonts (larger still for a projector), title and optional subtitle."""
    size = 20 if presentation else 15  # presentation: >= MIN_PRESENT_FONT everywhere, ticks included
    layout = dict(
        template=_white(),
        font=dict(family=FONT, size=size),
        title=dict(text=title, font=dict(size=size + 6), x=0, xanchor="left",
                   subtitle=dict(text=subtitle, font=dict(size=size - 1, color="#495057"))),
        margin=dict(l=10, r=10, t=100 if subtitle else 70, b=10),
        hoverlabel=dict(font=dict(size=size)),
    )
    if height:
        layout["height"] = int(min(height, PRESENT_HEIGHT) if presentation else height)
    return layout


def _style(fig: go.Figure, title: str, presentation: bool, subtitle: str = "", height: int | None = None) -> go.Figure:
    # The template as plotly's own (already validated) object: as a plain dict, update_layout validated every
    # property of it again, ~200 ms per figure (benchmarks/page_cpu.py); the object costs ~10 ms.
    fig.update_layout(**_layout(title, presentation, subtitle, height) | {"template": pio.templates["plotly_white"]})
    if presentation:  # plotly draws tick labels at ~0.7 of the font size unless told: 16 px for the back row
        fig.for_each_xaxis(lambda a: a.tickfont.size is None and a.update(tickfont_size=16))
        fig.for_each_yaxis(lambda a: a.tickfont.size is None and a.update(tickfont_size=16))
    return fig


def _quick(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, skipping plotly.py's per-property validation.

    The attention views redraw on every layer/head click; validation cost 25-60 ms of each (most of it copying the
    template), and the click's whole budget is 300 ms. Every property must therefore be written in its full form
    (title=dict(text=...), explicit colour stops); tests/test_figures.py checks these figures against validated ones.
    """
    return go.Figure(data=data, layout=layout, _validate=False)


def mode_note(train: bool) -> str:
    """What a figure of a training-mode trace must say: its values are one random draw of dropout."""
    return " · training mode: dropout on" if train else ""


def _sentence(trace: Trace, limit: int = 90) -> str:
    return f"“{label(' '.join(trace.text.split()), limit)}”" + mode_note(trace.train)


def _check(trace: Trace, layer: int, head: int | None = None, tap: str | None = None) -> None:
    """ValueError naming the valid range when a layer, head or tap is out of range."""
    if not 0 <= layer < trace.num_layers:
        raise ValueError(f"layer={layer} is out of range; choose a layer from 0 to {trace.num_layers - 1}.")
    if head is not None and not 0 <= head < trace.num_heads:
        raise ValueError(f"head={head} is out of range; choose a head from 0 to {trace.num_heads - 1}.")
    if tap is not None and tap not in TAPS:
        raise ValueError(f"tap={tap!r} is unknown; choose one of {', '.join(TAPS)}.")


def _kept(tokens: list[str], hide_special: bool) -> list[int]:
    """Positions to show: all, or all but [CLS]/[SEP] (all again if nothing else is left)."""
    keep = [i for i, t in enumerate(tokens) if not (hide_special and t in SPECIAL)]
    return keep or list(range(len(tokens)))


def _pattern(trace: Trace, layer: int, head: int | None, hide_special: bool) -> tuple[np.ndarray, list[int]]:
    """Attention weights (queries x keys) of one head or the head average, and the positions they belong to.

    With [CLS]/[SEP] hidden, each row is renormalised over the keys left, so it sums to 1 again: without that a
    head that parks most of its weight on [SEP] draws an almost white map.
    """
    _check(trace, layer, head)
    w = (trace.attention[layer].mean(0) if head is None else trace.attention[layer, head]).numpy()  # (T, T)
    keep = _kept(trace.tokens, hide_special)
    if len(keep) < len(w):
        w = w[np.ix_(keep, keep)].astype(np.float64)
        w = w / np.maximum(w.sum(1, keepdims=True), 1e-30)
    return w.astype(np.float32, copy=False), keep


def colour_scale(w: np.ndarray, scale: str) -> tuple[np.ndarray, float, float, str]:
    """(z, zmin, zmax, colour-bar title) for attention weights w (..., queries, keys) under a colour scale:
    fixed 0 to 1 (heads comparable), auto 0 to the largest weight, or row: each row divided by its own maximum."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} is unknown; choose one of {', '.join(SCALES)}.")
    if scale == "row":
        top = np.maximum(np.nanmax(w, axis=-1, keepdims=True), 1e-30)
        return (w / top).astype(np.float32), 0.0, 1.0, "÷ row max"
    if scale == "auto":
        top = float(np.nanmax(w)) if w.size else 1.0
        return w, 0.0, top if top > 0 else 1.0, "weight (auto)"
    return w, 0.0, 1.0, "weight"


def _bounds(n: int, k: int) -> np.ndarray:
    """k + 1 block boundaries splitting range(n) into k nearly equal blocks."""
    return np.linspace(0, n, k + 1).round().astype(int)


def block_mean(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Block-average a 2-D array down to at most rows x cols."""
    for axis, k in ((0, rows), (1, cols)):
        n = x.shape[axis]
        if n > k:
            b = _bounds(n, k)
            sizes = np.diff(b).reshape((-1, 1) if axis == 0 else (1, -1))
            x = np.add.reduceat(x.astype(np.float64), b[:-1], axis=axis) / sizes
    return x


def _categories(tokens: list[str], positions: list[int], k: int = MAX_CELLS) -> list[str]:
    """Unique axis values "token (position)", so repeated tokens stay distinct; one per block above k positions."""
    if len(positions) <= k:
        return [f"{label(tokens[p])} ({p})" for p in positions]
    b = _bounds(len(positions), k)
    return [
        f"{label(tokens[positions[lo]], 12)} … {label(tokens[positions[hi - 1]], 12)} "
        f"({positions[lo]}–{positions[hi - 1]})"
        for lo, hi in zip(b[:-1], b[1:], strict=True)
    ]


def _token_axis(cats: list[str], tokens: list[str], positions: list[int], presentation: bool,
                max_ticks: int = 48, size: int | None = None) -> dict:
    """Category axis whose ticks show just the tokens (every k-th above max_ticks; none for blocks)."""
    if len(cats) != len(positions):
        return dict(type="category", showticklabels=False)
    step = max(1, math.ceil(len(cats) / max(max_ticks, 1)))
    if size is None:
        size = (18 if presentation else 14) if len(cats) <= 24 else (MIN_PRESENT_FONT if presentation else 11)
    return dict(type="category", tickmode="array", tickvals=cats[::step],
                ticktext=[label(tokens[p], 16) for p in positions[::step]], tickfont=dict(size=size))


def _heatmap(w: np.ndarray, cats: list[str], scale: str, note: str = "", **extra: object) -> dict:
    """One attention heatmap trace (queries x keys) under a colour scale; hover always shows the true weight."""
    z, zmin, zmax, bar = colour_scale(w, scale)
    gap = 1 if len(cats) <= 40 else 0
    hover = "%{y} → %{x}: " + ("%{customdata:.3f}" if scale == "row" else "%{z:.3f}") + note + "<extra></extra>"
    return dict(type="heatmap", z=z, x=cats, y=cats, zmin=zmin, zmax=zmax, colorscale=_scale(ATTENTION_SCALE),
                xgap=gap, ygap=gap, colorbar=dict(title=dict(text=bar, side="right"), thickness=18, len=1),
                hovertemplate=hover, **({"customdata": w} if scale == "row" else {}), **extra)


def _map_height(n: int, presentation: bool) -> int:
    """Height of a token-by-token map: grows with the tokens up to what a 900 px laptop (or projector) shows."""
    return min(max(28 * n + 330, 480), PRESENT_HEIGHT if presentation else 720)


def _tick_room(height: int, top: int, tick_size: int) -> int:
    """How many token labels fit along a map's height without overprinting (one per 1.4 label heights)."""
    return max(4, int((height - top - 160) / (1.4 * tick_size)))


def _map_axis(cats: list[str], tokens: list[str], positions: list[int], presentation: bool, height: int,
              top: int) -> dict:
    """Token axis of a square map: the largest label size (18 px, else the 14 px minimum on a projector) at which
    every token gets a label, else every k-th token at the minimum size."""
    sizes = (18, MIN_PRESENT_FONT) if presentation else (14, 11)
    size = next((s for s in sizes if len(cats) <= _tick_room(height, top, s)), sizes[-1])
    return _token_axis(cats, tokens, positions, presentation, _tick_room(height, top, size), size)


def _hidden_note(trace: Trace, shown: int) -> str:
    return "" if shown == trace.seq_len else " ([CLS]/[SEP] hidden; rows renormalised to sum to 1)"


def attention_heatmap(
    trace: Trace, layer: int, head: int | None, hide_special: bool = False, *, scale: str = "fixed",
    presentation: bool = False,
) -> go.Figure:
    """One head's (or the head average's) attention, queries as rows and keys as columns.

    scale: "fixed" colours 0 to 1 (comparable across heads), "auto" 0 to this map's largest weight, "row" each row
    to its own largest weight. The map fills the plot area, so the colour bar is exactly as tall as the map.
    """
    w, pos = _pattern(trace, layer, head, hide_special)
    cats = _categories(trace.tokens, pos)
    note = _hidden_note(trace, len(pos))
    who = f"head {head}" if head is not None else f"average of {trace.num_heads} heads"
    height = _map_height(len(pos), presentation)
    layout = _layout(f"Attention, layer {layer}, {who}{note}", presentation, _sentence(trace),
                     height=height)
    axis = _map_axis(cats, trace.tokens, pos, presentation, layout["height"], 100)
    layout["xaxis"] = dict(title=dict(text="key (attended to)"), tickangle=-45, **axis)
    layout["yaxis"] = dict(title=dict(text="query (attending)"), autorange="reversed", **axis)
    heatmap = _heatmap(w, cats, scale, note)
    layout["margin"] |= _heatmap_margins(axis.get("ticktext", []), axis.get("tickfont", {}).get("size", 0),
                                         layout["font"]["size"], heatmap["colorbar"]["title"]["text"])
    return _quick([heatmap], layout)


def _text_px(text: str, size: float) -> float:
    """Rough rendered width of a label: wide (CJK, emoji) characters count a full em, others ~0.62 em."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else 0.62 * size for c in html.unescape(text))


def _heatmap_margins(ticktext: list[str], tick_size: int, size: int, bar: str = "weight") -> dict:
    """Left, bottom and right margins that already fit the token ticks (x turned 45°), the axis titles and the
    colour bar, so plotly's automargin seldom has to widen them: each widening redraws the whole figure, which at
    512 tokens cost 50 ms of the 300 ms a head change may take. An estimate too small only costs that redraw.
    The colour bar's title runs along the bar; sizing it as if it were level leaves room to spare."""
    widest = max((_text_px(t, tick_size) for t in ticktext), default=0.0)
    return dict(l=round(widest + size + 36), b=round(0.71 * widest + tick_size + size + 40),
                r=round(60 + _text_px(bar, size)))


def _thumbnails(trace: Trace, maps: list[tuple[int, int]], cols: int, hide_special: bool, max_cells: int,
                gap: float, ticks: bool, presentation: bool,
                scale: str = "fixed") -> tuple[list[dict], dict, list[list[float]]]:
    """Small square attention maps sharing one colour axis (see colour_scale), laid out row by row, for one figure.

    maps lists (layer, head) per cell; returns the traces, the layout and each cell's [x0, x1, y0, y1] in paper
    coordinates. Axes are written as one layout dict: make_subplots plus per-axis updates takes seconds for 144 cells.
    """
    rows = math.ceil(len(maps) / cols)
    pos = _kept(trace.tokens, hide_special)
    cats = _categories(trace.tokens, pos, max_cells)
    ticks = ticks and len(cats) == len(pos)
    # a ~140 px thumbnail has room for about 10 legible labels per axis
    axis = _token_axis(cats, trace.tokens, pos, presentation, 10) if ticks else dict(type="category", showticklabels=False)
    data, layout, cells = [], {}, []
    weights = [np.round(block_mean(_pattern(trace, lay, h, hide_special)[0], max_cells, max_cells), 3) for lay, h in maps]
    _, _, top, bar = colour_scale(np.stack(weights) if weights else np.zeros((1, 1)), scale)
    for i, (layer, head) in enumerate(maps):
        r, c = divmod(i, cols)
        x0, x1 = c / cols + gap / 2, (c + 1) / cols - gap / 2
        y0, y1 = 1 - (r + 1) / rows + gap / 2, 1 - r / rows - gap / 2
        n = str(i + 1) if i else ""
        bottom = r == rows - 1 or i + cols >= len(maps)
        layout[f"xaxis{n}"] = dict(axis, domain=[x0, x1], anchor=f"y{n}", ticks="", constrain="domain",
                                   showticklabels=ticks and bottom, tickangle=-60)
        layout[f"yaxis{n}"] = dict(axis, domain=[y0, y1], anchor=f"x{n}", ticks="", autorange="reversed",
                                   scaleanchor=f"x{n}", constrain="domain", showticklabels=ticks and c == 0)
        z = weights[i].astype(np.float32)
        shown = "%{customdata:.3f}" if scale == "row" else "%{z:.3f}"
        data.append(dict(type="heatmap", z=colour_scale(z, scale)[0], x=cats, y=cats, coloraxis="coloraxis",
                         xaxis=f"x{n}", yaxis=f"y{n}", **({"customdata": z} if scale == "row" else {}),
                         hovertemplate=f"layer {layer}, head {head}<br>%{{y}} → %{{x}}: {shown}<extra></extra>"))
        cells.append([x0, x1, y0, y1])
    layout["coloraxis"] = dict(cmin=0, cmax=top, colorscale=_scale(ATTENTION_SCALE),
                               colorbar=dict(title=dict(text=bar, side="right"), thickness=18))
    return data, layout, cells


def _paper_note(text: str, x: float, y: float, size: int, **anchor: str) -> dict:
    """A text annotation placed in paper coordinates (cell labels of the thumbnail figures)."""
    return dict(text=text, x=x, y=y, xref="paper", yref="paper", showarrow=False, font=dict(size=size), **anchor)


def _note(trace: Trace, shown: int, max_cells: int | None = None) -> str:
    """What the maps leave out: hidden [CLS]/[SEP] (rows renormalised) and block-averaging."""
    notes = [" [CLS]/[SEP] hidden; rows renormalised to sum to 1."] if shown < trace.seq_len else []
    if max_cells is not None and shown > max_cells:
        notes.append(f" Long input: each map block-averaged from {shown} to {max_cells} tokens.")
    return "".join(notes)


def attention_grid(
    trace: Trace, layer: int, hide_special: bool = False, *, max_cells: int = 64, scale: str = "fixed",
    presentation: bool = False,
) -> go.Figure:
    """All heads of one layer as one figure of small heatmaps (block-averaged above max_cells tokens).

    In presentation mode up to 6 per row, so 12 heads fit a 600 px tall projector figure in two rows.
    """
    _check(trace, layer)
    heads, shown = trace.num_heads, len(_kept(trace.tokens, hide_special))
    cols = min(heads, 6 if presentation else 4)
    rows = math.ceil(heads / cols)
    data, axes, cells = _thumbnails(trace, [(layer, h) for h in range(heads)], cols, hide_special, max_cells, 0.07,
                                    ticks=shown <= 24, presentation=presentation, scale=scale)
    size = 18 if presentation else 14
    notes = [_paper_note(f"head {h}", (x0 + x1) / 2, y1, size, yanchor="bottom") for h, (x0, x1, _, y1) in enumerate(cells)]
    layout = _layout(f"Attention, layer {layer}, all {heads} heads", presentation,
                     _sentence(trace) + _note(trace, shown, max_cells), height=rows * 300 + 160)
    return _quick(data, layout | axes | {"annotations": notes})


def model_view(trace: Trace, hide_special: bool = False, max_cells: int = 32, *, scale: str = "fixed",
               presentation: bool = False) -> go.Figure:
    """Every layer x head as a thumbnail in one figure; maps block-averaged to max_cells and rounded to 3 decimals."""
    L, H = trace.num_layers, trace.num_heads
    data, axes, cells = _thumbnails(trace, [(lay, h) for lay in range(L) for h in range(H)], H, hide_special,
                                    max_cells, 0.08 / max(H, 1) + 0.004, ticks=False, presentation=presentation,
                                    scale=scale)
    size = 16 if presentation else 12
    notes = [_paper_note(f"H{h}", (cells[h][0] + cells[h][1]) / 2, cells[h][3], size, yanchor="bottom") for h in range(H)]
    notes += [_paper_note(f"L{lay}", cells[lay * H][0], (cells[lay * H][2] + cells[lay * H][3]) / 2, size, xanchor="right")
              for lay in range(L)]
    shown = len(_kept(trace.tokens, hide_special))
    title = f"Model view: {L} layers × {H} heads (rows = layers, columns = heads)"
    layout = _layout(title, presentation, _sentence(trace) + _note(trace, shown, max_cells),
                     height=L * max(60, 900 // max(H, 1)) + 160)
    layout["margin"]["l"] = round(16 + _text_px(f"L{L - 1}", size))  # the row labels sit left of the first column
    return _quick(data, layout | axes | {"annotations": notes})


def attention_table(trace: Trace, layer: int, head: int | None, hide_special: bool = False) -> pd.DataFrame:
    """Long table (query_position, query_token, key_position, key_token, weight) for a CSV download; raw tokens."""
    w, pos = _pattern(trace, layer, head, hide_special)
    q, k = np.meshgrid(pos, pos, indexing="ij")
    tokens = np.asarray(trace.tokens, dtype=object)
    return pd.DataFrame({
        "query_position": q.ravel(), "query_token": tokens[q.ravel()],
        "key_position": k.ravel(), "key_token": tokens[k.ravel()], "weight": w.ravel().astype(np.float64),
    })


def attention_json(trace: Trace, layer: int, head: int | None, hide_special: bool = False) -> str:
    """The same weights as JSON: tokens, positions and a queries x keys matrix; head null means the average."""
    w, pos = _pattern(trace, layer, head, hide_special)
    return json.dumps({
        "text": trace.text, "layer": layer, "head": head, "heads_averaged": head is None,
        "rows_renormalised": len(pos) < trace.seq_len,
        "positions": pos, "tokens": [trace.tokens[p] for p in pos],
        "weights": np.round(w.astype(np.float64), 6).tolist(),
    })


def tap_profile(stats: pd.DataFrame, layer: int, norm: str = "post", *, train: bool = False,
                presentation: bool = False) -> go.Figure:
    """Mean, std and RMS at each tap of one layer in data-flow order (pass the trace's config.norm and train)."""
    rows = stats[stats["layer"] == layer].set_index("tap")
    if rows.empty:
        raise ValueError(f"The statistics have no layer {layer}; choose a layer from 0 to {int(stats['layer'].max())}.")
    rows = rows.reindex([t for t in flow_order(norm) if t in rows.index])
    taps = list(rows.index)
    extra = rows[["min", "max", "zero_frac", "nonfinite"]].to_numpy()
    fig = go.Figure()
    styles = (("rms", "#1c7ed6", "solid", 15), ("std", "#f08c00", "dash", 9), ("mean", "#2f9e44", "dot", 9))
    for col, colour, dash, size in styles:  # RMS and std often coincide: the big RMS marker stays visible
        fig.add_trace(go.Scatter(
            x=taps, y=rows[col], name=col if col != "rms" else "RMS", mode="lines+markers", customdata=extra,
            line=dict(color=colour, dash=dash, width=3), marker=dict(size=size),
            hovertemplate=f"%{{x}}: {col} %{{y:.4g}}<br>min %{{customdata[0]:.3g}}, max %{{customdata[1]:.3g}}"
                          "<br>zeros %{customdata[2]:.1%}, NaN/Inf %{customdata[3]}<extra></extra>",
        ))
    bad = rows[rows["nonfinite"] > 0]
    title = f"Layer {layer}: mean, std, RMS per tap"  # short: half a 1024 px projector at 26 px
    if not bad.empty:
        fig.add_trace(go.Scatter(
            x=list(bad.index), y=[0] * len(bad), name="NaN/Inf", mode="markers+text",
            marker=dict(symbol="x", size=18, color="#e03131"), text=[f"NaN/Inf: {k}" for k in bad["nonfinite"]],
            textposition="top center", textfont=dict(color="#e03131"), hoverinfo="skip",
        ))
        title += f" ⚠ NaN/Inf first at '{bad.index[0]}'"
    fig.update_xaxes(type="category", title="tap")
    fig.update_yaxes(title="value", zeroline=True)
    return _style(fig, title, presentation, mode_note(train).removeprefix(" · "), height=480)


def residual_norms(traces: dict[str, Trace], *, log_y: bool = False, presentation: bool = False) -> go.Figure:
    """Mean per-token L2 norm of the residual stream after the embeddings and after each layer, one line per trace."""
    fig = go.Figure()
    depth = 0
    for name, trace in traces.items():
        norms = trace.hidden_states.double().norm(dim=-1).mean(-1)  # (L + 1,): embeddings, then after layer 0, 1...
        depth = max(depth, len(norms))
        where = ["the embeddings"] + [f"after layer {i}" for i in range(len(norms) - 1)]
        fig.add_trace(go.Scatter(
            x=list(range(-1, len(norms) - 1)), y=norms.numpy(), name=label(name, 40), mode="lines+markers",
            line=dict(width=3), marker=dict(size=9), customdata=where,
            hovertemplate="%{customdata}: %{y:.4g}<extra>%{fullData.name}</extra>",
        ))
    # Layers are counted from 0, like the Layer sliders; the point before layer 0 is the embeddings.
    step = max(1, math.ceil(depth / 13))
    ticks = list(range(-1, depth - 1))[::step]
    fig.update_xaxes(title="after layer (0 … N−1, as on the sliders)", tickmode="array", tickvals=ticks,
                     ticktext=["embeddings" if t < 0 else str(t) for t in ticks])
    fig.update_yaxes(title="mean ‖x‖₂ per token", type="log" if log_y else "linear", rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    train = any(t.train for t in traces.values())
    return _style(fig, "Residual stream norm by depth", presentation, mode_note(train).removeprefix(" · "),
                  height=460)


def token_norms(trace: Trace, layer: int, tap: str, *, presentation: bool = False) -> go.Figure:
    """L2 norm of each token's vector at one tap of one layer."""
    _check(trace, layer, tap=tap)
    norms = trace.taps[layer][tap].double().norm(dim=-1).numpy()  # (T,)
    pos = list(range(trace.seq_len))
    cats = _categories(trace.tokens, pos)
    fig = go.Figure(go.Bar(x=cats, y=norms, marker_color="#4c6ef5", hovertemplate="%{x}: ‖x‖₂ = %{y:.4g}<extra></extra>"))
    fig.update_xaxes(title="token", tickangle=-45, **_token_axis(cats, trace.tokens, pos, presentation))
    fig.update_yaxes(title="‖x‖₂")
    bad = int((~np.isfinite(norms)).sum())
    note = f" ⚠ {bad} token(s) with NaN/Inf (no bar)" if bad else ""
    return _style(fig, f"Layer {layer}, {tap}: ‖x‖₂ per token{note}", presentation,
                  mode_note(trace.train).removeprefix(" · "), height=460)


def tap_histogram(trace: Trace, layer: int, tap: str, bins: int = 60, *, presentation: bool = False) -> go.Figure:
    """Histogram of the finite values at one tap of one layer; the title counts the NaN/Inf left out."""
    _check(trace, layer, tap=tap)
    x = trace.taps[layer][tap].double().flatten().numpy()
    finite = x[np.isfinite(x)]
    dropped = x.size - finite.size
    fig = go.Figure()
    if finite.size:
        counts, edges = np.histogram(finite, bins=max(1, int(bins)))
        fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), marker_color="#7950f2",
                             hovertemplate="%{x:.3g}: %{y} values<extra></extra>"))
    else:
        fig.add_annotation(text="No finite values to plot", showarrow=False, font=dict(size=20, color="#e03131"))
    fig.update_xaxes(title="value")
    fig.update_yaxes(title="count")
    fig.update_layout(bargap=0)
    note = f" ⚠ {dropped:,} NaN/Inf dropped" if dropped else ""
    return _style(fig, f"Layer {layer}, {tap}: {finite.size:,} values{note}", presentation,
                  mode_note(trace.train).removeprefix(" · "), height=440)


def _symmetric(z: np.ndarray, percentile: float = 100.0) -> float:
    """Half-width of a colour range centred at 0 covering `percentile` % of the finite |values|."""
    finite = np.abs(z[np.isfinite(z)])
    if not finite.size:
        return 1e-6
    top = float(np.percentile(finite, percentile))
    return top if top > 0 else max(float(finite.max()), 1e-6)


def _clipped(m: float, z: np.ndarray) -> dict:
    """Colour bar that says when a few outliers (e.g. BERT's huge dimensions) saturate the scale."""
    over = np.isfinite(z) & (np.abs(z) > m)
    return dict(thickness=18, len=1, title=dict(text=f"clipped at ±{m:.3g}" if over.any() else "value", side="right"))


def tensor_heatmap(
    x: Tensor, tokens: list[str], title: str, *, max_cols: int = MAX_CELLS, subtitle: str = "",
    presentation: bool = False,
) -> go.Figure:
    """Values of a (seq, width) tensor, tokens as rows, diverging colours centred at 0; wide tensors block-averaged."""
    if x.ndim != 2 or x.shape[0] != len(tokens):
        raise ValueError(f"Expected a (seq, width) tensor with one row per token, got {tuple(x.shape)} for {len(tokens)} tokens.")
    pos = list(range(len(tokens)))
    z = block_mean(x.detach().double().cpu().numpy(), MAX_CELLS, max_cols)
    cats = _categories(tokens, pos)
    b = _bounds(x.shape[1], z.shape[1])
    m = _symmetric(z, 99.5)  # a few outlier dimensions would otherwise wash every other value out
    fig = go.Figure(go.Heatmap(
        z=z.astype(np.float32), x=b[:-1], y=cats, zmid=0, zmin=-m, zmax=m, colorscale=DIVERGING,
        hovertemplate="%{y}, dim %{x}: %{z:.3f}<extra></extra>", colorbar=_clipped(m, z),
    ))
    note = f" (columns averaged in blocks of ~{x.shape[1] / z.shape[1]:.1f})" if z.shape[1] < x.shape[1] else ""
    fig.update_xaxes(title="dimension" + note)
    height = max(360, min(900, 26 * len(cats) + 180))
    fig.update_yaxes(autorange="reversed", **_map_axis(cats, tokens, pos, presentation,
                                                        min(height, PRESENT_HEIGHT) if presentation else height, 0))
    return _style(fig, label(title, 120), presentation, subtitle, height=height)


def positional_heatmap(table: Tensor, title: str, *, presentation: bool = False) -> go.Figure:
    """A (positions, d_model) positional table as a heatmap, diverging colours centred at 0."""
    z = block_mean(table.detach().double().cpu().numpy(), MAX_CELLS, MAX_CELLS)
    rows, cols = _bounds(table.shape[0], z.shape[0])[:-1], _bounds(table.shape[1], z.shape[1])[:-1]
    m = _symmetric(z, 99.5)  # a few outlier dimensions would otherwise wash every other value out
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cols, y=rows, zmid=0, zmin=-m, zmax=m, colorscale=DIVERGING,
                               hovertemplate="position %{y}, dim %{x}: %{z:.3f}<extra></extra>",
                               colorbar=_clipped(m, z)))
    fig.update_xaxes(title="dimension")
    fig.update_yaxes(title="position", autorange="reversed")
    return _style(fig, label(title, 120), presentation, height=520)


def cosine_matrix(vectors: Tensor) -> Tensor:
    """(N, N) cosine similarity between the rows of an (N, D) table, in float64."""
    return _embeddings.cosine_matrix(vectors.detach().double().cpu())


def position_similarity(table: Tensor, *, presentation: bool = False) -> go.Figure:
    """Cosine similarity between every pair of positional vectors, colours fixed to [-1, 1]."""
    z = block_mean(cosine_matrix(table).numpy(), MAX_CELLS // 2, MAX_CELLS // 2)  # (P, P); smooth: 256 cells suffice
    ticks = _bounds(table.shape[0], z.shape[0])[:-1]
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=ticks, y=ticks, zmid=0, zmin=-1, zmax=1, colorscale=DIVERGING,
                               hovertemplate="positions %{y} and %{x}: %{z:.3f}<extra></extra>",
                               colorbar=dict(title="cos", thickness=18, len=1)))
    fig.update_xaxes(title="position")
    fig.update_yaxes(title="position", autorange="reversed")
    return _style(fig, "Cosine similarity between positions", presentation, height=520)


def token_similarity(vectors: Tensor, tokens: list[str], title: str, *, presentation: bool = False) -> go.Figure:
    """Cosine similarity between the (seq, d) vectors of the tokens, colours fixed to [-1, 1]."""
    if vectors.ndim != 2 or vectors.shape[0] != len(tokens):
        raise ValueError(f"Expected one vector per token, got {tuple(vectors.shape)} for {len(tokens)} tokens.")
    pos = list(range(len(tokens)))
    cats = _categories(tokens, pos)
    z = block_mean(cosine_matrix(vectors).numpy(), MAX_CELLS, MAX_CELLS)
    height = _map_height(len(tokens), presentation)
    axis = _map_axis(cats, tokens, pos, presentation, height, 70)
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cats, y=cats, zmid=0, zmin=-1, zmax=1, colorscale=DIVERGING,
                               hovertemplate="%{y} and %{x}: %{z:.3f}<extra></extra>",
                               colorbar=dict(title="cos", thickness=18, len=1)))
    fig.update_xaxes(tickangle=-45, **axis)
    fig.update_yaxes(autorange="reversed", **axis)
    return _style(fig, label(title, 120), presentation, height=height)


def attention_difference(a: Tensor, b: Tensor, tokens: list[str], title: str, *, presentation: bool = False) -> go.Figure:
    """a - b for two (T, T) attention maps, diverging colours with a range symmetric around 0."""
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] != len(tokens):
        raise ValueError(f"Expected two (T, T) maps for {len(tokens)} tokens, got {tuple(a.shape)} and {tuple(b.shape)}.")
    d = (a.detach().double() - b.detach().double()).cpu().numpy()
    pos = list(range(len(tokens)))
    cats = _categories(tokens, pos)
    z = block_mean(d, MAX_CELLS, MAX_CELLS)
    m = _symmetric(z)
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cats, y=cats, zmid=0, zmin=-m, zmax=m, colorscale=DIVERGING,
                               hovertemplate="%{y} → %{x}: %{z:+.3f}<extra></extra>",
                               colorbar=dict(title="Δ weight", thickness=18, len=1)))
    height = _map_height(len(tokens), presentation)
    axis = _map_axis(cats, tokens, pos, presentation, height, 70)
    fig.update_xaxes(title="key", tickangle=-45, **axis)
    fig.update_yaxes(title="query", autorange="reversed", **axis)
    return _style(fig, label(title, 120), presentation, height=height)


def attention_pair(traces: dict[str, Trace], layer: int, head: int | None, *, scale: str = "fixed",
                   presentation: bool = False) -> go.Figure:
    """Two traces' attention for one layer and head side by side in one figure, each map 46 % of the width, with
    one shared colour bar (auto and per-row scales are computed over both maps). The traces share their tokens."""
    (name_a, a), (name_b, b) = traces.items()
    if a.tokens != b.tokens:
        raise ValueError("The two traces must be of the same sentence.")
    wa, pos = _pattern(a, layer, head, False)
    wb, _ = _pattern(b, layer, head, False)
    _check(b, layer, head)
    cats = _categories(a.tokens, pos)
    both, zmin, zmax, bar = colour_scale(np.stack([wa, wb]), scale)
    height = _map_height(len(pos), presentation)
    axis = _map_axis(cats, a.tokens, pos, presentation, height, 130)
    who = f"head {head}" if head is not None else "average of heads"
    layout = _layout(f"Attention, layer {layer}, {who}", presentation, _sentence(a, 70), height=height)
    layout["margin"]["t"] += 30  # room for the two map titles
    data, notes = [], []
    for i, (name, w, z) in enumerate(((name_a, wa, both[0]), (name_b, wb, both[1]))):
        n = str(i + 1) if i else ""
        x0, x1 = (0.0, 0.46) if i == 0 else (0.54, 1.0)
        layout[f"xaxis{n}"] = dict(axis, domain=[x0, x1], anchor=f"y{n}", tickangle=-45,
                                   title=dict(text="key (attended to)"))
        layout[f"yaxis{n}"] = dict(axis, domain=[0, 1], anchor=f"x{n}", autorange="reversed",
                                   showticklabels=i == 0, title=dict(text="query" if i == 0 else ""))
        hover = "%{customdata:.3f}" if scale == "row" else "%{z:.3f}"
        data.append(dict(type="heatmap", z=z, x=cats, y=cats, coloraxis="coloraxis", xaxis=f"x{n}", yaxis=f"y{n}",
                         xgap=1 if len(cats) <= 40 else 0, ygap=1 if len(cats) <= 40 else 0,
                         **({"customdata": w} if scale == "row" else {}),
                         hovertemplate=f"{label(name, 30)}: %{{y}} → %{{x}}: {hover}<extra></extra>"))
        notes.append(_paper_note(f"<b>{label(name, 40)}</b>", (x0 + x1) / 2, 1.0, layout["font"]["size"],
                                 yanchor="bottom"))
    layout["coloraxis"] = dict(cmin=zmin, cmax=zmax, colorscale=_scale(ATTENTION_SCALE),
                               colorbar=dict(title=dict(text=bar, side="right"), thickness=18, len=1))
    layout["margin"] |= _heatmap_margins(axis.get("ticktext", []), axis.get("tickfont", {}).get("size", 0),
                                         layout["font"]["size"], bar)
    return _quick(data, layout | {"annotations": notes})
