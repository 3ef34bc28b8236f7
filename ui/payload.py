"""The attention payload: what the browser components (the head view, the one-head map) get from the app.

One binary format, decoded by one function (`decode` in ui/component_base.js):

    [uint32 LE header length][header JSON][zero padding to a multiple of 8][body][tail]

The header holds the tokens, the sizes, the shipped layers and the chosen view (`sel`). Up to FULL_UP_TO tokens the
body is every layer x head as uint16 weights (steps of 1/65535, so a weight shown to 4 decimals is exact). Longer
inputs ship 8-bit weights (steps of 1/255: within 1/510, which the views say as "± 0.002"), each layer deflated on
its own (mostly zeros: about 0.5 MB a layer at 512 tokens instead of 3.1 MB), as many layers as fit in SHIP_LIMIT,
nearest the chosen one first. A component may add a tail after the body (the map adds its head's float32 weights).

Also here: the per-trace caches of the quantised and deflated layers (in the byte-bounded CACHE), the store's
selection moved into a trace's range, and `store_pick`, which writes a component's settled pick into the store.
"""

from __future__ import annotations

import json
import struct
import threading
import zlib
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import streamlit as st
import torch

import encoder

from . import state
from .caches import CACHE
from .settings import SETTINGS

FULL_UP_TO = 128  # tokens up to which all layers ship at once: 6 x 12 x 128 x 128 x 2 bytes = 2.4 MB for MiniLM
LEVELS = 65535  # weights travel as round(w * LEVELS) in a uint16
LEVELS_8 = 255  # past FULL_UP_TO tokens: round(w * LEVELS_8) in a uint8, so within 1/510 of the trace
SHIP_LIMIT = 4_000_000  # deflated bytes of 8-bit layers shipped at once past FULL_UP_TO (6 layers at 512: 2.2 MB)
ZLIB_LEVEL = 6  # 8-bit layers at 512 tokens: 2.2 MB in 0.15 s a layer (level 1: 3.2 MB in 0.07 s), once per trace
DIGITS = 10_000  # an exact map travels as round(value * DIGITS): the four decimals the views print, exactly

TraceKey = tuple[str, str, str, bool]  # Frame.trace_key: (model key, device, sentence, training mode)


def quantise(attention: torch.Tensor, levels: int = LEVELS) -> np.ndarray:
    """Attention weights in [0, 1] (any shape) as little-endian steps of 1/levels (uint16, or uint8 for
    LEVELS_8); error <= 0.5/levels."""
    if levels <= 255:  # float32 and round-half-up: 6 layers at 512 tokens in ~0.2 s, not 1.4 s
        return (attention.float().clamp(0, 1) * levels + 0.5).to(torch.uint8).numpy()
    return torch.round(attention.double().clamp(0, 1) * levels).to(torch.int32).numpy().astype("<u2")  # exact halves


def encode(header: dict[str, Any], body: bytes | np.ndarray) -> bytes:
    """[uint32 LE header length][header JSON][zero padding to a multiple of 8][body: uint16 LE weights, or the
    deflated 8-bit layers one after another (their sizes in header["zipped"])]."""
    head = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    pad = -(4 + len(head)) % 8
    if isinstance(body, np.ndarray):
        body = body.astype("<u2", copy=False).tobytes()
    return struct.pack("<I", len(head)) + head + b"\0" * pad + body


def decode(data: bytes) -> tuple[dict[str, Any], bytes]:
    """encode() read back: the header, and the body after the padding."""
    n = struct.unpack("<I", data[:4])[0]
    return json.loads(data[4:4 + n]), data[4 + n + (-(4 + n) % 8):]


def deflated_layer(attention: torch.Tensor) -> bytes:
    """One layer's (H, T, T) weights as 8-bit steps, deflated (zlib format: the browser's DecompressionStream)."""
    return zlib.compress(quantise(attention, LEVELS_8).tobytes(), ZLIB_LEVEL)


def digits(plane: torch.Tensor) -> bytes:
    """A non-negative map (any shape) as round(value * DIGITS) in uint32, its four byte planes low to high, deflated.

    float32 times 10^4 is exact in float64, so rint gives the four decimals Python's and the views' formatting
    print (round half to even on the float32 value): the browser shows exactly those. About 0.17 MB for a
    512 x 512 head, where its float32 weights are 1 MB.
    """
    n = np.rint(np.clip(plane.detach().double().cpu().numpy() * DIGITS, 0, 2**32 - 1)).astype("<u4")
    return zlib.compress(n.view(np.uint8).reshape(-1, 4).T.tobytes(), ZLIB_LEVEL)


def nearest_first(layer: int, num_layers: int) -> list[int]:
    """Every layer, the chosen one first, then by distance (the next one before the previous one)."""
    return sorted(range(num_layers), key=lambda n: (abs(n - layer), n < layer))


def build(trace: encoder.Trace, sel: dict[str, Any], *, name: str, present: bool = False, trace_id: str = "",
          weights: np.ndarray | None = None, deflated: Callable[[int], bytes | None] | None = None,
          stack: torch.Tensor | None = None, held: Collection[int] = ()) -> bytes:
    """The components' data: tokens, sizes and the chosen view in the header, then the shipped layers' weights.

    sel: {"layer", "head", "avg", "query"} and whatever else the component reads. Up to FULL_UP_TO tokens: all
    layers as uint16 (weights: quantise() of them if already computed). Longer: 8-bit deflated layers, nearest the
    chosen one first, while they fit in SHIP_LIMIT (the chosen one always); deflated(layer) gives one layer's bytes
    (default: deflated_layer), or None to leave that layer out.
    stack: what to ship instead of trace.attention, any non-negative (L, H, T, T) or (L, T, T) map (a measure's
    Maps.heads or Maps.layers); a layer whose values pass 1 ships as fractions of its largest, named in
    header["top"]. Its trace_id must name the stack too: the browser keeps what it holds while the id stays.
    held: the layers the browser said it holds of this id (its last pick): they are not sent again (up to
    FULL_UP_TO tokens, where every layer travels at once, nothing is sent when it holds them all).
    """
    maps = trace.attention if stack is None else stack
    if maps.dim() == 3:
        maps = maps.unsqueeze(1)  # (L, 1, T, T): a map without heads
    L, H, T = maps.shape[0], maps.shape[1], maps.shape[-1]
    # tokens: as the figures label them (byte-level BPE's "Ġthe" as "▁the"); special: the positions Hide leaves out
    header = dict(v=2, id=trace_id or f"{trace.text!r}:{trace.seq_len}", T=T, L=L, H=H, tokens=trace.labels,
                  special=list(trace.special_positions), sel=sel, name=name, present=present)
    if stack is not None:  # attention needs no check: softmax weights lie in [0, 1]
        maps, top = _fractions(maps)
        if top is not None:
            header["top"] = top
    if T <= FULL_UP_TO:
        if set(range(L)) <= set(held):
            return encode(header | dict(layers=[], bits=16, zipped=None), b"")
        header |= dict(layers=list(range(L)), bits=16, zipped=None)
        return encode(header, quantise(maps) if weights is None else weights)
    deflated = deflated or (lambda n: deflated_layer(maps[n]))
    layers, chunks, size = [], [], 0
    for n in nearest_first(sel["layer"], L):
        if n in held:
            continue
        chunk = deflated(n)
        if chunk is None:  # not at hand (still being prepared): the browser asks for it if it is needed
            continue
        if layers and size + len(chunk) > SHIP_LIMIT:
            break
        layers.append(n)
        chunks.append(chunk)
        size += len(chunk)
    header |= dict(layers=layers, bits=8, zipped=[len(c) for c in chunks])
    return encode(header, b"".join(chunks))


def _fractions(maps: torch.Tensor) -> tuple[torch.Tensor, list[float] | None]:
    """(L, H, T, T) maps in [0, 1], and each layer's top value when some layer passes 1 (else None)."""
    if not torch.isfinite(maps).all() or (maps < 0).any():
        raise ValueError("Only finite, non-negative maps can be shown as maps: this measure has negative or "
                         "missing values.")
    top = maps.flatten(1).amax(1).clamp(min=1.0)  # (L,)
    if bool((top == 1).all()):
        return maps, None
    return maps / top.view(-1, 1, 1, 1), top.tolist()


def selection(trace: encoder.Trace) -> dict[str, Any]:
    """The store's layer, head, head-average flag, several heads and query token, moved into this trace's range."""
    state.put("heads", several_heads(state.get("heads"), trace.num_heads))
    return dict(layer=state.fit("layer", lo=0, hi=trace.num_layers - 1),
                head=state.fit("head", options=range(trace.num_heads)),
                avg=bool(state.get("avg")), heads=state.get("heads"),
                query=state.fit("query", lo=0, hi=trace.seq_len - 1))


def several_heads(text: Any, num_heads: int) -> str:
    """The head view's "Several heads" as the URL keeps them: distinct heads of this model, ascending, comma-separated
    ("" for one head or the average). What is not a head of this model (from a link or a pick) is left out."""
    parts = text.split(",") if isinstance(text, str) else []
    picked = {int(p) for p in (q.strip() for q in parts) if p.isascii() and p.isdigit() and len(p) <= 4
              and int(p) < num_heads}
    return ",".join(str(h) for h in sorted(picked))


# ------------------------------------------------------------------------------------------------ per-trace caches
def uint16_weights(key: TraceKey, trace: encoder.Trace) -> np.ndarray:
    """quantise(trace.attention) as (L, H, T, T) uint16, computed once per trace."""
    # Kept as an int16 tensor so the byte-bounded cache counts it.
    cached = CACHE.get(("headview", *key), lambda: torch.from_numpy(quantise(trace.attention).view(np.int16)))
    return cached.numpy().view("<u2")


def layer_bytes(key: TraceKey, trace: encoder.Trace, layer: int) -> bytes:
    """deflated_layer(trace.attention[layer]), computed once per trace and layer."""
    # Cached as a tensor so the byte-bounded cache counts it; a rerun (e.g. after a pick) deflates nothing again.
    return CACHE.get(("headview8", *key, layer),
                     lambda: torch.frombuffer(bytearray(deflated_layer(trace.attention[layer])), dtype=torch.uint8)
                     ).numpy().tobytes()


def layer_at_hand(key: TraceKey, trace: encoder.Trace, chosen: int, layer: int) -> bytes | None:
    """The chosen layer's bytes (computed if need be); another layer's only if already deflated."""
    if layer == chosen:
        return layer_bytes(key, trace, layer)
    cached = CACHE.peek(("headview8", *key, layer))
    return None if cached is None else cached.numpy().tobytes()


_PREPARING: set[tuple] = set()  # traces whose layers a background thread is deflating


def _prepare(key: TraceKey, trace: encoder.Trace) -> None:
    """Deflate every layer in the background, so a layer switch finds its layer (and neighbours) ready."""
    if key in _PREPARING:
        return
    _PREPARING.add(key)

    def work() -> None:
        try:
            for n in range(trace.num_layers):
                layer_bytes(key, trace, n)
        finally:
            _PREPARING.discard(key)

    threading.Thread(target=work, name="headview-prepare", daemon=True).start()


def ships_all(fr: Any, trace: encoder.Trace) -> bool:
    """Whether every layer of the trace is in the browser at once (else a layer switch may ask the app)."""
    if trace.seq_len <= FULL_UP_TO:
        return True
    key, size = fr.trace_key, 0
    for n in nearest_first(selection(trace)["layer"], trace.num_layers):
        size += len(layer_bytes(key, trace, n))
        if size > SHIP_LIMIT:
            _prepare(key, trace)
            return False
    return True


# ------------------------------------------------------------------------------------------------ the pick
def in_range(value: Any, key: str) -> bool:
    """Whether value is a whole number within the setting's range (a pick from the browser is not trusted)."""
    s = SETTINGS[key]
    return isinstance(value, int) and not isinstance(value, bool) and s.lo <= value <= s.hi


def held_key(component_key: str) -> str:
    """Where the session keeps what a component's browser view said it holds in its last pick."""
    return f"{component_key}:held"


def clean_held(held: Any) -> dict[str, Any] | None:
    """A view's report of the layers it holds, checked: {"id": str, "layers": [int]}; None if it is anything else."""
    if not isinstance(held, dict) or not isinstance(held.get("id"), str) or not isinstance(held.get("layers"), list):
        return None
    return dict(id=held["id"][:200], layers=sorted({n for n in held["layers"][:1024] if type(n) is int and n >= 0}))


def held_layers(component_key: str, trace_id: str) -> frozenset[int]:
    """The layers a component's browser view holds of `trace_id`, as its last pick said: none when the view was not
    on the page in the last run (a view mounted anew holds nothing) or held another trace or stack."""
    held = st.session_state.get(held_key(component_key))
    if component_key not in st.session_state or not isinstance(held, dict) or held.get("id") != trace_id:
        return frozenset()
    return frozenset(held["layers"])


def store_pick(component_key: str, fetching: bool = False) -> None:
    """A component's pick (layer, head, avg, heads, query) into the store; anything malformed is ignored.

    Where the view asks for layers (fetching), a pick with need=true reruns only the view's fragment, to bring the
    layer; the settled choice then reruns the app, so the rest of the page follows it.
    """
    result = st.session_state.get(component_key)
    pick = result.get("pick") if result is not None else None
    if not isinstance(pick, dict):
        return
    for name in ("layer", "head", "query"):
        if in_range(pick.get(name), name):
            state.put(name, pick[name])
    if isinstance(pick.get("avg"), bool):
        state.put("avg", pick["avg"])
    if isinstance(pick.get("heads"), str):  # the head view's; checked against the model when next drawn (selection)
        state.put("heads", several_heads(pick["heads"], SETTINGS["head"].hi + 1))
    st.session_state[held_key(component_key)] = clean_held(pick.get("held"))
    if fetching and pick.get("need") is not True:
        st.rerun()
