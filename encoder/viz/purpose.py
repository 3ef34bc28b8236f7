"""Plotly builders for what the encoder is for (issue 13): sentence similarity, token trajectories, knock-outs, rollout.

Every builder takes plain inputs (tensors, lists of labels, numbers), so it is tested without a model or Streamlit.
User text reaches plotly only through text.label(), which escapes '<', '>' and '&'.
"""

from __future__ import annotations

import html
import os
import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from . import axes, labels, style
from .activations import tensor_heatmap
from .text import label, printable

HIGHLIGHT_COLOURS = ("#e8590c", "#1c7ed6", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c", "#5c940d")
OTHER_COLOUR = "#adb5bd"
MAX_PATH_LABELS = 40  # above this many tokens only the highlighted paths carry their token as text
PRESENT_TALL = 520  # px: the trajectories figure presenting, under the token box, whole on a 720 px screen
MIN_PLOT_WIDTH = 480  # px: the narrowest trajectories plot whose labels are placed clear of each other (a projector's)


def _matrix(x: Tensor | np.ndarray) -> np.ndarray:
    return (x.detach().double().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x, dtype=np.float64))


SHOWN_PREFIX = 24  # characters of a label's first line and a half: a longer start shared with another sentence hides
# where the two differ


def distinct_part(words: list[str], others: list[list[str]]) -> list[str]:
    """A sentence's words from two before where it parts from the sentence sharing the longest start with it, when
    that start is longer than a label shows ("… was too tired." and "… was too wide."), else all of them."""
    # a repeat keeps its number only
    n = max((len(os.path.commonprefix([words, other])) for other in others if other != words), default=0)
    if len(" ".join(words[:n])) <= SHOWN_PREFIX or n >= len(words):
        return words
    return ["…", *words[max(0, n - 2):]]


def sentence_labels(sentences: list[str], limit: int = 40, line: int = 20) -> list[str]:
    """Short, unique, markup-safe axis labels: "1 · A man is playing<br>guitar." (numbered, so repeats stay apart),
    at most two lines of `line` characters: half as wide as one line, so the cells keep room for their numbers on a
    420 px phone. Sentences that start alike for longer than that show where they differ (distinct_part)."""
    wrap = textwrap.TextWrapper(line, max_lines=2, placeholder=" …").wrap
    split = [s.split() for s in sentences]
    parts = [distinct_part(w, split[:i] + split[i + 1:]) for i, w in enumerate(split)]
    return ["<br>".join(html.escape(part, quote=False)
                        for part in wrap(f"{i} · {printable(' '.join(w) or '(blank)', limit)}"))
            for i, w in enumerate(parts, 1)]


def similarity_heatmap(sim: Tensor | np.ndarray, sentences: list[str], *, title: str = "Cosine similarity of the "
                       "sentence vectors", subtitle: str = "", presentation: bool = False) -> go.Figure:
    """An (n, n) cosine-similarity matrix of n sentences, colours fixed to [-1, 1], each cell printed."""
    z = _matrix(sim)
    if z.ndim != 2 or z.shape[0] != z.shape[1] or z.shape[0] != len(sentences):
        raise ValueError(f"Expected an (n, n) matrix for {len(sentences)} sentences, got {z.shape}.")
    names = sentence_labels(sentences)
    size = style.FONT_SIZE[presentation]
    cell = dict(
        type="heatmap", z=z.astype(np.float32), x=names, y=names, zmin=-1, zmax=1, zmid=0,
        colorscale=style.colorscale(style.DIVERGING), xgap=2, ygap=2, text=[[f"{v:.2f}" for v in row] for row in z],
        texttemplate="%{text}", textfont=dict(size=size if len(names) <= 6 else size - 3),
        colorbar=dict(title=style.bar_title("cosine"), thickness=18),
        hovertemplate="%{y}<br>%{x}<br>cosine %{z:.4f}<extra></extra>",
    )
    layout = style.layout(title, presentation, subtitle, height=160 + 70 * max(len(names), 3))
    axis = dict(type="category", tickfont=dict(size=size - 2))
    # The rows carry the sentences; the columns only their numbers, so nothing is printed twice at an angle. The map
    # fills the plot area (cells need not be square), so the colour bar is exactly as tall as the map.
    layout["xaxis"] = dict(axis, side="top", tickmode="array", tickvals=names,
                           ticktext=[str(i) for i in range(1, len(names) + 1)])
    layout["yaxis"] = dict(axis, autorange="reversed")
    return style.quick([cell], layout)


def sentence_vectors(vectors: Tensor, sentences: list[str], title: str, *, presentation: bool = False) -> go.Figure:
    """Each sentence's vector as one row of colours: activations.tensor_heatmap with one row per sentence, numbered."""
    if vectors.ndim != 2 or vectors.shape[0] != len(sentences):
        raise ValueError(f"Expected one vector per sentence, got {tuple(vectors.shape)} for {len(sentences)} sentences.")
    return tensor_heatmap(vectors, [f"{i}" for i in range(1, len(sentences) + 1)], title, presentation=presentation)


def trajectories(points: Tensor | np.ndarray, tokens: list[str], highlight: Sequence[int] = (),
                 explained: tuple[float, float] | list[float] | None = None, *, subtitle: str = "",
                 presentation: bool = False) -> go.Figure:
    """Each token's path through the layers in 2-D: points (depth, seq, 2), depth 0 = after the embeddings.

    Highlighted positions are drawn thick, in highlight_colour(i) for the i-th, labelled at both ends; the others
    share one thin grey trace (one legend entry hides them all), labelled at their end when there are few. Labels are
    annotations placed by labels.place, so none overprints another; the axes span the points (one unit as long on
    both, the plot narrowing instead). The axes say how much variance each component keeps when `explained` is given.
    """
    p = _matrix(points)
    if p.ndim != 3 or p.shape[2] != 2 or p.shape[1] != len(tokens):
        raise ValueError(f"Expected (depth, {len(tokens)}, 2) points, got {p.shape}.")
    depth = p.shape[0]
    steps = ["emb"] + [f"L{i}" for i in range(depth - 1)]  # depth i > 0 is the output of layer i - 1
    size = style.FONT_SIZE[presentation]
    names = [f"{label(tok, 16)} ({pos})" for pos, tok in enumerate(tokens)]
    chosen = list(dict.fromkeys(highlight))
    others = [pos for pos in range(len(tokens)) if pos not in chosen]
    data = []
    if others:  # one trace, paths separated by gaps: cheap to draw even at 512 tokens
        gap = [None]
        xs = [v for pos in others for v in [*p[:, pos, 0], *gap]]
        ys = [v for pos in others for v in [*p[:, pos, 1], *gap]]
        hover = [h for pos in others for h in [*[f"{names[pos]}, {s}" for s in steps], ""]]
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines+markers", name="other tokens",
                         line=dict(color=OTHER_COLOUR, width=1.5), marker=dict(size=5, color=OTHER_COLOUR),
                         hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", connectgaps=False))
    grow = np.linspace(6, 16 if presentation else 14, depth)  # markers grow with depth: the path's direction
    for i, pos in enumerate(chosen):  # drawn last, on top of the grey paths
        colour = highlight_colour(i)
        data.append(dict(type="scatter", x=p[:, pos, 0], y=p[:, pos, 1], mode="lines+markers", name=names[pos],
                         line=dict(color=colour, width=4), marker=dict(size=grow, color=colour),
                         hovertext=[f"{names[pos]}, {s}" for s in steps], hovertemplate="%{hovertext}<extra></extra>"))
    shares = list(explained) if explained is not None else None
    pcs = [f"PC{i + 1}" + (f" ({shares[i]:.0%} of the variance)" if shares else "") for i in range(2)]
    title = f"Token trajectories through {depth - 1} layers"  # the axes say it is a 2-D projection (PC1, PC2)
    # Presenting, one unit as long on both axes makes the height the plot's measure: the page leaves the sentence to the
    # presentation bar and folds the token box's label away, so the figure may be PRESENT_TALL (whole at 1280 x 720).
    layout = style.layout(title, presentation, subtitle, height=700, tallest=PRESENT_TALL)
    ticks = dict(tickfont=dict(size=size - 4)) if presentation else {}  # plotly's default is ~0.7 of the font size
    xrange, yrange = _fitted(p[..., 0]), _fitted(p[..., 1])
    # constrain="domain": one unit as long on both axes by narrowing the plot, never by widening a range
    layout["xaxis"] = dict(title=dict(text=pcs[0]), zeroline=False, range=list(xrange), constrain="domain", **ticks)
    layout["yaxis"] = dict(title=dict(text=pcs[1]), zeroline=False, scaleanchor="x", scaleratio=1, range=list(yrange),
                           constrain="domain", **ticks)
    if presentation:  # a short figure: a legend below the plot would overprint the x-axis title, so it goes beside
        layout["legend"] = dict(orientation="v", yanchor="top", y=1, xanchor="left", x=1.02, font=dict(size=size - 2))
    else:
        layout["legend"] = dict(orientation="h", yanchor="top", y=-0.12, x=0, font=dict(size=size - 2))
        layout["margin"]["b"] = 90
    layout["annotations"] = _path_labels(p, tokens, chosen, others, steps, layout, xrange, yrange, size, grow)
    return style.quick(data, layout)


def _fitted(v: np.ndarray) -> tuple[float, float]:
    """An axis range around values: their span and 6 % more each side (a constant's: 1 each side)."""
    lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
    pad = 0.06 * (hi - lo) if hi > lo else 1.0
    return lo - pad, hi + pad


def _path_labels(p: np.ndarray, tokens: list[str], chosen: list[int], others: list[int], steps: list[str],
                 layout: dict, xrange: tuple[float, float], yrange: tuple[float, float], size: int,
                 grow: np.ndarray) -> list[dict]:
    """Annotations naming the paths' ends, none over another: the highlighted paths' last point ("it (L5)"), then
    their first ("emb"), then the grey paths' last (when there are at most MAX_PATH_LABELS tokens)."""
    wanted: list[tuple[labels.Label, str]] = []
    for i, pos in enumerate(chosen):
        wanted.append((labels.Label(float(p[-1, pos, 0]), float(p[-1, pos, 1]),
                                    text=f"{printable(tokens[pos], 16)} ({steps[-1]})", size=size,
                                    marker=float(grow[-1]) / 2), highlight_colour(i)))
    for i, pos in enumerate(chosen):
        wanted.append((labels.Label(float(p[0, pos, 0]), float(p[0, pos, 1]), text="emb", size=size - 2,
                                    marker=float(grow[0]) / 2), highlight_colour(i)))
    if len(tokens) <= MAX_PATH_LABELS:
        wanted += [(labels.Label(float(p[-1, pos, 0]), float(p[-1, pos, 1]), text=printable(tokens[pos], 16),
                                 size=size - 4), "#868e96") for pos in others]
    # The plot's height is the figure's less its margins and the x axis's ticks and title (its width follows the
    # screen: at least MIN_PLOT_WIDTH); one unit is as long on both axes, so the scale is the smaller ratio.
    tall = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    spans = (xrange[1] - xrange[0], yrange[1] - yrange[0])
    scales = (min(MIN_PLOT_WIDTH / spans[0], (tall - 3 * size - 24) / spans[1]), tall / spans[1])
    out = []
    # The highlighted paths' markers stay visible: "emb" covered its own path's first points at 1024 px presenting.
    markers = [(float(p[d, pos, 0]), float(p[d, pos, 1]), float(grow[d]) / 2) for pos in chosen for d in range(len(grow))]
    for placed in labels.place([w for w, _ in wanted], xrange, yrange, scales, markers):
        lab, colour = wanted[placed.index]
        out.append(dict(x=lab.x, y=lab.y, xref="x", yref="y", text=html.escape(lab.text, quote=False),
                        showarrow=False, xanchor=placed.xanchor, yanchor=placed.yanchor, xshift=placed.xshift,
                        yshift=placed.yshift, font=dict(size=lab.size, color=colour)))
    return out


def highlight_colour(i: int) -> str:
    """The colour of the i-th highlighted token, the same in every figure."""
    return HIGHLIGHT_COLOURS[i % len(HIGHLIGHT_COLOURS)]


def depth_similarity(cosines: dict[str, list[float] | Tensor], token: str, colours: list[str] | None = None, *,
                     presentation: bool = False) -> go.Figure:
    """Cosine similarity of one token's vector to others' at each depth (0 = embeddings), one line per other token."""
    fig = go.Figure()
    depth = 0
    for i, (name, values) in enumerate(cosines.items()):
        y = _matrix(values).reshape(-1)
        depth = max(depth, len(y))
        colour = colours[i] if colours else highlight_colour(i + 1)
        fig.add_trace(go.Scatter(x=list(range(len(y))), y=y, name=label(name, 24), mode="lines+markers",
                                 line=dict(width=3, color=colour), marker=dict(size=9),
                                 hovertemplate="depth %{x}: cosine %{y:.3f}<extra>%{fullData.name}</extra>"))
    fig.update_xaxes(title="after the embeddings (emb) and each layer (L0, …)", tickmode="array",
                     tickvals=list(range(depth)), ticktext=["emb"] + [f"L{i}" for i in range(depth - 1)])
    fig.update_yaxes(title="cosine similarity", range=[-1.05, 1.05], zeroline=True)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), showlegend=True)
    return style.apply(fig, f"How similar '{label(token, 16)}' is to other tokens, layer by layer", presentation, height=460,
                       legend_above=True, wide=True)


def output_change(intact: Tensor, knocked: Tensor, tokens: list[str]) -> pd.DataFrame:
    """Per token: ‖knocked − intact‖ / ‖intact‖ and the cosine between the two final vectors (both (seq, d_model))."""
    if intact.shape != knocked.shape or intact.ndim != 2 or intact.shape[0] != len(tokens):
        raise ValueError(f"Expected two (seq, d_model) outputs for {len(tokens)} tokens, got {tuple(intact.shape)} "
                         f"and {tuple(knocked.shape)}.")
    a, b = intact.detach().double().cpu(), knocked.detach().double().cpu()
    norm_a, norm_b = a.norm(dim=-1), b.norm(dim=-1)
    rel = (b - a).norm(dim=-1) / norm_a.clamp_min(1e-12)
    cos = (a * b).sum(-1) / (norm_a * norm_b).clamp_min(1e-12)
    return pd.DataFrame({"position": range(len(tokens)), "token": list(tokens), "relative_change": rel.numpy(),
                         "cosine_to_intact": cos.numpy()})


def token_change(change: pd.DataFrame, knocked_out: bool, *, presentation: bool = False) -> go.Figure:
    """Bars of each token's relative change (output_change's table); the hover adds the cosine to the intact vector.
    knocked_out: whether anything is; when not, the subtitle says so (in the title it was cut at 1024 px presenting)."""
    pos = change["position"].tolist()
    tokens = change["token"].tolist()
    cats = axes.categories(tokens, pos)
    fig = go.Figure(go.Bar(x=cats, y=change["relative_change"], marker_color="#e8590c",
                           customdata=change["cosine_to_intact"],
                           hovertemplate="%{x}: changed by %{y:.1%} (cosine to intact %{customdata:.4f})<extra></extra>"))
    fig.update_xaxes(title="token", tickangle=-45, **axes.token_axis(cats, tokens, pos, presentation))
    fig.update_yaxes(title="‖knocked − intact‖ / ‖intact‖", tickformat=".0%", rangemode="tozero")
    return style.apply(fig, "Change of each token's output vector", presentation,
                       "" if knocked_out else "nothing knocked out: every bar is 0", height=460)


def attention_change(intact: Tensor, knocked: Tensor, knocked_layers: set[int] | frozenset[int] = frozenset(), *,
                     presentation: bool = False) -> go.Figure:
    """Largest |Δ attention weight| per layer (over heads, queries and keys) between two (L, H, T, T) stacks."""
    if intact.shape != knocked.shape or intact.ndim != 4:
        raise ValueError(f"Expected two (layers, heads, seq, seq) stacks, got {tuple(intact.shape)} and {tuple(knocked.shape)}.")
    delta = (knocked.detach().double() - intact.detach().double()).abs().flatten(1).amax(1).cpu().numpy()  # (L,)
    layers = list(range(len(delta)))
    colours = ["#c92a2a" if i in knocked_layers else "#4c6ef5" for i in layers]
    fig = go.Figure(go.Bar(x=layers, y=delta, marker_color=colours,
                           hovertemplate="layer %{x}: largest change %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title="layer", tickmode="array", tickvals=layers,
                     ticktext=[f"{i} (knocked out)" if i in knocked_layers else str(i) for i in layers])
    fig.update_yaxes(title="max |Δ attention weight|", rangemode="tozero")
    return style.apply(fig, "How much each layer's attention moved", presentation, height=420)


def rollout_heatmap(matrix: Tensor, tokens: list[str], layer: int, hide_special: bool = False, *,
                    special: Sequence[int] = (), special_names: str = "special tokens", subtitle: str = "",
                    presentation: bool = False, title: str = "", rows: str = "") -> go.Figure:
    """Attention rollout up to `layer` (Abnar & Zuidema 2020): a (T, T) matrix, rows = output positions, columns =
    input tokens, colours from 0 to the largest value (rollout rows sum to 1 but spread thin).

    hide_special leaves out the positions `special` (Trace.special_positions), named `special_names` in the title.
    title and rows: another (T, T) share map drawn the same way (a measure of ui/measures.py), its title and y axis.
    """
    w = _matrix(matrix)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] != len(tokens):
        raise ValueError(f"Expected a (T, T) rollout for {len(tokens)} tokens, got {w.shape}.")
    pos = axes.kept(tokens, hide_special, special)
    if len(pos) < len(tokens):
        w = w[np.ix_(pos, pos)]
    cats = axes.categories(tokens, pos)
    gap = 1 if len(pos) <= 40 else 0
    top = float(np.nanmax(w)) if w.size and np.isfinite(w).any() else 1.0
    heatmap = dict(type="heatmap", z=w.astype(np.float32), x=cats, y=cats, zmin=0, zmax=max(top, 1e-6),
                   colorscale=style.colorscale(style.ATTENTION_SCALE), xgap=gap, ygap=gap,
                   colorbar=dict(title=style.bar_title("share"), thickness=18, len=1),
                   hovertemplate="%{y} ← %{x}: %{z:.3f}<extra></extra>")
    note = "" if len(pos) == len(tokens) else f" ({label(special_names, 30)} hidden)"
    layout = style.layout(f"{title or f'Attention rollout through layers 0–{layer}'}{note}", presentation, subtitle,
                          height=720)
    axis = axes.token_axis(cats, tokens, pos, presentation)
    # The map fills the plot area (as attention.attention_heatmap), so the colour bar is exactly as tall as the map.
    layout["xaxis"] = dict(title=dict(text="input token"), tickangle=-45, **axis)
    layout["yaxis"] = dict(title=dict(text=rows or f"position after layer {layer}"), autorange="reversed", **axis)
    layout["margin"] |= axes.heatmap_margins(axis.get("ticktext", []), axis.get("tickfont", {}).get("size", 0),
                                             layout["font"]["size"])
    return style.quick([heatmap], layout)
