"""The head view (issue 12): attention as lines between two columns of tokens, drawn in the browser.

A Streamlit component (ui/headview.js and .css joined with the shared base by ui/components.py; nothing is fetched
at run time) fed by the attention payload (ui/payload.py): up to 128 tokens every layer x head as uint16 weights,
longer inputs as 8-bit layers deflated one by one, as many as fit, nearest the chosen one first (for the
pretrained model that is all of them). Hovering a token and switching head or layer are then drawn in the browser
with no server round trip; a layer that did not fit is asked for, and only the component's own fragment reruns to
bring it (not the walkthrough below it).

The component reports the chosen layer, head (or head average) and pinned query token back once the clicking
stops; payload.store_pick writes them into the settings store, so the URL and the other pages follow.
Also here: the click-through from the model view and the all-heads grid to the one-head view.
"""

from __future__ import annotations

import functools
from typing import Any

import plotly.graph_objects as go
import streamlit as st

import encoder
from encoder.viz.export import export_name

from . import fragment, measure_lines, need_trace, payload, state
from .components import register

__all__ = ["KEY", "show", "ships_all", "clickable_chart", "clicked_head"]

KEY = "head-view"  # the component's key, whose "pick" payload.store_pick reads

_mount = register("head_view", "headview")


def show(fr: Any, trace: encoder.Trace) -> dict[str, Any]:
    """Draw the head view for the frame's trace, its lines under the store's Measure (ui/measure_lines.py); return
    the selection it was drawn with.

    When the lines' layers do not all fit in one payload, the view sits in a fragment of its own: asking for a
    layer reruns only the view, and the choice reaches the rest of the page once the clicking stops.
    """
    if not measure_lines.ships_all(fr, trace, measure_lines.current(fr, trace)):
        _one_layer_at_a_time()
    else:
        _draw(fr, trace, fetching=False)
    return payload.selection(trace)


def ships_all(fr: Any, trace: encoder.Trace) -> bool:
    """Whether every layer of the lines the view draws now is in the browser at once."""
    return measure_lines.ships_all(fr, trace, measure_lines.current(fr, trace))


def _draw(fr: Any, trace: encoder.Trace, *, fetching: bool) -> None:
    sel, key = payload.selection(trace), fr.trace_key
    lines = measure_lines.current(fr, trace)
    if lines.stack is not None:  # a measure: its maps in place of the attention (payload.build(stack=...))
        kept = dict(stack=lines.stack)
        if trace.seq_len > payload.FULL_UP_TO:
            kept["deflated"] = measure_lines.deflated(fr, lines, sel["layer"], fetching)
    elif trace.seq_len <= payload.FULL_UP_TO:
        kept = dict(weights=payload.uint16_weights(key, trace))
    else:  # where layers are fetched, a fetch waits for its own layer only; neighbours go along if ready
        kept = dict(deflated=functools.partial(payload.layer_at_hand, key, trace, sel["layer"]) if fetching
                    else functools.partial(payload.layer_bytes, key, trace))
    name = export_name(trace, "heads", *([lines.key] if lines.stack is not None else []))
    data = payload.build(trace, sel | {"lines": lines.header}, name=name, present=fr.present, trace_id=lines.trace_id,
                         **kept)
    _mount(key=KEY, data=data, on_pick_change=functools.partial(payload.store_pick, KEY, fetching), width="stretch",
           height="content")


def _one_layer_at_a_time_body() -> None:
    fr, trace = need_trace()  # in the fragment: the session keeps no tensor
    _draw(fr, trace, fetching=True)


_one_layer_at_a_time = fragment(_one_layer_at_a_time_body)


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
    if hit is None or not (payload.in_range(hit[0], "layer") and payload.in_range(hit[1], "head")):
        return
    state.put("layer", hit[0])
    state.put("head", hit[1])
    state.put("avg", False)
    state.put("view", "head")
