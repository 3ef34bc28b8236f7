"""Inside one head (issue 12): q_i and every k_j, q_i·k_j, ÷√d_k, softmax, the weighted sum of values, W_O.

Every number comes from the trace of one forward pass (its q, k, v, z and concat taps, its attention and attn tap);
the arithmetic shown between them is redone here in float64 so a test can check it lands on the trace's values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from torch import Tensor

from ..trace import Trace
from . import axes, style
from .text import label, text_px

TEXT_UP_TO = 40  # tokens up to which the score and weight columns print their numbers
CELL_FONT = (13, 16)  # px of the numbers printed in those columns (on a screen, on a projector)
# px of a figure's width outside its panels' paper span (margins, the query labels, the colour bars), measured at
# 388 and 540 px in Chromium; and the share of text_px's rough width that Chromium draws a number or title in
# ("31.229": 68 px of 74 at 20 px; "softmax": 66 of 78 at 18).
SIDES_PX = 165
TEXT_SHARE = 0.87
GAP = 0.03  # between panels, as a share of the paper width


@dataclass(frozen=True)
class HeadSteps:
    """One query token's path through one head, as float64 arrays (T tokens, d_k = d_head, D = d_model)."""

    layer: int
    head: int
    query: int
    tokens: list[str]
    q: np.ndarray  # (d_k,) the query vector q_i, unscaled
    k: np.ndarray  # (T, d_k) every key k_j
    v: np.ndarray  # (T, d_k) every value v_j
    scores: np.ndarray  # (T,) q_i·k_j
    scaled: np.ndarray  # (T,) q_i·k_j / √d_k
    weights: np.ndarray  # (T,) softmax of scaled over the keys in the window: row i of the attention map
    trace_row: np.ndarray  # (T,) row i of trace.attention, for comparison
    mixed: np.ndarray  # (T, d_k) a_ij v_j
    z_sum: np.ndarray  # (d_k,) Σ_j a_ij v_j
    z: np.ndarray  # (d_k,) the head's output z_i as the forward pass computed it
    concat: np.ndarray  # (D,) Concat(z_i of every head): the row W_O multiplies
    attn: np.ndarray  # (D,) the attn tap's row i: concat · W_Oᵀ + b
    radius: int = 0  # in a sliding-window layer, how far a key may be from the query (window / 2); 0 = global
    outside: np.ndarray | None = None  # (T,) bool: keys outside the window, whose scores the softmax never sees

    @property
    def d_k(self) -> int:
        return self.q.shape[0]


def head_steps(trace: Trace, layer: int, head: int, query: int) -> HeadSteps:
    """The numbers of one query token in one head, from the trace's own taps."""
    axes.check(trace, layer, head)
    if not 0 <= query < trace.seq_len:
        raise ValueError(f"query={query} is out of range; choose a token from 0 to {trace.seq_len - 1}.")
    h = trace.heads[layer]
    f64 = lambda t: t.detach().double().cpu().numpy()  # noqa: E731
    q, k, v = f64(h["q"][head, query]), f64(h["k"][head]), f64(h["v"][head])
    scores = k @ q
    scaled = scores / math.sqrt(q.shape[0])
    # A sliding-window layer masks the keys more than window/2 away with -inf before the softmax (encoder/window.py)
    radius = trace.config.layer_window(layer) // 2
    outside = np.abs(np.arange(len(scores)) - query) > radius if radius else np.zeros(len(scores), dtype=bool)
    seen = np.where(outside, -np.inf, scaled)
    e = np.exp(seen - seen.max())
    weights = e / e.sum()
    mixed = weights[:, None] * v
    return HeadSteps(layer=layer, head=head, query=query, tokens=list(trace.labels), q=q, k=k, v=v, scores=scores,
                     scaled=scaled, weights=weights, trace_row=f64(trace.attention[layer, head, query]), mixed=mixed,
                     z_sum=mixed.sum(0), z=f64(h["z"][head, query]), concat=f64(h["concat"][query]),
                     attn=f64(trace.taps[layer]["attn"][query]), radius=radius, outside=outside)


def _rows(steps: HeadSteps) -> list[str]:
    """Row labels: the tokens, made safe for plotly and numbered (repeated words stay apart)."""
    return [f"{label(t, 16)} ({j})" for j, t in enumerate(steps.tokens)]


def _m(*arrays: np.ndarray) -> float:
    return max(max(float(np.abs(a).max()) for a in arrays), 1e-6)


def _compact(z: np.ndarray) -> np.ndarray:
    """z as float32 when that loses nothing (the model's own taps, K and V: float32 read as float64), else as it is.
    Half the bytes on the page: at 512 tokens K and V are 131 KB each as float64."""
    z32 = z.astype(np.float32)
    return z32 if np.array_equal(z32, z, equal_nan=True) else z


def _grid(n: int, z: np.ndarray, rows: list[str], scale: str, zmin: float, zmax: float, hover: str,
          text: str = "", colorbar: dict | None = None, font: int = CELL_FONT[0]) -> dict:
    """A heatmap on axes pair n, as a plain dict (built without plotly.py's validation: style.quick); text: the
    format its cells print their values in ("" for none), at `font` px."""
    z2 = _compact(z if z.ndim == 2 else z[:, None])
    trace = dict(type="heatmap", z=z2, x=list(range(z2.shape[1])), y=rows, colorscale=style.colorscale(scale), zmin=zmin,
                 zmax=zmax, hovertemplate=hover, showscale=colorbar is not None, xaxis=f"x{n}", yaxis=f"y{n}")
    if colorbar is not None:
        trace["colorbar"] = colorbar
    if text:
        trace |= dict(texttemplate=f"%{{z:{text}}}", textfont=dict(size=font))
    return trace


def _min_px(columns: list[tuple[tuple[float, float], list[str], int]]) -> int:
    """The narrowest figure in which every text fits its panel: columns as (paper span, texts, font px). A title
    may spill into the gaps beside its panel; a cell's number keeps 3 px from either edge."""
    need = 0.0
    for (a, b), texts, size in columns:
        for t in texts:
            for line in t.split("<br>"):
                need = max(need, (TEXT_SHARE * text_px(line, size) + 6) / (b - a))
    return math.ceil(need + SIDES_PX)


def _printed(values: np.ndarray, text: str) -> list[str]:
    """How the cells print `values` with format `text` (NaN: an empty cell)."""
    return [format(float(v), text) for v in values.ravel() if np.isfinite(v)] if text else []


def _panel(n: int, x: tuple[float, float], y: tuple[float, float], title: str, size: int, ticks: bool = False,
           align: str = "center") -> dict:
    """Axes pair n on the paper box x × y, rows top-down, with a title above the box: centred, or from its left
    edge (align="left") or up to its right edge ("right") where the row above the others has room for a long one."""
    s = str(n) if n > 1 else ""
    at = {"left": x[0], "right": x[1]}.get(align, (x[0] + x[1]) / 2)
    return {f"xaxis{s}": dict(domain=list(x), anchor=f"y{s}", showticklabels=False, showgrid=False, zeroline=False),
            f"yaxis{s}": dict(domain=list(y), anchor=f"x{s}", type="category", autorange="reversed", showgrid=False,
                              showticklabels=ticks, zeroline=False),
            "_title": style.paper_note(title, at, y[1], size, xanchor=align, yanchor="bottom")}


def _figure(data: list[dict], panels: list[dict], title: str, subtitle: str, height: int, presentation: bool,
            min_px: int, shapes: list[dict] | None = None) -> go.Figure:
    """The panels in one figure; layout.meta["min_px"] is the narrowest width at which every number and panel title
    fits (a page lets a narrower screen scroll it sideways, ui.sideways)."""
    # Title and subtitle in lines that fit min_px too: presenting with the sidebar open, the column is about that.
    layout = style.layout(title, presentation, subtitle, height, wide=True, wrap_px=min(
        style.WIDE_TITLE_PX[presentation], min_px))
    layout["meta"] = {"min_px": min_px}
    # Not capped at the projector height like a page's main figure: these sit below the head view, are scrolled to,
    # and need a text-sized row per token (squeezed, their numbers overprint). The panels' own titles sit in the
    # top 30 px of the plot area, below the wrapped title and subtitle.
    lines = max(p["_title"]["text"].count("<br>") for p in panels)  # a two-line panel title: room for its first line
    top = max(130, layout["margin"]["t"] + 30) + lines * (layout["font"]["size"] + 4)
    layout["height"] = height + top - 130  # the plot area stays height - 160 px, as _heights laid the panels out
    layout["margin"] = dict(l=10, r=10, t=top, b=30)
    notes = []
    for p in panels:
        notes.append(p.pop("_title"))
        layout |= p
    layout["annotations"] = notes
    if shapes:
        layout["shapes"] = shapes
    for trace in data:  # the axes names as plotly wants them: x, x2, x3...
        trace["xaxis"], trace["yaxis"] = (trace["xaxis"].replace("x1", "x"), trace["yaxis"].replace("y1", "y"))
    return style.quick(data, layout)


def _split(fractions: list[float], gap: float, start: float = 0.0, end: float = 1.0) -> list[tuple[float, float]]:
    """Consecutive [a, b] spans of [start, end] in these proportions with `gap` between them."""
    total = end - start - gap * (len(fractions) - 1)
    spans, at = [], start
    for f in fractions:
        spans.append((at, at + total * f / sum(fractions)))
        at += total * f / sum(fractions) + gap
    return spans


def _heights(T: int) -> tuple[int, tuple[float, float], tuple[float, float]]:
    """Figure height and the paper spans of the one-row strip (top) and the token rows (below)."""
    height = min(1100, max(440, 24 * T + 260))
    strip = 34 / (height - 160)
    return height, (1 - strip, 1.0), (0.0, 1 - strip - 80 / (height - 160))


def scores_figure(steps: HeadSteps, *, presentation: bool = False) -> go.Figure:
    """q_i over every k_j, then q_i·k_j, ÷√d_k and the softmax: row i of the attention map."""
    T, dk, i = len(steps.tokens), steps.d_k, steps.query
    rows, tok, root = _rows(steps), label(steps.tokens[i], 24), math.sqrt(dk)
    size, printed, font = (18 if presentation else 14), T <= TEXT_UP_TO, CELL_FONT[presentation]
    height, top, body = _heights(T)
    # the number columns as wide as a projector needs for "-13.69" and "softmax"; K's d_k colours take the rest
    x = _split([0.34, 0.22, 0.22, 0.22], GAP, 0.1, 0.93)
    m, s = _m(steps.q, steps.k), _m(steps.scores)
    bar = dict(title=style.bar_title("q, k"), thickness=14, len=0.5, y=0.5)
    masked = steps.outside is not None and bool(steps.outside.any())
    # Keys outside a sliding window: their scaled score is -inf for the softmax, drawn as an empty cell
    scaled = np.where(steps.outside, np.nan, steps.scaled) if masked else steps.scaled
    # Scores to 2 decimals, weights to 3 (the hover has 4 and 6): the columns stay narrow enough for a projector.
    texts = [".2f", ".2f", ".3f"] if printed else ["", "", ""]
    data = [
        _grid(1, steps.q[None, :], [f"q ({i})"], style.DIVERGING, -m, m, "q_i dim %{x}: %{z:.4f}<extra></extra>", colorbar=bar),
        _grid(2, steps.k, rows, style.DIVERGING, -m, m, "k of %{y}, dim %{x}: %{z:.4f}<extra></extra>"),
        _grid(3, steps.scores, rows, style.DIVERGING, -s, s, "q_i·k of %{y} = %{z:.4f}<extra></extra>", texts[0],
              font=font),
        _grid(4, scaled, rows, style.DIVERGING, -s / root, s / root, f"q_i·k of %{{y}} / √{dk} = %{{z:.4f}}<extra></extra>",
              texts[1], font=font),
        _grid(5, steps.weights, rows, style.ATTENTION_SCALE, 0, 1, f"“{tok}” → %{{y}}: %{{z:.6f}}<extra></extra>",
              texts[2], font=font),
    ]
    titles = [f"q_i for “{tok}” ({i})<br>1 × d_k = 1 × {dk}", f"K: {T} × {dk}", "q·k",
              f"÷ √{dk}" + (", −∞" if masked else ""), "softmax"]
    panels = [
        _panel(1, x[0], top, titles[0], size, align="left"),  # over the empty room right of q_i's strip too
        _panel(2, x[0], body, titles[1], size, ticks=True),
        _panel(3, x[1], body, titles[2], size),
        _panel(4, x[2], body, titles[3], size),
        _panel(5, x[3], body, titles[4], size),
    ]
    wide = [(a - GAP, b + GAP) for a, b in x]  # a title may spill into the gaps beside its panel
    min_px = _min_px([((x[0][0], x[3][1]), titles[:1], size), (wide[0], titles[1:2], size),
                      (wide[1], titles[2:3], size), (wide[2], titles[3:4], size),
                      (wide[3], titles[4:], size)]
                     + [(x[n + 1], _printed(z, f), font) for n, (z, f) in enumerate(zip(
                         [steps.scores, scaled, steps.weights], texts, strict=True))])
    sub = (f"Layer {steps.layer}, head {steps.head}. Each key's score is q_i·k_j; dividing by √d_k keeps the "
           "softmax from saturating; the softmax turns the scores into weights that sum to 1.")
    if masked:
        sub = (f"Layer {steps.layer}, head {steps.head}: a sliding window. Only the keys at most {steps.radius} "
               "positions away count: the others' scores become −∞ (empty cells), so the softmax gives them 0 and "
               "the weights in the window sum to 1.")
    return _figure(data, panels, f"How “{tok}” decides where to look", sub, height, presentation, min_px)


def values_figure(steps: HeadSteps, *, presentation: bool = False) -> go.Figure:
    """The weights times every v_j, summed over the keys: the head's output z_i."""
    T, dk, i = len(steps.tokens), steps.d_k, steps.query
    rows, tok = _rows(steps), label(steps.tokens[i], 24)
    size, font = (18 if presentation else 14), CELL_FONT[presentation]
    text = ".3f" if T <= TEXT_UP_TO else ""
    height, top, body = _heights(T)
    x = _split([0.18, 0.41, 0.41], GAP, 0.1, 0.93)
    m, mz = _m(steps.v), _m(steps.mixed, steps.z_sum)  # the sum gets its own scale: it is far smaller than v
    bar = dict(title=style.bar_title("v"), thickness=14, len=0.45, y=0.25)
    zbar = dict(title=style.bar_title("a·v, z"), thickness=14, len=0.45, y=0.75)
    data = [
        _grid(1, steps.z_sum[None, :], [f"z ({i})"], style.DIVERGING, -mz, mz, "z_i dim %{x}: %{z:.4f}<extra></extra>",
              colorbar=zbar),
        _grid(2, steps.weights, rows, style.ATTENTION_SCALE, 0, 1, "a to %{y}: %{z:.4f}<extra></extra>", text,
              font=font),
        _grid(3, steps.v, rows, style.DIVERGING, -m, m, "v of %{y}, dim %{x}: %{z:.4f}<extra></extra>", colorbar=bar),
        _grid(4, steps.mixed, rows, style.DIVERGING, -mz, mz, "a·v of %{y}, dim %{x}: %{z:.4f}<extra></extra>"),
    ]
    titles = [f"z_i = Σ_j a_ij v_j<br>1 × d_k = 1 × {dk}", "a_ij", f"V: {T} × {dk}", "a_ij·v_j"]
    panels = [
        _panel(1, x[2], top, titles[0], size, align="right"),  # over the empty room left of z_i's strip too
        _panel(2, x[0], body, titles[1], size, ticks=True),
        _panel(3, x[1], body, titles[2], size),
        _panel(4, x[2], body, titles[3], size),
    ]
    wide = [(a - GAP, b + GAP) for a, b in x]
    min_px = _min_px([((x[0][0], x[2][1]), titles[:1], size), (wide[2], titles[3:], size), (wide[0], titles[1:2], size),
                      (wide[1], titles[2:3], size), (x[0], _printed(steps.weights, text), font)])
    sub = (f"Layer {steps.layer}, head {steps.head}, query “{tok}”. Each value row is scaled by its weight; the "
           "columns of the scaled rows sum to the head's output.")
    return _figure(data, panels, "The weighted sum of the values", sub, height, presentation, min_px)


def output_figure(steps: HeadSteps, num_heads: int, w_o: Tensor | None = None, *,
                  presentation: bool = False) -> go.Figure:
    """Concat of every head's z_i, this head's share through W_O, and the attn tap row (1 × d_model each)."""
    D, dk, h, i = steps.concat.shape[0], steps.d_k, steps.head, steps.query
    tok, size = label(steps.tokens[i], 24), (18 if presentation else 14)
    a, b = h * dk, (h + 1) * dk
    # Short titles (they fit a projector's column with the sidebar open); the shapes are in the subtitle.
    strips = [(steps.concat, f"Concat(z_i of heads 0…{num_heads - 1}): 1 × {D}")]
    if w_o is not None:
        share = w_o.detach().double().cpu().numpy()[:, a:b] @ steps.z  # (D,)
        strips.append((share, f"head {h}'s share: z_i · W_O[:, {a}:{b}]ᵀ"))
    strips.append((steps.attn, f"attn tap = Concat · W_Oᵀ + b: 1 × {D}"))
    m = _m(*(z for z, _ in strips))
    ys = _split([1] * len(strips), 0.75 / len(strips), 0.1, 1.0)[::-1]
    data, panels = [], []
    for n, ((z, title), y) in enumerate(zip(strips, ys, strict=True), start=1):
        bar = dict(thickness=14, len=0.8) if n == 1 else None
        data.append(_grid(n, z[None, :], [""], style.DIVERGING, -m, m, "dim %{x}: %{z:.4f}<extra></extra>", colorbar=bar))
        panels.append(_panel(n, (0.0, 0.93), y, title, size))
    last = "xaxis" + (str(len(strips)) if len(strips) > 1 else "")
    panels[-1][last] |= dict(showticklabels=True, title=dict(text="dimension"))
    height = 110 * len(strips) + 220
    layout_shape = dict(type="rect", x0=a - 0.5, x1=b - 0.5, y0=-0.5, y1=0.5, xref="x", yref="y",
                        line=dict(color="#212529", width=3))
    sub = (f"Layer {steps.layer}, query “{tok}”. The heads' outputs side by side, 1 × d_model = 1 × {D}; head {h} is "
           f"columns {a}–{b - 1} (outlined). W_O ({D} × {D}) mixes them into the attn tap.")
    min_px = _min_px([((-GAP, 0.93 + GAP), [t for _, t in strips], size)])
    return _figure(data, panels, "Concatenate the heads, then W_O", sub, height, presentation, min_px, [layout_shape])
