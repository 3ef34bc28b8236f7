"""The head view (issue 12): attention as lines between two columns of tokens, drawn in the browser.

A Streamlit component (st.components.v2, inline JS and CSS from headview.js / headview.css; nothing is fetched at
run time). Up to FULL_UP_TO tokens every layer × head ships once as uint16 weights (steps of 1/65535, so a weight
shown to 4 decimals is exact). Longer inputs ship 8-bit weights (steps of 1/255: the view says "± 0.002"), each
layer deflated on its own (mostly zeros: about 0.5 MB a layer at 512 tokens instead of 3.1 MB), as many layers
as fit in SHIP_LIMIT, nearest the chosen one first: for the pretrained model that is all of them. Hovering a token
and switching head or layer are then drawn in the browser with no server round trip; a layer that did not fit is
asked for, and only the component's own fragment reruns to bring it (not the walkthrough below it).

The component reports the chosen layer, head (or head average) and pinned query token back once the clicking
stops; `_picked` writes them into the settings store, so the URL and the other pages follow.
Also here: the click-through from the model view and the all-heads grid to the one-head view.
"""

from __future__ import annotations

import functools
import json
import struct
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

import encoder
from encoder.viz.figures import export_name

from . import fragment, need_trace, state
from .caches import CACHE
from .settings import SETTINGS

KEY = "head-view"
FULL_UP_TO = 128  # tokens up to which all layers ship at once: 6 x 12 x 128 x 128 x 2 bytes = 2.4 MB for MiniLM
LEVELS = 65535  # weights travel as round(w * LEVELS) in a uint16
LEVELS_8 = 255  # past FULL_UP_TO tokens: round(w * LEVELS_8) in a uint8, so within 1/510 of the trace
SHIP_LIMIT = 4_000_000  # deflated bytes of 8-bit layers shipped at once past FULL_UP_TO (6 layers at 512: 3.2 MB)
_HERE = Path(__file__).parent

_mount = st.components.v2.component(
    "encoder_explorer.head_view",
    js=(_HERE / "headview.js").read_text(encoding="utf-8"),
    css=(_HERE / "headview.css").read_text(encoding="utf-8"),
)


def quantise(attention: torch.Tensor, levels: int = LEVELS) -> np.ndarray:
    """Attention weights in [0, 1] (any shape) as little-endian steps of 1/levels (uint16, or uint8 for
    LEVELS_8); error <= 0.5/levels."""
    if levels <= 255:  # float32 and round-half-up: 6 layers at 512 tokens in ~0.2 s, not 1.4 s
        return (attention.float().clamp(0, 1) * levels + 0.5).to(torch.uint8).numpy()
    return torch.round(attention.double().clamp(0, 1) * levels).to(torch.int32).numpy().astype("<u2")  # exact halves


def encode_payload(header: dict[str, Any], body: bytes | np.ndarray) -> bytes:
    """[uint32 LE header length][header JSON][zero padding to a multiple of 8][body: uint16 LE weights, or the
    deflated 8-bit layers one after another (their sizes in header["zipped"])]."""
    head = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    pad = -(4 + len(head)) % 8
    if isinstance(body, np.ndarray):
        body = body.astype("<u2", copy=False).tobytes()
    return struct.pack("<I", len(head)) + head + b"\0" * pad + body


def deflated_layer(attention: torch.Tensor) -> bytes:
    """One layer's (H, T, T) weights as 8-bit steps, deflated (zlib format: the browser's DecompressionStream)."""
    return zlib.compress(quantise(attention, LEVELS_8).tobytes(), 1)


def nearest_first(layer: int, num_layers: int) -> list[int]:
    """Every layer, the chosen one first, then by distance (the next one before the previous one)."""
    return sorted(range(num_layers), key=lambda n: (abs(n - layer), n < layer))


def payload(trace: encoder.Trace, sel: dict[str, Any], *, name: str, present: bool = False, trace_id: str = "",
            weights: np.ndarray | None = None, deflated: Callable[[int], bytes | None] | None = None) -> bytes:
    """The component's data: tokens, sizes and the chosen view in the header, then the shipped layers' weights.

    sel: {"layer", "head", "avg", "query"}. Up to FULL_UP_TO tokens: all layers as uint16 (weights: quantise() of
    them if already computed). Longer: 8-bit deflated layers, nearest the chosen one first, while they fit in
    SHIP_LIMIT (the chosen one always); deflated(layer) gives one layer's bytes (default: deflated_layer), or None
    to leave that layer out.
    """
    header = dict(v=2, id=trace_id or f"{trace.text!r}:{trace.seq_len}", T=trace.seq_len, L=trace.num_layers,
                  H=trace.num_heads, tokens=trace.tokens, sel=sel, name=name, present=present)
    if trace.seq_len <= FULL_UP_TO:
        header |= dict(layers=list(range(trace.num_layers)), bits=16, zipped=None)
        return encode_payload(header, quantise(trace.attention) if weights is None else weights)
    deflated = deflated or (lambda n: deflated_layer(trace.attention[n]))
    layers, chunks, size = [], [], 0
    for n in nearest_first(sel["layer"], trace.num_layers):
        chunk = deflated(n)
        if chunk is None:  # not at hand (still being prepared): the browser asks for it if it is needed
            continue
        if layers and size + len(chunk) > SHIP_LIMIT:
            break
        layers.append(n)
        chunks.append(chunk)
        size += len(chunk)
    header |= dict(layers=layers, bits=8, zipped=[len(c) for c in chunks])
    return encode_payload(header, b"".join(chunks))


def selection(trace: encoder.Trace) -> dict[str, Any]:
    """The store's layer, head, head-average flag and query token, moved into this trace's range."""
    return dict(layer=state.fit("layer", lo=0, hi=trace.num_layers - 1),
                head=state.fit("head", options=range(trace.num_heads)),
                avg=bool(state.get("avg")),
                query=state.fit("query", lo=0, hi=trace.seq_len - 1))


def show(fr: Any, trace: encoder.Trace) -> dict[str, Any]:
    """Draw the head view for the frame's trace; return the selection it was drawn with.

    When the trace's layers do not all fit in one payload, the view sits in a fragment of its own: asking for a
    layer reruns only the view, and the choice reaches the rest of the page once the clicking stops.
    """
    if not ships_all(fr, trace):
        _one_layer_at_a_time()
    else:
        _draw(fr, trace, fetching=False)
    return selection(trace)


def _deflated(key: tuple, trace: encoder.Trace, layer: int) -> bytes:
    # Cached as a tensor so the byte-bounded cache counts it; a rerun (e.g. after a pick) deflates nothing again.
    return CACHE.get(("headview8", *key, layer),
                     lambda: torch.frombuffer(bytearray(deflated_layer(trace.attention[layer])), dtype=torch.uint8)
                     ).numpy().tobytes()


def _at_hand(key: tuple, trace: encoder.Trace, chosen: int, layer: int) -> bytes | None:
    """The chosen layer's bytes (computed if need be); another layer's only if already deflated."""
    if layer == chosen:
        return _deflated(key, trace, layer)
    cached = CACHE.peek(("headview8", *key, layer))
    return None if cached is None else cached.numpy().tobytes()


_PREPARING: set[tuple] = set()  # traces whose layers a background thread is deflating


def _prepare(key: tuple, trace: encoder.Trace) -> None:
    """Deflate every layer in the background, so a layer switch finds its layer (and neighbours) ready."""
    if key in _PREPARING:
        return
    _PREPARING.add(key)

    def work() -> None:
        try:
            for n in range(trace.num_layers):
                _deflated(key, trace, n)
        finally:
            _PREPARING.discard(key)

    threading.Thread(target=work, name="headview-prepare", daemon=True).start()


def ships_all(fr: Any, trace: encoder.Trace) -> bool:
    """Whether every layer of the trace is in the browser at once (else a layer switch may ask the app)."""
    if trace.seq_len <= FULL_UP_TO:
        return True
    key, size = fr.trace_key, 0
    for n in nearest_first(selection(trace)["layer"], trace.num_layers):
        size += len(_deflated(key, trace, n))
        if size > SHIP_LIMIT:
            _prepare(key, trace)
            return False
    return True


def _draw(fr: Any, trace: encoder.Trace, *, fetching: bool) -> None:
    sel, key, trace_id = selection(trace), fr.trace_key, fr.trace_id
    if trace.seq_len <= FULL_UP_TO:
        cached = CACHE.get(("headview", *key), lambda: torch.from_numpy(quantise(trace.attention).view(np.int16)))
        data = payload(trace, sel, name=export_name(trace, "heads"), present=fr.present, trace_id=trace_id,
                       weights=cached.numpy().view("<u2"))
    else:  # where layers are fetched, a fetch waits for its own layer only; neighbours go along if ready
        deflated = (functools.partial(_at_hand, key, trace, sel["layer"]) if fetching
                    else functools.partial(_deflated, key, trace))
        data = payload(trace, sel, name=export_name(trace, "heads"), present=fr.present, trace_id=trace_id,
                       deflated=deflated)
    _mount(key=KEY, data=data, on_pick_change=functools.partial(_picked, fetching), width="stretch", height="content")


def _one_layer_at_a_time_body() -> None:
    fr, trace = need_trace()  # in the fragment: the session keeps no tensor
    _draw(fr, trace, fetching=True)


_one_layer_at_a_time = fragment(_one_layer_at_a_time_body)


def _whole(value: Any, key: str) -> bool:
    s = SETTINGS[key]
    return isinstance(value, int) and not isinstance(value, bool) and s.lo <= value <= s.hi


def _picked(fetching: bool = False) -> None:
    """The component's pick (layer, head, avg, query) into the store; anything malformed is ignored.

    Where the view asks for layers (fetching), a pick with need=true reruns only the view's fragment, to bring the
    layer; the settled choice then reruns the app, so the walkthrough below follows it.
    """
    result = st.session_state.get(KEY)
    pick = result.get("pick") if result is not None else None
    if not isinstance(pick, dict):
        return
    for name in ("layer", "head", "query"):
        if _whole(pick.get(name), name):
            state.put(name, pick[name])
    if isinstance(pick.get("avg"), bool):
        state.put("avg", pick["avg"])
    if fetching and pick.get("need") is not True:
        st.rerun()


# ---------------------------------------------------------------------------------------------- click-through
def clickable_chart(fig: go.Figure, config: dict, key: str, num_heads: int, layer: int | None = None) -> None:
    """st.plotly_chart whose clicked thumbnail opens that layer/head in the one-head view.

    The model view has one heatmap per (layer, head) in row order (trace n = layer * num_heads + head); the grid of
    one layer has one per head (pass `layer`). Plotly cannot select a heatmap cell, so each thumbnail gets one
    invisible square marker as large as the thumbnail, carrying its (layer, head): a click anywhere on it selects it.
    """
    spec = fig.to_dict()
    data, lay = spec["data"], spec["layout"]
    plot_h = lay.get("height", 450) - lay["margin"]["t"] - lay["margin"]["b"]
    pads = []
    for n, trace in enumerate(data):
        if trace.get("type") != "heatmap":
            continue
        lh = (layer, n) if layer is not None else divmod(n, num_heads)
        y_axis = lay["yaxis" + trace["yaxis"][1:]]
        side = max(8, round(0.9 * plot_h * (y_axis["domain"][1] - y_axis["domain"][0])))
        mid_x, mid_y = trace["x"][len(trace["x"]) // 2], trace["y"][len(trace["y"]) // 2]  # categories: no new ones
        pads.append(dict(type="scatter", x=[mid_x], y=[mid_y], mode="markers", xaxis=trace["xaxis"], yaxis=trace["yaxis"],
                         customdata=[list(lh)], showlegend=False, cliponaxis=False,
                         marker=dict(symbol="square", size=side, opacity=0, color="#000"),
                         selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0)),
                         hovertemplate=f"layer {lh[0]}, head {lh[1]}: click to open<extra></extra>"))
    for name, axis in lay.items():  # scatter traces would bring back the grid lines that heatmap axes leave out
        if name.startswith(("xaxis", "yaxis")):
            lay[name] = axis | dict(showgrid=False, zeroline=False)
    clickable = go.Figure(data=[*data, *pads], layout=lay, _validate=False)
    st.plotly_chart(clickable, config=config, key=key, selection_mode="points",
                    on_select=functools.partial(_open_clicked, key))


def clicked_head(points: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(layer, head) of the first clicked thumbnail in a plotly selection's points, or None."""
    for point in points:
        pair = point.get("customdata")
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) and v >= 0 for v in pair):
            return pair[0], pair[1]
    return None


def _open_clicked(key: str) -> None:
    event = st.session_state.get(key)
    points = (event or {}).get("selection", {}).get("points", [])
    hit = clicked_head(points)
    if hit is None or not (_whole(hit[0], "layer") and _whole(hit[1], "head")):
        return
    state.put("layer", hit[0])
    state.put("head", hit[1])
    state.put("avg", False)
    state.put("view", "head")
