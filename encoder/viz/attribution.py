"""Plotly builders for "Why are these similar?": tokens coloured by attribution, a bar per token, the deletion and
insertion curves of every ranking, and the measures ranked over a set of sentences.

Every builder takes plain inputs (token lists, score arrays, the library's Faithfulness and ranking tables), so it is
tested without a model or Streamlit. User text reaches plotly only through text.label(), which escapes '<', '>' and
'&'. Values too small for float32 (|x| below its smallest normal number) are drawn as 0; the CSVs keep them exact.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from torch import Tensor

from ..analysis.faithfulness import Faithfulness
from . import axes, style
from .text import label, text_px

POSITIVE, NEGATIVE = "#c92a2a", "#1864ab"  # the ends of style.DIVERGING: red supports the target, blue works against it
RANDOM_COLOUR = "#868e96"
CURVE_COLOURS = ("#e8590c", "#1c7ed6", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c", "#5c940d", "#364fc7",
                 "#a61e4d", "#087f5b", "#d9480f", "#5f3dc4", "#74b816", "#1098ad", "#e64980")
TEXT_UP_TO = 120  # tokens up to which the coloured strip prints each token in its cell
# A strip's width beside its cells (the sentence numbers, the colour bar and its labels), on a screen and presenting,
# and the share of text_px's rough width that Chromium draws a token in a cell ("because": 49 px of 56.6 at 13 px, 68
# of 78.4 at 18), both measured at 420, 1024 and 1440 px.
STRIP_SIDES_PX = (125, 175)
STRIP_TEXT_SHARE = 0.87
TINY = float(np.finfo(np.float32).tiny)  # 1.2e-38: below this a value underflows float32


def shown(values: Tensor | np.ndarray | Sequence[float]) -> np.ndarray:
    """Values as figures draw them: float64, with anything below float32's smallest normal number set to 0."""
    x = values.detach().double().cpu().numpy() if isinstance(values, Tensor) else np.asarray(values, dtype=np.float64)
    return np.where(np.abs(x) < TINY, 0.0, x)


def _check(tokens: Sequence[str], scores: np.ndarray) -> None:
    if scores.shape != (len(tokens),):
        raise ValueError(f"Expected one score per token ({len(tokens)}), got shape {scores.shape}.")


def token_strip(sentences: Sequence[tuple[str, Sequence[str], Tensor | np.ndarray]], title: str, *,
                subtitle: str = "", presentation: bool = False) -> go.Figure:
    """Each sentence's tokens in reading order, wrapped into lines, every cell coloured by its score on one diverging
    scale shared by all sentences (red supports the target, blue works against it, white is 0).

    sentences: (name, tokens, scores (T,)) each. Short sentences print each token in its cell; past TEXT_UP_TO
    tokens the cells are narrow and the token is in the hover only. layout.meta["min_px"] is the narrowest width at
    which every printed token fits its cell (a page lets a narrower screen scroll it sideways, ui.sideways).
    """
    if not sentences:
        raise ValueError("Give at least one sentence to draw.")
    rows_of = [(name, list(tokens), shown(scores)) for name, tokens, scores in sentences]
    for _, tokens, scores in rows_of:
        _check(tokens, scores)
    longest = max(len(tokens) for _, tokens, _ in rows_of)
    texts = longest <= TEXT_UP_TO
    per_line = 8 if texts else 32  # cells wide enough for a 9-character token at 1024 px with the sidebar open
    z, text, hover, ticks = [], [], [], []
    for s, (name, tokens, scores) in enumerate(rows_of):
        if s:  # a blank line between sentences
            z.append([None] * per_line)
            text.append([""] * per_line)
            hover.append([""] * per_line)
        ticks.append((len(z), name))
        for start in range(0, len(tokens), per_line):
            part = range(start, min(start + per_line, len(tokens)))
            pad = per_line - len(part)
            z.append([float(scores[i]) for i in part] + [None] * pad)
            text.append([label(tokens[i], 9) for i in part] + [""] * pad)
            hover.append([f"{label(tokens[i], 24)} ({i}): {scores[i]:+.4g}" for i in part] + [""] * pad)
    top = style.symmetric_range(np.concatenate([scores for _, _, scores in rows_of]))
    size = style.FONT_SIZE[presentation]
    cell = dict(type="heatmap", z=z, zmin=-top, zmax=top, zmid=0, colorscale=style.colorscale(style.DIVERGING),
                xgap=3, ygap=3, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
                colorbar=dict(title=style.bar_title("score"), thickness=16, len=1))
    if texts:
        cell |= dict(text=text, texttemplate="%{text}", textfont=dict(size=size - 2))
    row_px = (40 if presentation else 34) if texts else 14
    layout = style.layout(title, presentation, subtitle, height=(100 if subtitle else 70) + 30 + row_px * len(z))
    cell_px = STRIP_TEXT_SHARE * max(text_px(t, size - 2) for line in text for t in line) + 4 if texts else 0  # + gap
    layout["meta"] = {"min_px": round(per_line * cell_px + STRIP_SIDES_PX[presentation])}
    layout["xaxis"] = dict(visible=False, range=[-0.5, per_line - 0.5], fixedrange=True)
    layout["yaxis"] = dict(autorange="reversed", tickmode="array", tickvals=[t for t, _ in ticks],
                           ticktext=[label(n, 12) for _, n in ticks], showgrid=False, zeroline=False, fixedrange=True,
                           tickfont=dict(size=16 if presentation else 14))
    return style.quick([cell], layout)


def token_bars(tokens: Sequence[str], scores: Tensor | np.ndarray, title: str, *, subtitle: str = "",
               presentation: bool = False) -> go.Figure:
    """One bar per token: its score, red where it supports the target and blue where it works against it."""
    values = shown(scores)
    _check(tokens, values)
    positions = list(range(len(tokens)))
    cats = axes.categories(list(tokens), positions)
    bars = dict(type="bar", x=cats, y=values, marker=dict(color=[POSITIVE if v >= 0 else NEGATIVE for v in values]),
                hovertemplate="%{x}: %{y:+.4g}<extra></extra>")
    layout = style.layout(title, presentation, subtitle, height=380, wide=True)  # a title in lines that fit 1024 px
    layout["xaxis"] = dict(tickangle=-45, **axes.token_axis(cats, list(tokens), positions, presentation))
    layout["yaxis"] = dict(title=dict(text="score"), zeroline=True, zerolinecolor="#495057",
                           tickfont=dict(size=16 if presentation else 13))
    layout["bargap"] = 0.15
    return style.quick([bars], layout)


@functools.cache
def _side_by_side() -> dict:
    """The axes of two plots side by side that share their y axis, as plotly's make_subplots lays them out."""
    # The gap keeps the deletion plot's "100%" off the insertion plot's "0%" at 1024 px with the sidebar open (0.06
    # printed them as one "100%0%").
    grid = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.12, subplot_titles=("1", "2"))
    return grid.layout.to_plotly_json()


def faithfulness_chart(chart: Faithfulness, target: str, *, subtitle: str = "", presentation: bool = False) -> go.Figure:
    """Deletion (left) and insertion (right) curves of every ranking and the random order; each legend entry carries
    its two areas, best deletion area first. target: what the y axis measures ("cosine similarity").

    Built from plain dicts (style.quick): with make_subplots and add_trace per curve it took ~40 ms, once per new
    sentence on a class's server; tests/encoder/test_viz_attribution.py checks it against the validated build."""
    curves = sorted(chart.curves, key=lambda c: c.deletion_auc)
    size = style.FONT_SIZE[presentation]
    grid = copy.deepcopy(_side_by_side())
    # Short: centred over plots that the legend beside them leaves ~110 px apart at 1024 px with the sidebar open, the
    # titles "Deletion: words → [MASK]" and "Insertion: from all [MASK]" overprinted each other (the note under the
    # chart says how the words are replaced and brought back).
    titles = (f"Deletion → {label(chart.replacement, 12)}", "Insertion")
    for note, text in zip(grid["annotations"], titles, strict=True):  # the subplot titles
        note["text"], note["font"]["size"] = text, size - 2
    for axis, title in (("xaxis", "words removed"), ("xaxis2", "words kept")):
        grid[axis] |= dict(tickformat=".0%", range=[-0.02, 1.02], title=dict(text=title))
    grid["yaxis"]["title"] = dict(text=label(target, 40))
    data = []
    colours = iter(CURVE_COLOURS)
    for curve in curves:
        is_random = curve.key == "random"
        colour = RANDOM_COLOUR if is_random else next(colours, RANDOM_COLOUR)
        name = f"{label(curve.label, 30)} · {curve.deletion_auc:.2f} / {curve.insertion_auc:.2f}"
        x = [k / max(chart.words, 1) for k in curve.removed]
        line = dict(color=colour, width=2 if is_random else 2.5, dash="dash" if is_random else "solid")
        for col, values, what in ((1, curve.deletion, "removed"), (2, curve.insertion, "kept")):
            data.append(dict(
                type="scatter", x=x, y=shown(values), name=name, legendgroup=curve.key, showlegend=col == 1,
                mode="lines+markers", line=line, marker=dict(size=5), xaxis=f"x{col if col > 1 else ''}",
                yaxis=f"y{col if col > 1 else ''}", hovertemplate=f"{label(curve.label, 30)}: %{{x:.0%}} of the words "
                f"{what} → %{{y:.4f}}<extra></extra>"))
    # The legend beside the plots, one entry per ranking with its two areas: below them it pushed the axis titles
    # into it and scrolled. Each curve is its own legend group (one entry for its two lines); without a gap between
    # groups 13 rankings fit beside the plots instead of scrolling (10 px each: 30 px a line, now 20).
    legend = dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top", font=dict(size=15 if presentation else 13),
                  title=dict(text="area: deletion / insertion", font=dict(size=15 if presentation else 13)),
                  tracegroupgap=0)
    # Tall enough for the legend: a line of 20 px (23 presenting) per ranking and its title, beside ~180 px (~230)
    # of titles, axes and margins; 15 rankings: 505 px (590).
    height = max(560, 230 + 24 * len(curves)) if presentation else max(460, 190 + 21 * len(curves))
    fig = style.apply(style.quick(data, grid), "Which ranking predicts the model?", presentation, subtitle,
                      plot_titles=True)
    return style.quick(list(fig.data), fig.layout.to_plotly_json() | dict(height=height, legend=legend))


def ranking_chart(table: pd.DataFrame, highlight: Sequence[str] = (), *, subtitle: str = "",
                  presentation: bool = False) -> go.Figure:
    """Mean deletion AOPC per ranking over a set of sentences, with one standard deviation as an error bar; the
    random order in grey and the rankings of `highlight` (the published ordering) in a colour of their own."""
    rows = table.iloc[::-1]  # plotly draws the first category at the bottom: best on top
    names = [label(m, 30) for m in rows["measure"]]
    colours = [RANDOM_COLOUR if k == "random" else "#e8590c" if k in highlight else "#4c6ef5" for k in rows["key"]]
    bars = dict(type="bar", orientation="h", x=shown(rows["mean_aopc"]), y=names, marker=dict(color=colours),
                error_x=dict(type="data", array=shown(rows["std_aopc"]), color="#343a40", thickness=1.5),
                customdata=np.stack([shown(rows["std_aopc"]), rows["n"].to_numpy()], axis=1),
                hovertemplate="%{y}: mean AOPC %{x:.4f} ± %{customdata[0]:.4f} over %{customdata[1]} sentences"
                              "<extra></extra>")
    layout = style.layout("Mean deletion AOPC per ranking (higher: more faithful)", presentation, subtitle,
                          height=130 + 26 * len(rows), wide=True)  # a title in lines that fit 1024 px, sidebar open
    if presentation:
        layout["height"] = min(130 + 26 * len(rows), 560)  # a chart below the main one: whole once scrolled to
    size = 16 if presentation else 13
    layout["xaxis"] = dict(title=dict(text="AOPC (mean drop of the target)"), zeroline=True, tickfont=dict(size=size))
    layout["yaxis"] = dict(type="category", tickfont=dict(size=size), automargin=True)
    return style.quick([bars], layout)
