"""Attention figures over a Trace: one head or the head average, all heads of a layer, every layer x head, two
traces side by side, the difference of two maps, and the weights as CSV rows or JSON.

The views redraw on every layer or head click, so the maps are built as plain dicts without plotly.py's validation
(style.quick). Large maps are block-averaged (axes.MAX_CELLS).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from ..trace import Trace
from . import axes, style
from .text import fit_label, label, text_px

SCALES = ("fixed", "auto", "row")  # attention colour scales: 0 to 1, 0 to this map's largest weight, per row
# With per-row colours the hover's true weight travels as a second array beside the colours (plotly cannot multiply
# in a hover): past this many tokens that doubles a 512-token map to 2.8 MB, so there the hover prints the share of
# the row's largest weight that the colour shows (the weights themselves: fixed or auto colours, or the CSV).
ROW_WEIGHTS_UP_TO = 256


def row_hover(scale: str, tokens: int) -> tuple[str, bool]:
    """A heatmap's hover number under a colour scale, and whether the true weights travel as customdata for it."""
    if scale != "row":
        return "%{z:.3f}", False
    if tokens <= ROW_WEIGHTS_UP_TO:
        return "%{customdata:.3f}", True
    return "%{z:.3f} of its row's largest", False


def _pattern(trace: Trace, layer: int, head: int | None, hide_special: bool) -> tuple[np.ndarray, list[int]]:
    """Attention weights (queries x keys) of one head or the head average, and the positions they belong to.

    With the special tokens hidden ([CLS]/[SEP], <s>/</s>: trace.special_positions), each row is renormalised over
    the keys left, so it sums to 1 again: without that a head that parks most of its weight on [SEP] draws an almost
    white map.
    """
    axes.check(trace, layer, head)
    w = (trace.attention[layer].mean(0) if head is None else trace.attention[layer, head]).numpy()  # (T, T)
    keep = axes.kept(trace.tokens, hide_special, trace.special_positions)
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


def _heatmap(w: np.ndarray, cats: list[str], scale: str, note: str = "", **extra: object) -> dict:
    """One attention heatmap trace (queries x keys) under a colour scale; hover shows the true weight (per-row colours
    past ROW_WEIGHTS_UP_TO tokens: the share of its row's largest that the colour shows)."""
    z, zmin, zmax, bar = colour_scale(w, scale)
    gap = 1 if len(cats) <= 40 else 0
    shown, weights = row_hover(scale, len(cats))
    return dict(type="heatmap", z=z, x=cats, y=cats, zmin=zmin, zmax=zmax, colorscale=style.colorscale(style.ATTENTION_SCALE),
                xgap=gap, ygap=gap, colorbar=dict(title=style.bar_title(bar), thickness=18, len=1),
                hovertemplate=f"%{{y}} → %{{x}}: {shown}{note}<extra></extra>", **({"customdata": w} if weights else {}),
                **extra)


def _hidden_note(trace: Trace, shown: int) -> str:
    return "" if shown == trace.seq_len else (f" ({label(axes.special_names(trace.special_tokens, '/'), 30)} hidden; rows "
                                              "renormalised to sum to 1)")


# Each map title of a pair at most this wide (text_px's estimate, about a fifth over what Chromium draws): centred
# over its map, two such titles stay apart in the narrowest pair, whose maps' centres are ~180 px apart (presenting
# at 1024 px with the sidebar unfolded). The pages' own names ("Pre-LN (rewired)", "Knocked out") fit whole.
PAIR_TITLE_PX = 220
PAIR_TOP = 130  # px above a pair's maps: the title, the sentence and the two maps' titles
# A pair that is its page's main figure on a projector (Compare): whole on the first screen below the page's controls
# (its top ~265 px down at 1280 x 720 and 1024 x 768 presenting), and every row of a 16-token sentence named. With
# the sentence (the presentation bar shows it) left out, 80 px above the maps hold the title and the maps' titles;
# below them the key labels and the axis title take what plotly.js gives them (measured in Chromium: PAIR_SPARE px
# under the axis title, 9 less than a map's usual spare), and 14 px labels 1.15 label heights (16 px) apart, as
# lines of text are, stay clear of each other.
PAIR_FIRST_SCREEN = 450
PAIR_TOP_BARE = 80
PAIR_SPARE = 31
PAIR_SPACING = 1.15
WINDOW_GREY = "#ced4da"  # the cells a sliding window masks: weight 0, drawn apart from a small weight's near-white


def _named_below(trace: Trace, pos: list[int], bar: str, top: int, tallest: int) -> int | None:
    """The px below a projector map whose every row is named at the minimum size, 1.15 label heights apart, with
    only the room its key labels and axis title take below it (PAIR_SPARE): None where that is still over `tallest`."""
    shown = [label(trace.labels[p], 16) for p in pos]
    below = axes.heatmap_margins(shown, style.MIN_PRESENT_FONT, style.FONT_SIZE[True], bar, PAIR_SPARE)["b"]
    return below if axes.named_height(len(pos), top, below, PAIR_SPACING) <= tallest else None


def _window_band(trace: Trace, layer: int, pos: list[int], cats: list[str], gap: int) -> dict | None:
    """A grey layer over the cells outside `layer`'s sliding window (|i - j| > window/2), or None for a global layer.

    Those weights are exactly 0: the scores were masked before the softmax (encoder/window.py).
    """
    radius = trace.config.layer_window(layer) // 2
    p = np.asarray(pos)
    outside = np.abs(p[:, None] - p[None, :]) > radius  # (shown, shown)
    if not radius or not outside.any():
        return None
    z = np.where(outside, 1.0, np.nan).astype(np.float32)
    return dict(type="heatmap", z=z, x=cats, y=cats, zmin=0, zmax=1, showscale=False, xgap=gap, ygap=gap,
                colorscale=[[0, WINDOW_GREY], [1, WINDOW_GREY]],
                hovertemplate=f"%{{y}} → %{{x}}: 0, outside the window (more than {radius} apart)<extra></extra>")


def window_note(trace: Trace, layer: int, band: bool = True) -> str:
    """One sentence on `layer`'s attention window: why the weights outside it are 0 ('' for a global layer).
    band: the figure greys the cells outside the window (the plotly maps do; the browser's map draws them as 0)."""
    w = trace.config.layer_window(layer)
    if not w:
        return ""
    if w // 2 >= trace.seq_len - 1:
        return (f"Layer {layer} attends in a sliding window of {w} tokens ({w // 2} on each side), which holds this "
                "whole sentence: nothing is masked here.")
    return (f"Layer {layer} attends in a sliding window: each query sees only the keys at most {w // 2} positions "
            "away. The scores of the other keys are set to −∞ before the softmax, so their weights are exactly 0 "
            + ("(the grey band), " if band else "") + "and each row's weights sum to 1 within its window.")


def attention_heatmap(
    trace: Trace, layer: int, head: int | None, hide_special: bool = False, *, scale: str = "fixed",
    presentation: bool = False, title: str = "", narrow: bool = False, subtitle: str | None = None,
    tallest: int = style.PRESENT_HEIGHT,
) -> go.Figure:
    """One head's (or the head average's) attention, queries as rows and keys as columns.

    scale: "fixed" colours 0 to 1 (comparable across heads), "auto" 0 to this map's largest weight, "row" each row
    to its own largest weight. The map fills the plot area, so the colour bar is exactly as tall as the map.
    title: in place of "Attention, layer L, head H"; subtitle: in place of the sentence; narrow: the map shares its
    row with another (style.layout). tallest: the most it may be when presenting. A page's main figure given more
    than style.PRESENT_HEIGHT names every row where that fits, with the pair's measured room below its keys and its
    spacing (attention_pair).
    """
    w, pos = _pattern(trace, layer, head, hide_special)
    cats = axes.categories(trace.labels, pos)
    note = _hidden_note(trace, len(pos))
    who = f"head {head}" if head is not None else f"average of {trace.num_heads} heads"
    heatmap = _heatmap(w, cats, scale, note)
    bar = heatmap["colorbar"]["title"]["text"]
    subtitle = style.sentence(trace) if subtitle is None else subtitle
    top, bottom, spare, spacing = (100 if subtitle else 70), axes.TICK_MARGIN, axes.MARGIN_SPARE, axes.TICK_SPACING
    if presentation and len(cats) == len(pos) and tallest > style.PRESENT_HEIGHT:
        below = _named_below(trace, pos, bar, top, tallest)
        if below is not None:
            bottom, spare, spacing = below, PAIR_SPARE, PAIR_SPACING
    height = axes.map_height(len(pos), presentation, top, tallest, bottom=bottom, spacing=spacing)
    layout = style.layout(title or f"Attention, layer {layer}, {who}{note}", presentation, subtitle,
                          height=height, narrow=narrow, tallest=tallest)
    axis = axes.map_axis(cats, trace.labels, pos, presentation, layout["height"], top, bottom=bottom,
                         spacing=spacing)
    layout["xaxis"] = dict(title=dict(text="key (attended to)"), tickangle=-45,
                           **axes.key_axis(axis, cats, trace.labels, pos))
    layout["yaxis"] = dict(title=dict(text="query (attending)"), autorange="reversed", **axis)
    layout["margin"] |= axes.heatmap_margins(axis.get("ticktext", []), axis.get("tickfont", {}).get("size", 0),
                                             layout["font"]["size"], bar, spare)
    band = _window_band(trace, layer, pos, cats, heatmap["xgap"])
    return style.quick([heatmap] if band is None else [heatmap, band], layout)


def _thumbnails(trace: Trace, maps: list[tuple[int, int]], cols: int, hide_special: bool, max_cells: int,
                gap: float, ticks: bool, presentation: bool,
                scale: str = "fixed") -> tuple[list[dict], dict, list[list[float]]]:
    """Small square attention maps sharing one colour axis (see colour_scale), laid out row by row, for one figure.

    maps lists (layer, head) per cell; returns the traces, the layout and each cell's [x0, x1, y0, y1] in paper
    coordinates. Axes are written as one layout dict: make_subplots plus per-axis updates takes seconds for 144 cells.
    """
    rows = math.ceil(len(maps) / cols)
    pos = axes.kept(trace.tokens, hide_special, trace.special_positions)
    cats = axes.categories(trace.labels, pos, max_cells)
    ticks = ticks and len(cats) == len(pos)
    # a ~140 px thumbnail has room for about 10 legible labels per axis
    axis = axes.token_axis(cats, trace.labels, pos, presentation, 10) if ticks else dict(type="category", showticklabels=False)
    data, layout, cells = [], {}, []
    weights = [np.round(axes.block_mean(_pattern(trace, lay, h, hide_special)[0], max_cells, max_cells), 3) for lay, h in maps]
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
        shown, exact = row_hover(scale, len(cats))
        data.append(dict(type="heatmap", z=colour_scale(z, scale)[0], x=cats, y=cats, coloraxis="coloraxis",
                         xaxis=f"x{n}", yaxis=f"y{n}", **({"customdata": z} if exact else {}),
                         hovertemplate=f"layer {layer}, head {head}<br>%{{y}} → %{{x}}: {shown}<extra></extra>"))
        cells.append([x0, x1, y0, y1])
    layout["coloraxis"] = dict(cmin=0, cmax=top, colorscale=style.colorscale(style.ATTENTION_SCALE),
                               colorbar=dict(title=style.bar_title(bar), thickness=18))
    return data, layout, cells


def _note(trace: Trace, shown: int, max_cells: int | None = None) -> str:
    """What the maps leave out: hidden special tokens (rows renormalised) and block-averaging."""
    notes = ([f" {label(axes.special_names(trace.special_tokens, '/'), 30)} hidden; rows renormalised to sum to 1."]
             if shown < trace.seq_len else [])
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
    axes.check(trace, layer)
    heads, shown = trace.num_heads, len(axes.kept(trace.tokens, hide_special, trace.special_positions))
    cols = min(heads, 6 if presentation else 4)
    rows = math.ceil(heads / cols)
    data, grid, cells = _thumbnails(trace, [(layer, h) for h in range(heads)], cols, hide_special, max_cells, 0.07,
                                    ticks=shown <= 24, presentation=presentation, scale=scale)
    size = 18 if presentation else 14
    notes = [style.paper_note(f"head {h}", (x0 + x1) / 2, y1, size, yanchor="bottom") for h, (x0, x1, _, y1) in enumerate(cells)]
    layout = style.layout(f"Attention, layer {layer}, all {heads} heads", presentation,
                          style.sentence(trace) + _note(trace, shown, max_cells), height=rows * 300 + 160)
    return style.quick(data, layout | grid | {"annotations": notes})


def model_view(trace: Trace, hide_special: bool = False, max_cells: int = 32, *, scale: str = "fixed",
               presentation: bool = False) -> go.Figure:
    """Every layer x head as a thumbnail in one figure; maps block-averaged to max_cells and rounded to 3 decimals."""
    L, H = trace.num_layers, trace.num_heads
    data, grid, cells = _thumbnails(trace, [(lay, h) for lay in range(L) for h in range(H)], H, hide_special,
                                    max_cells, 0.08 / max(H, 1) + 0.004, ticks=False, presentation=presentation,
                                    scale=scale)
    size = 16 if presentation else 12
    notes = [style.paper_note(f"H{h}", (cells[h][0] + cells[h][1]) / 2, cells[h][3], size, yanchor="bottom") for h in range(H)]
    notes += [style.paper_note(f"L{lay}", cells[lay * H][0], (cells[lay * H][2] + cells[lay * H][3]) / 2, size, xanchor="right")
              for lay in range(L)]
    shown = len(axes.kept(trace.tokens, hide_special, trace.special_positions))
    title = f"Model view: {L} layers × {H} heads (rows = layers, columns = heads)"
    layout = style.layout(title, presentation, style.sentence(trace) + _note(trace, shown, max_cells),
                          height=L * max(60, 900 // max(H, 1)) + 160)
    layout["margin"]["l"] = round(16 + text_px(f"L{L - 1}", size))  # the row labels sit left of the first column
    return style.quick(data, layout | grid | {"annotations": notes})


def attention_pair(traces: dict[str, Trace], layer: int, head: int | None, *, scale: str = "fixed",
                   presentation: bool = False, tallest: int = style.PRESENT_TALLEST) -> go.Figure:
    """Two traces' attention for one layer and head side by side in one figure, each map 46 % of the width, with
    one shared colour bar and the query labels once (auto and per-row scales are computed over both maps); a layer
    with a sliding window greys the cells outside it, after the two maps. The traces share their tokens.
    tallest: the most it may be when presenting, for every token's label (axes.map_height); a page's main figure
    takes PAIR_FIRST_SCREEN, whole on the first screen. Where its rows would not all be named within that, it
    leaves the sentence out and keeps only the room its key labels need below (PAIR_TOP_BARE, PAIR_SPARE)."""
    (name_a, a), (name_b, b) = traces.items()
    if a.tokens != b.tokens:
        raise ValueError("The two traces must be of the same sentence.")
    wa, pos = _pattern(a, layer, head, False)
    wb, _ = _pattern(b, layer, head, False)
    axes.check(b, layer, head)
    cats = axes.categories(a.labels, pos)
    both, zmin, zmax, bar = colour_scale(np.stack([wa, wb]), scale)
    top, bottom, spare, spacing = PAIR_TOP, axes.TICK_MARGIN, axes.MARGIN_SPARE, axes.TICK_SPACING
    subtitle = style.sentence(a, 70)
    if presentation and len(cats) == len(pos) and axes.named_height(len(pos), PAIR_TOP) > tallest:
        below = _named_below(a, pos, bar, PAIR_TOP_BARE, tallest)
        if below is not None:
            top, bottom, spare, spacing, subtitle = PAIR_TOP_BARE, below, PAIR_SPARE, PAIR_SPACING, ""
    height = axes.map_height(len(pos), presentation, top, tallest, bottom=bottom, spacing=spacing)
    axis = axes.map_axis(cats, a.labels, pos, presentation, height, top, bottom=bottom, spacing=spacing)
    keys = axes.key_axis(axis, cats, a.labels, pos)
    who = f"head {head}" if head is not None else "average of heads"
    layout = style.layout(f"Attention, layer {layer}, {who}", presentation, subtitle, height=height,
                          plot_titles=True, tallest=height)  # the two map titles, below the subtitle
    data, notes, bands = [], [], []
    for i, (name, w, z) in enumerate(((name_a, wa, both[0]), (name_b, wb, both[1]))):
        n = str(i + 1) if i else ""
        x0, x1 = (0.0, 0.485) if i == 0 else (0.515, 1.0)
        # Key labels level where they fit, else slanted, else upright (plotly.js's tickangle "auto", its default):
        # upright names every key of 16 at 1024 px presenting, where slanted ones would touch.
        layout[f"xaxis{n}"] = dict(keys, domain=[x0, x1], anchor=f"y{n}", autotickangles=[0, -45, -90],
                                   title=dict(text="key (attended to)"))
        layout[f"yaxis{n}"] = dict(axis, domain=[0, 1], anchor=f"x{n}", autorange="reversed",
                                   showticklabels=i == 0, title=dict(text="query" if i == 0 else ""))
        hover, exact = row_hover(scale, len(cats))
        data.append(dict(type="heatmap", z=z, x=cats, y=cats, coloraxis="coloraxis", xaxis=f"x{n}", yaxis=f"y{n}",
                         xgap=1 if len(cats) <= 40 else 0, ygap=1 if len(cats) <= 40 else 0,
                         **({"customdata": w} if exact else {}),
                         hovertemplate=f"{label(name, 30)}: %{{y}} → %{{x}}: {hover}<extra></extra>"))
        size = layout["font"]["size"]
        notes.append(style.paper_note(f"<b>{fit_label(name, PAIR_TITLE_PX, size, bold=True)}</b>", (x0 + x1) / 2, 1.0,
                                      size, xanchor="center", yanchor="bottom"))
        band = _window_band((a, b)[i], layer, pos, cats, data[-1]["xgap"])
        if band is not None:
            bands.append(band | dict(xaxis=f"x{n}", yaxis=f"y{n}"))
    data += bands
    # On a projector the bar's numbers are the token labels' size, as on the Attention page's map: the two maps get
    # the room.
    tick_size = style.MIN_PRESENT_FONT if presentation else layout["font"]["size"]
    layout["coloraxis"] = dict(cmin=zmin, cmax=zmax, colorscale=style.colorscale(style.ATTENTION_SCALE),
                               colorbar=dict(title=style.bar_title(bar), thickness=18, len=1,
                                             tickfont=dict(size=tick_size)))
    layout["margin"] |= axes.heatmap_margins(axis.get("ticktext", []), axis.get("tickfont", {}).get("size", 0),
                                             layout["font"]["size"], bar, spare)
    # The shared colour axis's bar: 2 % of the plot's width out, its pad and its 18 px, the tick labels and the title
    # running along the bar (about 2.2 font sizes with its pads). In Chromium the bar's box took 107-137 px and plotly
    # asked ~16 more; this gives 146 (155 presenting), which it keeps (tests/app/test_browser.py: never widened).
    # Sized as if the title lay level, the margin was 44-132 px wider than the bar, and at 1024 px presenting that
    # left each map too narrow to name every key of a 16-token sentence.
    layout["margin"]["r"] = round(76 + text_px("0.00", tick_size) + 2.2 * layout["font"]["size"])
    return style.quick(data, layout | {"annotations": notes})


def attention_difference(a: Tensor, b: Tensor, tokens: list[str], title: str, *, presentation: bool = False) -> go.Figure:
    """a - b for two (T, T) attention maps, diverging colours with a range symmetric around 0."""
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] != len(tokens):
        raise ValueError(f"Expected two (T, T) maps for {len(tokens)} tokens, got {tuple(a.shape)} and {tuple(b.shape)}.")
    d = (a.detach().double() - b.detach().double()).cpu().numpy()
    pos = list(range(len(tokens)))
    cats = axes.categories(tokens, pos)
    z = axes.block_mean(d, axes.MAX_CELLS, axes.MAX_CELLS)
    m = style.symmetric_range(z)
    height = axes.map_height(len(tokens), presentation, axes.MAP_TOP, style.PRESENT_TALLEST)  # below the pair
    axis = axes.map_axis(cats, tokens, pos, presentation, height, axes.MAP_TOP)
    fig = go.Figure(go.Heatmap(z=z.astype(np.float32), x=cats, y=cats, zmid=0, zmin=-m, zmax=m, colorscale=style.DIVERGING,
                               hovertemplate="%{y} → %{x}: %{z:+.3f}<extra></extra>",
                               colorbar=dict(title=style.bar_title("Δ weight"), thickness=18, len=1)),
                    layout=dict(xaxis=dict(title="key", tickangle=-45, **axes.key_axis(axis, cats, tokens, pos)),
                                yaxis=dict(title="query", autorange="reversed", **axis)))
    return style.apply(fig, label(title, 120), presentation, height=height, tallest=height)


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

