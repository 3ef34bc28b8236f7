"""The head view (issue 12): attention as lines between two columns of tokens, drawn in the browser.

A Streamlit component (ui/headview.js and .css joined with the shared base by ui/components.py; nothing is fetched
at run time) fed by the attention payload (ui/payload.py): up to 128 tokens every layer x head as uint16 weights,
longer inputs as 8-bit layers deflated one by one, as many as fit, nearest the chosen one first (for the
pretrained model that is all of them). Hovering a token and switching head or layer are then drawn in the browser
with no server round trip; a layer that did not fit is asked for, and only the component's own fragment reruns to
bring it (not the walkthrough below it).

The component reports the chosen layer, head (or head average) and pinned query token back once the clicking
stops; payload.store_pick writes them into the settings store, so the URL and the other pages follow.
"""

from __future__ import annotations

import functools
from typing import Any

import encoder
from encoder.viz.export import export_name

from . import fragment, need_trace, payload
from .components import register
from .payload import ships_all

__all__ = ["KEY", "show", "ships_all"]

KEY = "head-view"  # the component's key, whose "pick" payload.store_pick reads

_mount = register("head_view", "headview")


def show(fr: Any, trace: encoder.Trace) -> dict[str, Any]:
    """Draw the head view for the frame's trace; return the selection it was drawn with.

    When the trace's layers do not all fit in one payload, the view sits in a fragment of its own: asking for a
    layer reruns only the view, and the choice reaches the rest of the page once the clicking stops.
    """
    if not ships_all(fr, trace):
        _one_layer_at_a_time()
    else:
        _draw(fr, trace, fetching=False)
    return payload.selection(trace)


def _draw(fr: Any, trace: encoder.Trace, *, fetching: bool) -> None:
    sel, key = payload.selection(trace), fr.trace_key
    if trace.seq_len <= payload.FULL_UP_TO:
        kept = dict(weights=payload.uint16_weights(key, trace))
    else:  # where layers are fetched, a fetch waits for its own layer only; neighbours go along if ready
        kept = dict(deflated=functools.partial(payload.layer_at_hand, key, trace, sel["layer"]) if fetching
                    else functools.partial(payload.layer_bytes, key, trace))
    data = payload.build(trace, sel, name=export_name(trace, "heads"), present=fr.present, trace_id=fr.trace_id, **kept)
    _mount(key=KEY, data=data, on_pick_change=functools.partial(payload.store_pick, KEY, fetching), width="stretch",
           height="content")


def _one_layer_at_a_time_body() -> None:
    fr, trace = need_trace()  # in the fragment: the session keeps no tensor
    _draw(fr, trace, fetching=True)


_one_layer_at_a_time = fragment(_one_layer_at_a_time_body)
