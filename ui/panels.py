"""Panel figures drawn in the browser (issue 23): Inside a head's step charts without plotly.js.

encoder/viz/heads.py lays each step chart out as a plotly figure of heatmap panels on paper coordinates (their
titles, colour bars and printed numbers); that figure stays the one source of the layout, and the handout still
draws it with plotly. Here its dicts become a compact payload for ui/panels.js, which paints the panels on one canvas:
a settled pick redraws three charts in a few milliseconds, where plotly.js spent 100-180 ms of main thread on them
(a long task that any click or hover arriving meanwhile waited for).

The payload is framed as the attention payload is (ui/payload.py `encode`): [uint32 LE header length][header JSON]
[zero padding to a multiple of 8][each panel's values]. A
panel's values are float32 when that loses nothing (the model's own q, k, v taps), else float64 (the arithmetic
done in float64: the printed scores round exactly as they are computed), each starting at a multiple of 8; a panel
that is another's rows scaled by a column (a_ij v_j) travels as the two panels' numbers only (`product`).
Text travels as it is shown: plotly's markup (entities, <br>) is undone here, and the browser writes it with
canvas fillText or textContent, never as markup.
"""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np

from encoder.viz.export import safe_filename
from encoder.viz.style import QuickFigure

from . import payload
from .components import register

__all__ = ["chart", "show"]

_mount = register("panels", "panels")
_RGB = re.compile(r"rgba?\(([^)]*)\)")


def _lines(text: str) -> list[str]:
    """plotly label text as the lines it shows: <br> breaks, entities (label()'s escaping) undone."""
    return [html.unescape(line) for line in text.split("<br>")] if text else []


def _plain(text: str) -> str:
    return " ".join(_lines(text))


def _colour(c: str) -> list[int]:
    if c.startswith("#"):
        return [int(c[i:i + 2], 16) for i in (1, 3, 5)]
    return [round(float(v)) for v in _RGB.match(c).group(1).split(",")[:3]]


def _axis(layout: dict, name: str, n: str) -> dict:
    return layout.get(f"{name}axis{'' if n in ('', '1') else n}", {})


def _values(z: Any) -> np.ndarray:
    a = np.asarray(z, dtype=np.float64)
    return a if a.ndim == 2 else a[None, :]


def _product_of(grids: list[np.ndarray], i: int) -> list[int] | None:
    """[a, b] when grid i is, bit for bit, column a (T x 1) times grid b (T x d) row by row, as the weighted values
    a_ij v_j are: the browser multiplies them again in float64 and gets the same numbers; else None."""
    z = grids[i]
    if z.shape[1] < 2 or not np.isfinite(z).all():
        return None
    for a, col in enumerate(grids):
        for b, full in enumerate(grids):
            if (i not in (a, b) and col.shape == (z.shape[0], 1) and full.shape == z.shape
                    and np.array_equal(col * full, z)):
                return [a, b]
    return None


def chart(fig: Any, filename: str) -> bytes:
    """The payload of a figure made by encoder/viz/heads.py (heatmap panels, paper notes, rectangles), saved as
    `filename`.png at 3x by the component's PNG button; the chart keeps the figure's least width (header minPx)."""
    plain = fig.plain() if isinstance(fig, QuickFigure) else None
    if plain is None:  # a figure whose plotly objects are built
        built = fig.to_plotly_json()
        plain = (built["data"], built["layout"])
    data, layout = plain
    size = layout["font"]["size"]
    title = layout["title"]
    panels, bodies, at = [], [], 0
    grids = [_values(trace["z"]) for trace in data]
    for i, (trace, z) in enumerate(zip(data, grids, strict=True)):
        n = trace.get("xaxis", "x").removeprefix("x")
        xa, ya = _axis(layout, "x", n), _axis(layout, "y", n)
        exact32 = np.array_equal(z.astype(np.float32), z, equal_nan=True)
        product = _product_of(grids, i)
        body = b"" if product else (z.astype("<f4") if exact32 else z.astype("<f8")).tobytes()
        text = trace.get("texttemplate", "")
        panel = dict(
            x=list(xa["domain"]), y=list(ya["domain"]), rows=[_plain(str(r)) for r in trace["y"]],
            shape=list(z.shape), dtype="f4" if exact32 else "f8", at=at, zmin=float(trace["zmin"]),
            zmax=float(trace["zmax"]), scale=[[float(s), *_colour(c)] for s, c in trace["colorscale"]],
            hover=_plain(trace.get("hovertemplate", "").replace("<extra></extra>", "")),
            text=text.removeprefix("%{z:").removesuffix("}") if text else "",
            textSize=trace.get("textfont", {}).get("size", size), ticks=bool(ya.get("showticklabels")),
            xticks=bool(xa.get("showticklabels")), xtitle=_plain(xa.get("title", {}).get("text", "")))
        if product:  # computed in the browser, the same float64 multiplications: a·v is half the values chart's bytes
            panel |= dict(product=product, dtype="f8")
        if trace.get("showscale"):
            bar = trace["colorbar"]
            panel["bar"] = dict(title=_plain(bar.get("title", {}).get("text", "")), len=bar.get("len", 1.0),
                                y=bar.get("y", 0.5), thickness=bar.get("thickness", 30))
        panels.append(panel)
        bodies.append(body + bytes(-len(body) % 8))
        at += len(bodies[-1])
    notes = [dict(lines=_lines(a["text"]), x=a["x"], y=a["y"], size=a["font"]["size"],
                  xanchor=a.get("xanchor", "center"), yanchor=a.get("yanchor", "middle"))
             for a in layout.get("annotations", [])]
    shapes = [dict(panel=int(s["xref"].removeprefix("x") or 1) - 1, x0=s["x0"], x1=s["x1"], y0=s["y0"], y1=s["y1"],
                   color=_colour(s["line"]["color"]), width=s["line"]["width"]) for s in layout.get("shapes", [])]
    header = dict(
        v=1, name=safe_filename(filename), size=size, font=layout["font"]["family"], height=layout["height"],
        margin=layout["margin"], title=_lines(title["text"]), titleSize=title["font"]["size"],
        subtitle=_lines(title.get("subtitle", {}).get("text", "")),
        subSize=title.get("subtitle", {}).get("font", {}).get("size", size), panels=panels, notes=notes,
        shapes=shapes, minPx=int(layout.get("meta", {}).get("min_px", 0)))
    return payload.encode(header, b"".join(bodies))


def show(key: str, data: bytes) -> None:
    """Draw a chart (the payload from chart()) as the component `key`: the same key keeps the canvas between runs."""
    _mount(key=key, data=data, width="stretch", height="content")
