"""Text labels beside points that never overprint each other (issue 23: Token trajectories printed "emb" over
"animal (L5)").

Plotly places a text label where it is told and never moves it. So each label gets a side of its point here, the
first of eight that keeps it inside the plot and clear of the labels placed before it and of the markers it must leave
visible (a highlighted path's points: "emb" covered its own path's first points); a label with no free side is left
out (its point keeps its hover text). The plot's pixels per data unit are only known in the browser (the width
follows the screen), so a placement must hold for every scale in [lo, hi]: the boxes move linearly with the scale,
and two boxes separated along one axis at both ends stay separated along it in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .text import text_px

PAD = 3  # px between a label and its point, and around each label's box
# (x shift, y shift, xanchor, yanchor) in units of the gap from the point: right, above, left, below, then diagonals.
SIDES = ((1, 0, "left", "middle"), (0, 1, "center", "bottom"), (-1, 0, "right", "middle"), (0, -1, "center", "top"),
         (1, 1, "left", "bottom"), (-1, 1, "right", "bottom"), (1, -1, "left", "top"), (-1, -1, "right", "top"))


@dataclass(frozen=True)
class Label:
    """A label to place: its point (data units), text, font size (px) and the radius of its marker (px)."""

    x: float
    y: float
    text: str
    size: float
    marker: float = 4.0


@dataclass(frozen=True)
class Placed:
    """A placed label: which Label, the side it took (one of SIDES), and the annotation's anchor and shift (px)."""

    index: int
    side: tuple
    xanchor: str
    yanchor: str
    xshift: float
    yshift: float


def box(label: Label, side: tuple, origin: tuple[float, float], scale: float) -> tuple[float, float, float, float]:
    """The label's box (left, top, right, bottom) in screen px at `scale` px per data unit, y growing down."""
    sx, sy, xanchor, yanchor = side
    w, h = text_px(label.text, label.size) * 1.1 + 2 * PAD, label.size * 1.35 + 2 * PAD
    gap = label.marker + PAD
    px = (label.x - origin[0]) * scale + sx * gap
    py = (origin[1] - label.y) * scale - sy * gap
    left = {"left": px, "center": px - w / 2, "right": px - w}[xanchor]
    top = {"top": py, "middle": py - h / 2, "bottom": py - h}[yanchor]
    return left, top, left + w, top + h


def _apart(a: tuple, b: tuple) -> tuple[bool, bool]:
    """Whether two boxes are separated along x, and along y."""
    return a[2] <= b[0] or b[2] <= a[0], a[3] <= b[1] or b[3] <= a[1]


def marker_box(x: float, y: float, radius: float, origin: tuple[float, float], scale: float) -> tuple:
    """A marker's box (left, top, right, bottom) in screen px at `scale` px per data unit: its centre moves with the
    scale, its radius (px) stays, so its edges move linearly as a label's do."""
    px, py = (x - origin[0]) * scale, (origin[1] - y) * scale
    return px - radius, py - radius, px + radius, py + radius


def place(labels: Sequence[Label], xrange: tuple[float, float], yrange: tuple[float, float],
          scales: tuple[float, float], markers: Sequence[tuple[float, float, float]] = ()) -> list[Placed]:
    """Labels in priority order, each on the first side that is inside the plot and clear of those placed before it
    and of `markers` ((x, y, radius px): points a label must not cover) at both scales (px per data unit; the lowest
    and highest the plot can have); those with no such side are left out."""
    origin = (xrange[0], yrange[1])  # the plot's top-left corner in data units
    size = {s: ((xrange[1] - xrange[0]) * s, (yrange[1] - yrange[0]) * s) for s in scales}
    # boxes at the low and the high scale: the markers', then each label's as it is placed
    taken: list[tuple[tuple, ...]] = [tuple(marker_box(x, y, r, origin, s) for s in scales) for x, y, r in markers]
    out = []
    for i, label in enumerate(labels):
        for side in SIDES:
            boxes = tuple(box(label, side, origin, s) for s in scales)
            inside = all(b[0] >= 0 and b[1] >= 0 and b[2] <= size[s][0] and b[3] <= size[s][1]
                         for b, s in zip(boxes, scales, strict=True))
            clear = all(any(all(_apart(b, o)[axis] for b, o in zip(boxes, other, strict=True)) for axis in (0, 1))
                        for other in taken)
            if inside and clear:
                taken.append(boxes)
                sx, sy, xanchor, yanchor = side
                gap = label.marker + PAD
                out.append(Placed(i, side, xanchor, yanchor, sx * gap, sy * gap))
                break
    return out
