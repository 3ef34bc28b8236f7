"""The look every plotly figure shares: template, fonts and sizes (larger on a projector), colour scales, titles.

Presentation mode: every figure fits a 1280x720 or 1024x768 projector whole, below Streamlit's 60 px header, and no
label is smaller than 14 px (the back row of a lecture room reads 14 px on a 2 m wide screen).
"""

from __future__ import annotations

import functools

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

from ..trace import Trace
from .text import label

ATTENTION_SCALE = "Blues"
DIVERGING = "RdBu_r"  # blue negative, white zero, red positive
FONT = "Helvetica, Arial, sans-serif"
# The compact presentation frame (app.py) plus a page's own controls leave ~430 px below them at 1280x720, so a figure
# at most PRESENT_HEIGHT tall is whole on screen at first load; a diagram scales to at most DIAGRAM_HEIGHT (its pages
# have fewer controls above it).
PRESENT_HEIGHT = 420
DIAGRAM_HEIGHT = 480
MIN_PRESENT_FONT = 14


@functools.cache
def _white() -> dict:
    """The plotly_white template as a plain dict, resolved once (plotly validates a named template per figure)."""
    return pio.templates["plotly_white"].to_plotly_json()


@functools.cache
def colorscale(name: str) -> list[list]:
    """A named plotly.py colour scale as explicit stops (plotly.js's own scale of the same name can differ)."""
    return plotly.colors.get_colorscale(name)


def layout(title: str, presentation: bool, subtitle: str = "", height: int | None = None) -> dict:
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


def apply(fig: go.Figure, title: str, presentation: bool, subtitle: str = "", height: int | None = None) -> go.Figure:
    """Give a validated plotly figure the common look (see layout()); returns the same figure."""
    # The template as plotly's own (already validated) object: as a plain dict, update_layout validated every
    # property of it again, ~200 ms per figure (benchmarks/page_cpu.py); the object costs ~10 ms.
    fig.update_layout(**layout(title, presentation, subtitle, height) | {"template": pio.templates["plotly_white"]})
    if presentation:  # plotly draws tick labels at ~0.7 of the font size unless told: 16 px for the back row
        fig.for_each_xaxis(lambda a: a.tickfont.size is None and a.update(tickfont_size=16))
        fig.for_each_yaxis(lambda a: a.tickfont.size is None and a.update(tickfont_size=16))
    return fig


def quick(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, skipping plotly.py's per-property validation.

    The attention views redraw on every layer/head click; validation cost 25-60 ms of each (most of it copying the
    template), and the click's whole budget is 300 ms. Every property must therefore be written in its full form
    (title=dict(text=...), explicit colour stops); tests/encoder/test_figures.py checks these figures against validated ones.
    """
    return go.Figure(data=data, layout=layout, _validate=False)


def paper_note(text: str, x: float, y: float, size: int, **anchor: str) -> dict:
    """A text annotation placed in paper coordinates (cell labels of the thumbnail figures)."""
    return dict(text=text, x=x, y=y, xref="paper", yref="paper", showarrow=False, font=dict(size=size), **anchor)


def mode_note(train: bool) -> str:
    """What a figure of a training-mode trace must say: its values are one random draw of dropout."""
    return " · training mode: dropout on" if train else ""


def sentence(trace: Trace, limit: int = 90) -> str:
    """A figure's subtitle: the traced sentence in quotes, shortened, and the training-mode note."""
    return f"“{label(' '.join(trace.text.split()), limit)}”" + mode_note(trace.train)


def symmetric_range(z: np.ndarray, percentile: float = 100.0) -> float:
    """Half-width of a colour range centred at 0 covering `percentile` % of the finite |values|."""
    finite = np.abs(z[np.isfinite(z)])
    if not finite.size:
        return 1e-6
    top = float(np.percentile(finite, percentile))
    return top if top > 0 else max(float(finite.max()), 1e-6)
