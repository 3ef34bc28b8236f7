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

from . import fragment, measure_lines, need_trace, payload, state
from .components import register

__all__ = ["KEY", "show", "ships_all"]

KEY = "head-view"  # the component's key, whose "pick" payload.store_pick reads

_mount = register("head_view", "headview")


def show(fr: Any, trace: encoder.Trace) -> dict[str, Any]:
    """Draw the head view for the frame's trace, its lines under the store's Measure (ui/measure_lines.py); return
    the selection it was drawn with.

    When the lines' layers do not all fit in one payload, the view sits in a fragment of its own: asking for a
    layer reruns only the view, and the choice reaches the rest of the page once the clicking stops.
    """
    _follow_head(trace)
    if not measure_lines.ships_all(fr, trace, measure_lines.current(fr, trace)):
        _one_layer_at_a_time()
    else:
        _draw(fr, trace, fetching=False)
    return payload.selection(trace)


def _follow_head(trace: encoder.Trace) -> None:
    """Several heads include the head the walkthrough below follows: one chosen on another page (the map's Head) or
    by a link joins them, so the view shows it."""
    sel = payload.selection(trace)
    if sel["heads"] and not sel["avg"]:
        state.put("heads", payload.several_heads(f"{sel['heads']},{sel['head']}", trace.num_heads))


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
    # What the view already holds of these lines is not sent again (a settled pick at 512 tokens resent 2.6 MB); in
    # training mode each run may be a new draw of dropout under the same name, so everything goes.
    held = frozenset() if trace.train else payload.held_layers(KEY, lines.trace_id)
    data = payload.build(trace, sel | {"lines": lines.header}, name=name, present=fr.present, trace_id=lines.trace_id,
                         held=held, **kept)
    _mount(key=KEY, data=data, on_pick_change=functools.partial(payload.store_pick, KEY, fetching), width="stretch",
           height="content")


def _one_layer_at_a_time_body() -> None:
    fr, trace = need_trace()  # in the fragment: the session keeps no tensor
    _draw(fr, trace, fetching=True)


_one_layer_at_a_time = fragment(_one_layer_at_a_time_body)
