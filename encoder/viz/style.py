"""The look every plotly figure shares: template, fonts and sizes (larger on a projector), colour scales, titles.

Presentation mode: every figure fits a 1280x720 or 1024x768 projector whole, below Streamlit's 60 px header, and no
label is smaller than 14 px (the back row of a lecture room reads 14 px on a 2 m wide screen).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

from ..trace import Trace
from .text import label, prose_px, text_px

ATTENTION_SCALE = "Blues"
DIVERGING = "RdBu_r"  # blue negative, white zero, red positive
FONT = "Helvetica, Arial, sans-serif"
# The compact presentation frame (app.py) plus a page's own controls leave ~430 px below them at 1280x720, so a figure
# at most PRESENT_HEIGHT tall is whole on screen at first load; a diagram scales to at most DIAGRAM_HEIGHT (its pages
# have fewer controls above it).
PRESENT_HEIGHT = 420
PRESENT_TALLEST = 640  # a map taller than PRESENT_HEIGHT to name every token (axes.map_height): whole once scrolled
DIAGRAM_HEIGHT = 480
MIN_PRESENT_FONT = 14
FONT_SIZE = {False: 15, True: 20}  # a figure's font by presentation mode: >= MIN_PRESENT_FONT on a projector
# How wide a title may be, at its own font size, in a chart that shares its row with another: half the main column at
# 1024 px with the sidebar open (about 290 px), or half the screen when presenting (about 420 px). Wider titles are
# broken into lines at spaces; plotly never wraps a title itself, so it ran past a narrow chart's right edge.
NARROW_TITLE_PX = {False: 270, True: 400}
# A full-width chart's title and subtitle lines: the main column at 1024 px with the sidebar open is about 560 px of
# chart; on a projector (sidebar folded, 20 px text) about 900.
WIDE_TITLE_PX = {False: 520, True: 820}
WIDE_LEGEND_PX = 700  # the width a full-width chart's legend may take before it wraps (a 1024 px screen, sidebar open)


# Every figure gets plotly_white from layout(). Without this, each go.Figure() deep-copied plotly's default template
# first (a few ms a figure) only for layout() to replace it: plotly_white sets every key the default one does.
pio.templates.default = None


def _keep_slashes() -> None:
    """plotly.io.to_json writes every '/' as the six bytes \\u002f, for JSON pasted into an HTML <script>. '<' and '>'
    stay escaped, so '</script>' still cannot form, and Streamlit only parses the JSON. A map's z travels as base64,
    one character in 64 a '/': at 512 tokens that was 70 kB (5 %) of each map (tests/encoder/test_figures.py checks it)."""
    from plotly.io import _json

    for name in ("_swap_json", "_swap_orjson"):
        swaps = getattr(_json, name, None)
        if isinstance(swaps, tuple):
            setattr(_json, name, tuple(pair for pair in swaps if pair[0] != "/"))


_keep_slashes()


@functools.cache
def _white() -> dict:
    """The plotly_white template as a plain dict, resolved once (plotly validates a named template per figure)."""
    return pio.templates["plotly_white"].to_plotly_json()


@functools.cache
def bar_title(text: str) -> dict:
    """A colour bar's title, running along the bar: set on top, its descenders touched the bar's top number."""
    return dict(text=text, side="right")


def colorscale(name: str) -> list[list]:
    """A named plotly.py colour scale as explicit stops (plotly.js's own scale of the same name can differ)."""
    return plotly.colors.get_colorscale(name)


def wrap(text: str, size: float, width: float, measure: Callable[[str, float], float] = text_px) -> list[str]:
    """Already-escaped label text broken at spaces into lines of at most `width` px at font `size` as `measure`
    estimates them; a word wider than that stays whole on its own line."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and measure(lines[-1] + " " + word, size) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def legend_rows(names: list[str], size: int, width: float) -> int:
    """How many rows a horizontal legend of these entries takes in `width` px (each entry: its text and ~46 px of
    symbol and gap, as plotly.js draws them); 0 without entries."""
    rows, used = 0, width
    for name in names:
        need = text_px(name, size) + 46
        if used + need > width:
            rows, used = rows + 1, 0.0
        used += need
    return rows


def _title_room(size: int, title_lines: int, subtitle_lines: int, legend: int) -> int:
    """The top margin that holds a title anchored at the top (10 px down), its subtitle, and `legend` rows of a
    legend above the plot.

    Where plotly.js puts the lines, measured in Chromium at font sizes 15 and 20: a title line is 1.33 em of the
    title's size; a one-line title's subtitle ends 3.6 em (of the font size) + 10 px down, each further line of either
    lower by its own height. A horizontal legend above the plot is 1.2 em + 15 px tall, each further row 1.45 em
    more; 5 px keep it apart from the title.
    """
    title_px = size + 6
    bottom = 1.33 * title_px * title_lines + 1
    if subtitle_lines:
        bottom = 3.6 * size + 10 + 1.33 * title_px * (title_lines - 1) + 1.3 * (size - 1) * (subtitle_lines - 1)
    return round(bottom + (1.2 * size + 20 + 1.45 * size * (legend - 1) if legend else 10))


def layout(title: str, presentation: bool, subtitle: str = "", height: int | None = None, *,
           narrow: bool = False, legend_above: int = 0, wide: bool = False, plot_titles: bool = False,
           tallest: int = PRESENT_HEIGHT, wrap_px: int | None = None) -> dict:
    """Common look: white template, large fonts (larger still for a projector), title and optional subtitle.

    narrow: the chart shares its row with another, so a long title (and subtitle) is broken into lines that fit.
    wide: a full-width chart whose subtitle is long (sentences of prose): broken into lines that fit the main column
    of a 1024 px screen with the sidebar open (an explicit "<br>" in it is kept as a break).
    legend_above: the rows of a horizontal legend the figure puts just above its plot, below the title's lines.
    plot_titles: a line of titles (at most the font's size) stands just above the plots, below the title's lines.
    tallest: the most `height` may be when presenting; a map naming every token may be taller (axes.map_height).
    wrap_px: with wide, the lines' width in real px where it is less than WIDE_TITLE_PX (a chart that keeps its own
    least width: the lines are measured as drawn, prose_px).
    """
    size = FONT_SIZE[presentation]  # presentation: >= MIN_PRESENT_FONT everywhere, ticks included
    titles, subtitles = [title], [subtitle] if subtitle else []
    if narrow or wide:
        # The fixed widths are in text_px's units, set where Chromium showed the titles whole (text_px counts prose
        # ~40 % wide); a chart's own least width is real px, so its lines are measured as drawn (prose_px).
        own = wrap_px is not None and not narrow and wrap_px < WIDE_TITLE_PX[presentation]
        px = wrap_px if own else (NARROW_TITLE_PX if narrow else WIDE_TITLE_PX)[presentation]
        measure = prose_px if own else text_px
        titles = wrap(title, size + 6, px, measure)
        subtitles = ([line for part in subtitle.split("<br>") for line in wrap(part, size - 1, px, measure)]
                     if subtitle else [])
    top = 100 if subtitle else 70
    anchored = narrow or wide or legend_above or plot_titles  # title from the top down: it cannot reach what is below
    if anchored:
        top = max(top, _title_room(size, len(titles), len(subtitles), legend_above))
    if plot_titles:  # a line of them (at most the font's size), 1.3 em, and 4 px apart from the subtitle
        top = max(top, _title_room(size, len(titles), len(subtitles), 0) + round(1.3 * size) + 4)
    layout = dict(
        template=_white(),
        font=dict(family=FONT, size=size),
        title=dict(text="<br>".join(titles), font=dict(size=size + 6), x=0, xanchor="left",
                   subtitle=dict(text="<br>".join(subtitles), font=dict(size=size - 1, color="#495057"))),
        margin=dict(l=10, r=10, t=top, b=10),
        hoverlabel=dict(font=dict(size=size)),
    )
    if presentation:  # Streamlit's theme draws legends at 13.8 px unless told: 16 px, as the tick labels
        layout["legend"] = dict(font=dict(size=size - 4))
    if anchored:
        # plotly.js lifts a title of several lines anchored at its top by about 0.7 em (measured in Chromium at 21 and
        # 26 px): the pad gives that back; tests/app/test_projector.py checks the title is whole and clear of the legend
        lift = round(0.7 * (size + 6)) if len(titles) > 1 else 0
        layout["title"] |= dict(y=1.0, yref="container", yanchor="top", pad=dict(t=10 + lift))
    if height:
        layout["height"] = int(min(height, tallest) if presentation else height)
    return layout


def apply(fig: go.Figure, title: str, presentation: bool, subtitle: str = "", height: int | None = None, *,
          narrow: bool = False, legend_above: bool = False, plot_titles: bool = False,
          tallest: int = PRESENT_HEIGHT, wide: bool = False) -> go.Figure:
    """A figure built with plotly's validated objects, with the common look (see layout()).

    The look is merged into the figure's own layout as plain dicts and the result is not validated again: plotly.py's
    update_layout validated the template and every property once more, 20-60 ms a figure, which made the pages with
    four charts cost 100-150 ms of server CPU per run (benchmarks/page_cpu.py). tests/encoder/test_figures.py
    rebuilds every such figure with validation and checks it is the same.
    """
    rows = 0
    if legend_above:  # its rows: the entries plotly shows, in the width this chart has
        names = [str(t.name) for t in fig.data if t.name and t.showlegend is not False]
        rows = legend_rows(names, FONT_SIZE[presentation], NARROW_TITLE_PX[presentation] if narrow else WIDE_LEGEND_PX)
    # Each part's own plain dicts (numpy arrays stay arrays; the figure's to_plotly_json would encode them as base64)
    look = merged(fig.layout.to_plotly_json(), layout(title, presentation, subtitle, height, narrow=narrow,
                                                      legend_above=rows, plot_titles=plot_titles, tallest=tallest,
                                                      wide=wide))
    if presentation:  # plotly draws tick labels at ~0.7 of the font size unless told: 16 px for the back row
        for name in {"xaxis", "yaxis", *(k for k in look if k.startswith(("xaxis", "yaxis")))}:
            axis = look.setdefault(name, {})
            axis["tickfont"] = {"size": 16} | axis.get("tickfont", {})
    return quick([trace.to_plotly_json() for trace in fig.data], look)


def merged(base: dict, extra: dict) -> dict:
    """`base` updated by `extra` as plotly's update_layout does: nested dicts merged key by key, `extra` winning."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


_BUILDING = threading.RLock()  # QuickFigure: one build of plotly.py's objects at a time


class QuickFigure(go.Figure):
    """A figure from plain dicts whose plotly.py objects are built only when something reads or changes it.

    Unvalidated, plotly.py still builds a figure's objects property by property and deep-copies them: 80 % of the
    build of Inside a head's three figures (~19 ms of 23). A figure that is only drawn never needs them: plain() hands
    its dicts to a kept figure's to_dict (ui/caches.py). Anything else (fig.layout, fig.data, update_layout, to_dict,
    a copy) builds them first, from the same dicts, so it is go.Figure(data=..., layout=..., _validate=False)."""

    def __init__(self, data: object = None, layout: object = None, **kwargs: object) -> None:
        if kwargs or type(data) is not list or type(layout) is not dict:
            super().__init__(data=data, layout=layout, **kwargs)  # copy and pickle rebuild a figure from its dict
        else:
            self._plain = (data, layout)

    def __getattr__(self, name: str) -> object:
        """Only reached for what the instance lacks: while the objects are not built, build them, then look again.
        One build at a time: a kept figure is shared by every session, and a second thread must not see it half built
        (it waits, then finds the objects)."""
        with _BUILDING:
            plain = self.__dict__.pop("_plain", None)
            if plain is not None:
                go.Figure.__init__(self, data=plain[0], layout=plain[1], _validate=False)
        return object.__getattribute__(self, name)  # an attribute the built figure lacks raises AttributeError

    def plain(self) -> tuple[list[dict], dict] | None:
        """The (data, layout) dicts the figure was made from while its objects are not built; else None."""
        return self.__dict__.get("_plain")


def figure_meta(fig: go.Figure) -> dict:
    """A figure's layout.meta, read without building a QuickFigure's objects."""
    plain = fig.plain() if isinstance(fig, QuickFigure) else None
    return plain[1].get("meta", {}) if plain is not None else fig.layout.meta


def quick(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, skipping plotly.py's per-property validation (and building its objects only when
    something reads them: QuickFigure).

    The attention views redraw on every layer/head click; validation cost 25-60 ms of each (most of it copying the
    template), and the click's whole budget is 300 ms. Every property must therefore be written in its full form
    (title=dict(text=...), explicit colour stops); tests/encoder/test_figures.py checks these figures against validated ones.
    """
    return QuickFigure(data, layout)


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
