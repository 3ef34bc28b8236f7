"""The attention map (issues 15, 19, 23, 27): one head, all heads of a layer, or every layer x head, under any
registered measure, drawn in the browser at every sentence length.

A Streamlit component (ui/heatmap.js and .css joined with the shared base by ui/components.py). Its data is one
payload of parts (`data`): each measure's maps as the head view's layers (ui/payload.py: uint16 up to 128 tokens,
8-bit deflated layer by layer past that), and for the one-head view the map on screen as its exact four decimals
(payload.digits). Layer, head, head average, hidden special tokens, the colour scale, the measure and raw attention
beside it switch in the browser from what it holds; a switch to something it lacks asks at once, and the settled
choice comes back once the clicking stops. Either way the browser says what it holds, and the next payload carries
only what it lacks (about 0.2 MB per settled run at 512 tokens: the new map's exact decimals).

The first payload carries the chosen measure and raw attention, nearest the chosen layer first, up to LIMIT bytes; a
measure chosen later is computed on its first request (with progress) and cached per trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st
import torch

import encoder
from encoder.analysis.measures import MEASURES, Maps, special_share
from encoder.viz import export, style
from encoder.viz.text import printable

from . import get_trace, measures, payload, state
from .caches import CACHE
from .components import register
from .settings import SETTINGS

KEY = "attention-map"  # the component's key; its "pick" is read by take_pick
HELD = "attention-map:held"  # what the browser said it holds in its last pick: {"id", "nonce", "stacks", "exact"}
LIMIT = 2_600_000  # bytes of maps per payload: with an exact map (<= 0.2 MB) and the header a page stays under 3 MB
VIEWS = ("head", "layer", "model")  # drawn here; "rollout" is the page's plotly chart
PICKED_INTS = ("layer", "head", "query")
PICKED_FLAGS = ("avg", "hide_special", "beside")
PICKED_CHOICES = ("scale", "measure", "view")
SHARED_WITH = "value"  # the note compares raw attention with this measure whatever is chosen (issue 19's table)

_mount = register("attention_map", "heatmap")
Progress = Callable[[int, int], None]


# ------------------------------------------------------------------------------------------------ the selection
def selection(trace: encoder.Trace, view: str) -> dict[str, Any]:
    """The store's choices for the map, moved into this trace's range (the keys a pick sends back)."""
    sel = payload.selection(trace)
    return sel | dict(view=view, hide_special=bool(state.get("hide_special")), beside=bool(state.get("beside")),
                      scale=state.fit("scale", options=SETTINGS["scale"].options),
                      measure=state.fit("measure", options=SETTINGS["measure"].options))


def token_of(sel: dict[str, Any]) -> int | None:
    """The output token the chosen measure is computed for (attention flow), else None."""
    return sel["query"] if MEASURES[sel["measure"]].needs_token else None


def stack_id(fr: Any, key: str, token: int | None) -> str:
    """What the browser calls one measure's maps of one trace (flow: of one token)."""
    return f"{fr.trace_id}:{key}" + ("" if token is None else f":{token}")


def exact_key(sel: dict[str, Any]) -> str:
    """Which map an exact part holds: measure, token, layer, head (or avg, or - without heads), hidden specials."""
    m = MEASURES[sel["measure"]]
    head = ("avg" if sel["avg"] else sel["head"]) if m.per_head else "-"
    token = sel["query"] if m.needs_token else "-"
    return f"{m.key}|{token}|{sel['layer']}|{head}|{int(sel['hide_special'])}"


# ------------------------------------------------------------------------------------------------ the maps
def stack(fr: Any, key: str, token: int | None, progress: Progress | None = None) -> tuple[torch.Tensor, list[float]]:
    """One measure's maps in its own units as (L, H, T, T) (H = 1 without heads), and each layer's top value (1
    where the layer stays within [0, 1]: it travels as fractions of that); raises the measure's ValueError when it
    refuses this trace. Nothing is copied: the maps are the cached ones."""
    if key == "raw":
        trace = get_trace(*fr.trace_key)
        return trace.attention, [1.0] * trace.num_layers
    maps = measures.get_maps(fr, key, token, progress)
    full = maps.heads if maps.heads is not None else maps.layers.unsqueeze(1)  # (L, H, T, T), a view
    top = CACHE.get(("map-top", key, token, *fr.trace_key), lambda: full.flatten(1).amax(1).clamp(min=1.0))  # (L,)
    return full, top.tolist()


def layer_blob(fr: Any, key: str, token: int | None, maps: torch.Tensor, top: list[float], layer: int) -> bytes:
    """One layer of a measure's maps as it travels (fractions of the layer's top): uint16 up to
    payload.FULL_UP_TO tokens, else 8-bit deflated; computed once per trace, measure and layer (byte-bounded cache)."""
    short = maps.shape[-1] <= payload.FULL_UP_TO
    if key == "raw":  # the head view's cached layers: nothing computed twice
        trace = get_trace(*fr.trace_key)
        return (payload.uint16_weights(fr.trace_key, trace)[layer].tobytes() if short
                else payload.layer_bytes(fr.trace_key, trace, layer))

    def blob() -> torch.Tensor:
        fractions = maps[layer] / top[layer]
        data = payload.quantise(fractions).astype("<u2").tobytes() if short else payload.deflated_layer(fractions)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    return CACHE.get(("map-layer", key, token, *fr.trace_key, layer), blob).numpy().tobytes()


def plane(maps: torch.Tensor, sel: dict[str, Any], keep: list[int], rows_sum_to_one: bool) -> torch.Tensor:
    """The map the one-head view shows, in the measure's own units: the head (or the head average) of the layer,
    cut to the kept positions, rows renormalised where the measure's rows sum to 1."""
    heads = maps[sel["layer"]]  # (H, T, T)
    w = heads.mean(0) if sel["avg"] or heads.shape[0] == 1 else heads[sel["head"]]
    if len(keep) < w.shape[-1]:
        index = torch.tensor(keep)
        w = w[index][:, index]
        if rows_sum_to_one:
            w = w / w.sum(-1, keepdim=True).clamp(min=torch.finfo(w.dtype).tiny)
    return w


def kept(trace: encoder.Trace, hide: bool) -> list[int]:
    """The positions shown: all, or all but the model's special tokens (all again if nothing else is left)."""
    specials = set(trace.special_positions) if hide else set()
    keep = [i for i in range(trace.seq_len) if i not in specials]
    return keep or list(range(trace.seq_len))


def special_shares(fr: Any, key: str, token: int | None) -> list[float] | None:
    """measures.special_share of a measure's maps (per layer), cached per trace; None where the measure refuses."""
    def compute() -> torch.Tensor:
        trace = get_trace(*fr.trace_key)
        maps = Maps(layers=trace.attention.mean(1)) if key == "raw" else measures.get_maps(fr, key, token)
        return special_share(maps, trace.special_positions)

    try:
        return [round(float(x), 4) for x in CACHE.get(("map-share", key, token, *fr.trace_key), compute)]
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------ the payload
def order(sel: dict[str, Any], keys: list[str], num_layers: int) -> list[tuple[str, int, bool]]:
    """(measure, layer, needed now) in the order they ship: what the view draws first, then the other layers
    nearest the chosen one, the chosen measure before raw attention."""
    main, layer, view = sel["measure"], sel["layer"], sel["view"]
    need = {(main, n) for n in range(num_layers)} if view == "model" else {(main, layer)}
    if view == "head" and sel["beside"] and main != "raw":
        need.add(("raw", layer))
    out = [(key, n, True) for key in keys for n in payload.nearest_first(layer, num_layers) if (key, n) in need]
    out += [(key, n, False) for n in payload.nearest_first(layer, num_layers) for key in keys if (key, n) not in need]
    return out


def header_base(fr: Any, trace: encoder.Trace, sel: dict[str, Any], tag: str) -> dict[str, Any]:
    """What the browser needs besides the maps: tokens and labels, special positions, the measures, file names."""
    return dict(
        v=3, id=fr.trace_id, T=trace.seq_len, L=trace.num_layers, H=trace.num_heads, tokens=trace.labels,
        labels=[printable(t, 16) for t in trace.labels], specials=list(trace.special_positions),
        sentence=f"“{printable(' '.join(trace.text.split()), 90)}”",
        specialNames=list(dict.fromkeys(trace.tokens[i] for i in trace.special_positions)), sel=sel,
        present=fr.present, train=bool(trace.train), stops=stops(),
        names=dict(model=export.safe_filename(tag, 40), words=export.sentence_words(trace)),
        measures=[dict(key=m.key, label=m.label, describe=m.describe, perHead=m.per_head, needsToken=m.needs_token,
                       cumulative=m.cumulative, rows1=m.rows_sum_to_one) for m in MEASURES.values()],
    )


def stops() -> list[list[float]]:
    """The attention colour scale as [position, r, g, b] stops: the ones the plotly maps use."""
    out = []
    for at, colour in style.colorscale(style.ATTENTION_SCALE):
        r, g, b = (float(v) for v in colour.strip().removeprefix("rgb(").removesuffix(")").split(","))
        out.append([float(at), r, g, b])
    return out


def data(fr: Any, trace: encoder.Trace, sel: dict[str, Any], tag: str, held: dict[str, Any] | None,
         progress: Progress | None = None) -> bytes:
    """The component's payload: the header, then what the browser lacks of what the view draws now, then the
    one-head view's exact map unless the browser has it. held: the browser's last report of what it holds, or None
    for a map that holds nothing yet: it also gets the other layers of the chosen measure and raw attention, nearest
    the chosen layer first, up to LIMIT bytes (so most switches need no run at all)."""
    header = header_base(fr, trace, sel, tag)
    token = token_of(sel)
    keys = [sel["measure"]] + (["raw"] if sel["measure"] != "raw" else [])
    stacks, refused = {}, {}
    for key in keys:
        try:
            stacks[key] = stack(fr, key, token if key == sel["measure"] else None, progress)
        except ValueError as err:
            refused[key] = str(err)
    have = (held or {}).get("stacks", {})
    parts, infos, size = [], [], 0
    chosen: dict[str, list[tuple[int, bytes]]] = {k: [] for k in stacks}
    for key, layer, needed in order(sel, list(stacks), trace.num_layers):
        if key not in stacks:
            continue
        sid = stack_id(fr, key, token if key == sel["measure"] else None)
        if layer in have.get(sid, ()):
            continue
        if not needed and (held is not None or size >= LIMIT):
            continue  # after the first payload only what the view needs: a settled run stays small
        blob = layer_blob(fr, key, token if key == sel["measure"] else None, *stacks[key], layer)
        if not needed and size + len(blob) > LIMIT:
            continue
        chosen[key].append((layer, blob))
        size += len(blob)
    for key, layers in chosen.items():
        if not layers:
            continue
        maps, top = stacks[key]
        tok = token if key == sel["measure"] else None
        sub = dict(id=stack_id(fr, key, tok), L=trace.num_layers, H=maps.shape[1], T=trace.seq_len,
                   layers=[n for n, _ in layers], top=top, rows=None if tok is None else [tok])
        if trace.seq_len <= payload.FULL_UP_TO:
            sub |= dict(bits=16, zipped=None)
        else:
            sub |= dict(bits=8, zipped=[len(b) for _, b in layers])
        parts.append(payload.encode(sub, b"".join(b for _, b in layers)))
        infos.append(dict(kind="stack", key=key))
    if sel["view"] == "head" and sel["measure"] in stacks and (held or {}).get("exact") != exact_key(sel):
        keep = kept(trace, sel["hide_special"])
        exact = plane(stacks[sel["measure"]][0], sel, keep, MEASURES[sel["measure"]].rows_sum_to_one)
        digits = payload.digits(exact)
        parts.append(payload.encode(dict(key=exact_key(sel), K=len(keep), zipped=[len(digits)]), digits))
        infos.append(dict(kind="exact", key=exact_key(sel)))
    # The note's measures, in its order; the comparison measure past FULL_UP_TO tokens only once computed (75 MB).
    comparison = [SHARED_WITH] if trace.seq_len <= payload.FULL_UP_TO or measures.cached(fr, SHARED_WITH) else []
    named = dict.fromkeys(["raw", *comparison, sel["measure"]])
    header |= dict(parts=infos, zipped=[len(p) for p in parts], refused=refused, heldFor=(held or {}).get("nonce"),
                   shares={k: special_shares(fr, k, token if k == sel["measure"] else None) for k in named})
    return payload.encode(header, b"".join(parts))


@dataclasses.dataclass(frozen=True)
class Keyed:
    """A frame reduced to its trace's cache key: what a download built later may hold (never the trace itself)."""

    trace_key: tuple[str, str, str, bool]


def table(trace_key: tuple[str, str, str, bool], sel: dict[str, Any]) -> pd.DataFrame:
    """The one-head view's map of a measure as a long table (query and key position and token, value), for CSV."""
    fr = Keyed(trace_key)
    trace = get_trace(*trace_key)
    maps, _ = stack(fr, sel["measure"], token_of(sel))
    keep = kept(trace, sel["hide_special"])
    values = plane(maps, sel, keep, MEASURES[sel["measure"]].rows_sum_to_one).double().numpy()
    rows = range(len(keep)) if token_of(sel) is None else [i for i, p in enumerate(keep) if p == sel["query"]]
    tokens = trace.tokens
    return pd.DataFrame([{"query_position": keep[i], "query_token": tokens[keep[i]], "key_position": keep[j],
                          "key_token": tokens[keep[j]], "value": float(values[i, j])}
                         for i in rows for j in range(len(keep))])


# ------------------------------------------------------------------------------------------------ the pick
def held_now(fr: Any) -> dict[str, Any] | None:
    """What the browser holds for this trace, as its last pick said; None when the map was not on the page in the
    last run (a fresh mount holds nothing) or the trace changed."""
    held = st.session_state.get(HELD)
    if KEY not in st.session_state or not isinstance(held, dict) or held.get("id") != fr.trace_id:
        return None
    return held


def take_pick() -> None:
    """The map's pick into the store (the settings a person changed in the browser) and what the browser holds
    into the session; anything malformed is ignored (a pick from the browser is not trusted)."""
    result = st.session_state.get(KEY)
    pick = result.get("pick") if result is not None else None
    if not isinstance(pick, dict):
        return
    for name in PICKED_INTS:
        if payload.in_range(pick.get(name), name):
            state.put(name, pick[name])
    for name in PICKED_FLAGS:
        if isinstance(pick.get(name), bool):
            state.put(name, pick[name])
    for name in PICKED_CHOICES:
        value = pick.get(name)
        if isinstance(value, str) and value in SETTINGS[name].options and (name != "view" or value in VIEWS):
            state.put(name, value)
    held = clean_held(pick.get("held"))
    if held is not None:
        st.session_state[HELD] = held


def clean_held(held: Any) -> dict[str, Any] | None:
    """A browser's report of what it holds, checked: {"id": str, "nonce": str, "stacks": {id: [layers]}, "exact": str}."""
    if not isinstance(held, dict) or not isinstance(held.get("id"), str) or not isinstance(held.get("stacks"), dict):
        return None
    stacks = {str(k)[:200]: [n for n in v if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1024]
              for k, v in list(held["stacks"].items())[:64] if isinstance(v, list)}
    exact = held.get("exact")
    nonce = held.get("nonce")
    return dict(id=held["id"][:64], stacks=stacks, exact=exact[:200] if isinstance(exact, str) else None,
                nonce=nonce[:64] if isinstance(nonce, str) else None)


# ------------------------------------------------------------------------------------------------ drawing
def show(fr: Any, trace: encoder.Trace, view: str, tag: str, status: Any) -> dict[str, Any]:
    """Draw the map for the store's choices; return them (the downloads below read them). `status`: a placeholder
    below the map for a measure's progress (the map's own place on the page never moves, so it is never remounted)."""
    sel = selection(trace, view)
    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        text = f"Computing {MEASURES[sel['measure']].label}: {done} of {total}"
        bar = status.progress(min(1.0, done / max(total, 1)), text=text) if bar is None else bar.progress(
            min(1.0, done / max(total, 1)), text=text)

    body = data(fr, trace, sel, tag, held_now(fr), progress)
    status.empty()
    _mount(key=KEY, data=body, on_pick_change=take_pick, width="stretch", height="content")
    return sel

