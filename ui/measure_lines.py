"""The head view's lines under the Measure setting (issues 19 and 27): raw attention, or a measure of what flows.

Measures with a per-head form (raw attention, value-weighted, value-weighted unscaled) ship every layer x head, so
the head view's Layer, Head, Several and Average switch in the browser as they do for attention. The others measure
a whole layer (its heads, residual path and LayerNorm together) or the path through the layers: they ship one map
per layer, drawn as the layer's lines, and the view turns its head picker off and says why. Attention flow is
computed for one output token, the pinned query.

The stack travels as ui/payload.build(stack=...) ships any non-negative map: up to FULL_UP_TO tokens as uint16
fractions of each layer's largest value (named in the header when it passes 1), longer as 8-bit layers deflated one
by one, cached per trace, measure and layer, as many as fit in FIT_BYTES (the page stays under 3 MB).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

import encoder
from encoder.analysis.measures import MEASURES

from . import measures, payload, state
from .caches import CACHE
from .progress import Progress

FIT_BYTES = 2_900_000  # deflated 8-bit bytes of a measure shipped at once past FULL_UP_TO: the page under 3 MB
RAW = "raw"


@dataclasses.dataclass(frozen=True)
class Lines:
    """What the head view draws: the measure, its maps and what the browser is told about them."""

    key: str  # the measure's key in MEASURES
    stack: torch.Tensor | None  # (L, H, T, T) per head, or (L, T, T) per layer; None: the trace's own attention
    token: int | None  # the output position a one-token measure (flow) was computed for
    trace_id: str  # names the trace and the stack: the browser keeps what it holds while this stays
    header: dict[str, Any]  # for the browser (sel["lines"]): label, perHead, heads, left, right, note
    refused: str = ""  # why the chosen measure was not computed here (the lines are raw attention instead)


def chosen(trace: encoder.Trace) -> str:
    """The store's measure (any registered one)."""
    return state.fit("measure", options=list(MEASURES))


def _header(key: str, trace: encoder.Trace, token: int | None) -> dict[str, Any]:
    m = MEASURES[key]
    if key == RAW:
        left, right = "query (from)", "key (to)"
    elif m.cumulative:
        left, right = "position (takes)", "input token (from)"
    else:
        left, right = "position (takes)", "position (from)"
    note = f"computed for position {token} only: pin another query to compute its flow" if m.needs_token else ""
    return dict(key=key, label=m.label, perHead=m.per_head, heads=trace.num_heads, left=left, right=right, note=note,
                sums=m.rows_sum_to_one)


def prepare(fr: Any, trace: encoder.Trace) -> str:
    """Compute the chosen measure for the frame's trace (cached), with a progress bar while it runs; "" when it is
    ready, else the measure's own sentence saying why it is not computed here."""
    key = chosen(trace)
    if key == RAW:
        return ""
    m = MEASURES[key]
    token = payload.selection(trace)["query"] if m.needs_token else None
    if measures.cached(fr, key, token):
        return ""
    progress = Progress()
    try:
        measures.get_maps(fr, key, token, progress=progress(f"{m.label}, layers"))
    except ValueError as err:
        return str(err)
    finally:
        progress.done()
    return ""


def current(fr: Any, trace: encoder.Trace) -> Lines:
    """The lines the head view draws now: the chosen measure's, or raw attention when it is refused here."""
    key = chosen(trace)
    m = MEASURES[key]
    token = payload.selection(trace)["query"] if m.needs_token else None
    if key != RAW:
        try:
            maps = measures.get_maps(fr, key, token)
        except ValueError as err:
            return dataclasses.replace(current_raw(fr, trace), refused=str(err))
        stack = maps.heads if m.per_head else maps.layers
        return Lines(key, stack, token, f"{fr.trace_id}:{key}:{token}", _header(key, trace, token))
    return current_raw(fr, trace)


def current_raw(fr: Any, trace: encoder.Trace) -> Lines:
    return Lines(RAW, None, None, fr.trace_id, _header(RAW, trace, None))


def _scaled_layer(stack: torch.Tensor, layer: int) -> torch.Tensor:
    """One layer as payload.build ships it: divided by its largest value when that passes 1, (H, T, T)."""
    maps = stack[layer] if stack.dim() == 4 else stack[layer].unsqueeze(0)
    top = float(maps.max())
    return maps / top if top > 1 else maps


def layer_bytes(fr: Any, lines: Lines, layer: int) -> bytes:
    """A measure's layer as deflated 8-bit steps, computed once per trace, measure, token and layer."""
    key = ("headview8-measure", lines.key, lines.token, *fr.trace_key, layer)
    return CACHE.get(key, lambda: torch.frombuffer(bytearray(payload.deflated_layer(_scaled_layer(lines.stack, layer))),
                                                   dtype=torch.uint8)).numpy().tobytes()


def deflated(fr: Any, lines: Lines, chosen_layer: int, fetching: bool):
    """build()'s deflated(layer) for a measure: nearest the chosen layer first while they fit in FIT_BYTES; where the
    view asks for layers (fetching), only layers already deflated besides the chosen one."""
    spent = 0

    def one(layer: int) -> bytes | None:
        nonlocal spent
        if fetching and layer != chosen_layer:
            cached = CACHE.peek(("headview8-measure", lines.key, lines.token, *fr.trace_key, layer))
            chunk = None if cached is None else cached.numpy().tobytes()
        else:
            chunk = layer_bytes(fr, lines, layer)
        if chunk is None or (spent and spent + len(chunk) > FIT_BYTES):
            return None
        spent += len(chunk)
        return chunk

    return one


def ships_all(fr: Any, trace: encoder.Trace, lines: Lines) -> bool:
    """Whether every layer of the lines is in the browser at once (else a layer switch may ask the app)."""
    if lines.stack is None:
        return payload.ships_all(fr, trace)
    if trace.seq_len <= payload.FULL_UP_TO:
        return True
    return sum(len(layer_bytes(fr, lines, n)) for n in range(trace.num_layers)) <= FIT_BYTES
