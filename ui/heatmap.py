"""The one-head attention map past FULL_UP_TO tokens (issue 15), drawn in the browser on a canvas.

At 512 tokens a plotly heatmap took 0.25-0.31 s per head or layer change (a Streamlit rerun, the figure through
JSON twice, 262,144 cells redrawn; benchmarks/RESULTS-app.md section 5). This component (st.components.v2:
heatmap.js and .css joined with the shared base by ui/components.py) gets the attention payload (ui/payload.py):
every layer x head as 8-bit weights, deflated per layer, with the chosen head's exact float32 weights as its tail.
Its own Layer and Head buttons switch the map in the browser with no script run; the settled pick goes back to the
settings store once the clicking stops, so the URL and the other pages follow and the next run ships that head's
exact weights.

The colour scales (fixed 0-1, auto, per row) are done in JS. "Average of heads", "Hide [CLS]/[SEP]" and models
whose layers do not all fit in one payload (payload.ships_all) keep the plotly chart: see `fits`.
Up to FULL_UP_TO tokens the plotly chart is used as before.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import encoder
from encoder.viz import attention, export, style
from encoder.viz.text import printable

from . import headview, payload
from .components import register

_mount = register("attention_map", "heatmap")


def fits(fr: Any, trace: encoder.Trace, *, avg: bool, hide: bool) -> bool:
    """Whether the one-head view is this component: a long input, one head, every token shown, all layers shipped."""
    return trace.seq_len > payload.FULL_UP_TO and not avg and not hide and payload.ships_all(fr, trace)


def stops() -> list[list[float]]:
    """The attention colour scale as [position, r, g, b] stops: the ones attention.attention_heatmap gives plotly."""
    out = []
    for at, colour in style.colorscale(style.ATTENTION_SCALE):
        r, g, b = (float(v) for v in colour.strip().removeprefix("rgb(").removesuffix(")").split(","))
        out.append([float(at), r, g, b])
    return out


def data(fr: Any, trace: encoder.Trace, layer: int, head: int, scale: str, tag: str) -> bytes:
    """payload.build (8-bit deflated layers) with this view's settings in its selection (colour scale and bar
    title, stops, PNG file names per layer and head, tick labels), then the chosen head's float32 weights
    (little-endian, T x T), for exact colours and hover."""
    key = fr.trace_key
    names = [[export.export_name(trace, "attention", f"L{n}", f"H{h}", model=tag) for h in range(trace.num_heads)]
             for n in range(trace.num_layers)]
    _, _, _, bar = attention.colour_scale(np.zeros((1, 1), np.float32), scale)
    sel = dict(layer=layer, head=head, avg=False, query=0, scale=scale, bar=bar, stops=stops(), names=names,
               labels=[printable(t, 16) for t in trace.labels], train=bool(trace.train))  # labels: as plotly's ticks
    body = payload.build(trace, sel, name=names[layer][head], present=fr.present, trace_id=fr.trace_id,
                         deflated=functools.partial(payload.layer_bytes, key, trace))
    return body + trace.attention[layer, head].numpy().astype("<f4").tobytes()


def show(fr: Any, trace: encoder.Trace, scale: str, tag: str) -> tuple[int, int]:
    """Draw the map for the store's layer and head; return them (the downloads below use them)."""
    sel = payload.selection(trace)
    layer, head = sel["layer"], sel["head"]
    # The head view's key: the pick is stored the same way (the two are never on one page).
    _mount(key=headview.KEY, data=data(fr, trace, layer, head, scale, tag),
           on_pick_change=functools.partial(payload.store_pick, headview.KEY), width="stretch", height="content")
    return layer, head
