"""Token axes and the geometry of maps over a sentence's tokens, shared by the attention, activation, similarity and
purpose figures: which positions to show, block averaging past MAX_CELLS, tick labels that never overprint, map
heights and margins; and the check that a layer, head or tap exists in a trace.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from ..model import TAPS
from ..trace import Trace
from . import style
from .text import label, text_px

MAX_CELLS = 512  # rows or columns of a heatmap beyond which values are block-averaged
TICK_MARGIN = 160  # px of a map's height taken by the key labels below it and the axis title
TICK_SPACING = 1.4  # token labels along a map's side are at least this many label heights apart
MARGIN_SPARE = 40  # px a map leaves below its x-axis title (heatmap_margins): plotly seldom has to widen it
MAP_TOP = 70  # px above a map with a title (and no subtitle or plot titles)


def check(trace: Trace, layer: int, head: int | None = None, tap: str | None = None) -> None:
    """ValueError naming the valid range when a layer, head or tap is out of range."""
    if not 0 <= layer < trace.num_layers:
        raise ValueError(f"layer={layer} is out of range; choose a layer from 0 to {trace.num_layers - 1}.")
    if head is not None and not 0 <= head < trace.num_heads:
        raise ValueError(f"head={head} is out of range; choose a head from 0 to {trace.num_heads - 1}.")
    if tap is not None and tap not in TAPS:
        raise ValueError(f"tap={tap!r} is unknown; choose one of {', '.join(TAPS)}.")


def kept(tokens: Sequence[str], hide_special: bool, special: Collection[int] = ()) -> list[int]:
    """Positions to show: all, or all but the `special` ones (Trace.special_positions: [CLS]/[SEP], <s>/</s>...);
    all again if nothing else is left."""
    keep = [i for i in range(len(tokens)) if not (hide_special and i in special)]
    return keep or list(range(len(tokens)))


def special_names(specials: Sequence[str], joint: str = " / ") -> str:
    """The model's special tokens for a sentence, e.g. "[CLS] / [SEP]" or "<s> / </s>"; "special tokens" if none."""
    return joint.join(specials) if specials else "special tokens"


def bounds(n: int, k: int) -> np.ndarray:
    """k + 1 block boundaries splitting range(n) into k nearly equal blocks."""
    return np.linspace(0, n, k + 1).round().astype(int)


def block_mean(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Block-average a 2-D array down to at most rows x cols."""
    for axis, k in ((0, rows), (1, cols)):
        n = x.shape[axis]
        if n > k:
            b = bounds(n, k)
            sizes = np.diff(b).reshape((-1, 1) if axis == 0 else (1, -1))
            x = np.add.reduceat(x.astype(np.float64), b[:-1], axis=axis) / sizes
    return x


def categories(tokens: list[str], positions: list[int], k: int = MAX_CELLS) -> list[str]:
    """Unique axis values "token (position)", so repeated tokens stay distinct; one per block above k positions."""
    if len(positions) <= k:
        return [f"{label(tokens[p])} ({p})" for p in positions]
    b = bounds(len(positions), k)
    return [
        f"{label(tokens[positions[lo]], 12)} … {label(tokens[positions[hi - 1]], 12)} "
        f"({positions[lo]}–{positions[hi - 1]})"
        for lo, hi in zip(b[:-1], b[1:], strict=True)
    ]


def token_axis(cats: list[str], tokens: list[str], positions: list[int], presentation: bool,
               max_ticks: int = 48, size: int | None = None) -> dict:
    """Category axis whose ticks show just the tokens (every k-th above max_ticks; none for blocks)."""
    if len(cats) != len(positions):
        return dict(type="category", showticklabels=False)
    step = max(1, math.ceil(len(cats) / max(max_ticks, 1)))
    if size is None:
        size = (18 if presentation else 14) if len(cats) <= 24 else (style.MIN_PRESENT_FONT if presentation else 11)
    return dict(type="category", tickmode="array", tickvals=cats[::step],
                ticktext=[label(tokens[p], 16) for p in positions[::step]], tickfont=dict(size=size))


def map_height(n: int, presentation: bool, top: int = 0, tallest: int = style.PRESENT_HEIGHT, *,
               bottom: int = TICK_MARGIN, spacing: float = TICK_SPACING) -> int:
    """Height of a token-by-token map: grows with the tokens up to what a 900 px laptop shows. On a projector,
    style.PRESENT_HEIGHT, or taller up to `tallest` where that gives every token its label at the minimum size
    (map_axis, with the same `top`, `bottom` and `spacing`): at 420 px a pair of 16-token maps named every third
    row. A map below a page's first screen may take up to style.PRESENT_TALLEST, whole once scrolled to."""
    if not presentation:
        return min(max(28 * n + 330, 480), 720)
    return max(style.PRESENT_HEIGHT, min(named_height(n, top, bottom, spacing), tallest))


def named_height(n: int, top: int, bottom: int = TICK_MARGIN, spacing: float = TICK_SPACING) -> int:
    """The least height of a map on a projector whose n rows are each named at the minimum label size."""
    return top + bottom + math.ceil(spacing * style.MIN_PRESENT_FONT * n)


def _tick_room(height: int, top: int, tick_size: int, bottom: int, spacing: float) -> int:
    """How many token labels fit along a map's height without overprinting (one per `spacing` label heights)."""
    return max(4, int((height - top - bottom) / (spacing * tick_size)))


def map_axis(cats: list[str], tokens: list[str], positions: list[int], presentation: bool, height: int,
             top: int, *, bottom: int = TICK_MARGIN, spacing: float = TICK_SPACING) -> dict:
    """Token axis of a square map: the largest label size (18 px, else the 14 px minimum on a projector) at which
    every token gets a label, else every k-th token at the minimum size. `top` and `bottom`: the px of the figure's
    height above and below the map."""
    sizes = (18, style.MIN_PRESENT_FONT) if presentation else (14, 11)
    size = next((s for s in sizes if len(cats) <= _tick_room(height, top, s, bottom, spacing)), sizes[-1])
    return token_axis(cats, tokens, positions, presentation, _tick_room(height, top, size, bottom, spacing), size)


def key_axis(axis: dict, cats: list[str], tokens: list[str], positions: list[int]) -> dict:
    """The key (x) axis of a square map whose query axis is map_axis's `axis`: its width is the browser's to know, so
    plotly picks every k-th key there (labels at least 1.2 label sizes apart) and labelalias names each by its token
    alone, as the query axis does. A map of blocks keeps the query axis's (no labels)."""
    if "tickvals" not in axis:
        return axis
    names = {c: label(tokens[p], 16) for c, p in zip(cats, positions, strict=True)}
    return dict(type="category", tickmode="auto", labelalias=names, tickfont=axis["tickfont"])


def heatmap_margins(ticktext: list[str], tick_size: int, size: int, bar: str = "weight",
                    spare: int = MARGIN_SPARE) -> dict:
    """Left, bottom and right margins that already fit the token ticks (x turned 45°), the axis titles and the
    colour bar, so plotly's automargin seldom has to widen them: each widening redraws the whole figure, which at
    512 tokens cost 50 ms of the 300 ms a head change may take. An estimate too small only costs that redraw.
    The colour bar's title runs along the bar; sizing it as if it were level leaves room to spare. `spare`: px left
    below the x-axis title."""
    widest = max((text_px(t, tick_size) for t in ticktext), default=0.0)
    return dict(l=round(widest + size + 36), b=round(0.71 * widest + tick_size + size + spare),
                r=round(60 + text_px(bar, size)))

