"""One byte-bounded cache for every tensor the server keeps: models, traces, variants, checks and training runs.

Sessions hold keys (their settings), never models or traces, so this cache is the only owner of the tensors:
what it evicts is freed at once, however many tabs are open or were closed. Its budget is twice the operator's
per-model budget (ENCODER_EXPLORER_MEMORY_MB), so the largest model allowed and its trace always fit.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import torch
from _plotly_utils.basevalidators import is_homogeneous_array
from _plotly_utils.utils import is_skipped_key, to_typed_array_spec
from torch import nn

from encoder.viz.style import QuickFigure

from .resources import budget_bytes

CACHE_FACTOR = 2  # the cache may hold twice the per-model budget


def nbytes(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of the tensors (and DataFrames) reachable from obj; shared storage is counted once."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in seen:
            return 0
        seen.add(ptr)
        return storage.nbytes()
    if isinstance(obj, nn.Module):
        return sum(nbytes(t, seen) for t in (*obj.parameters(), *obj.buffers()))
    if isinstance(obj, pd.DataFrame):
        return int(obj.memory_usage(deep=True).sum())
    if isinstance(obj, dict):
        return sum(nbytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(nbytes(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    return 0


class ByteCache:
    """A least-recently-used cache bounded by the bytes of its values; one computation per key at a time."""

    def __init__(self, budget: Callable[[], int]):
        self._budget = budget
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value for key, computing it (once, even with concurrent callers) when absent."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            with self._lock:
                if key in self._items:  # another session computed it while we waited
                    self._items.move_to_end(key)
                    return self._items[key][0]
            try:
                value = compute()
                self.put(key, value)  # cached before the key stops being busy: a late caller finds it
            finally:
                with self._lock:
                    self._busy.pop(key, None)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        size = nbytes(value)
        evicted = False
        with self._lock:
            self._items.pop(key, None)
            limit = self._budget()
            while self._items and self.total + size > limit:
                self._items.popitem(last=False)
                evicted = True
            self._items[key] = (value, size)
        if evicted:
            gc.collect()  # anything a cycle kept alive goes now, not at a full collection that may never come

    def peek(self, key: Hashable) -> Any | None:
        with self._lock:
            item = self._items.get(key)
            return None if item is None else item[0]

    @property
    def total(self) -> int:
        return sum(size for _, size in self._items.values())

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
        gc.collect()


CACHE = ByteCache(lambda: CACHE_FACTOR * budget_bytes())


_ATOMS = (str, int, float, bool, type(None))


def plain_copy(value: Any) -> Any:
    """What plotly.py's BaseFigure.to_dict makes of one of a figure's property values (a deep copy, then every
    homogeneous array outside the skipped keys encoded as a typed-array spec, convert_to_base64), in one pass that
    copies only the dicts and lists: strings and numbers are shared, not copied, and an array is encoded from the
    figure's own (to_typed_array_spec copies it first). deepcopy's bookkeeping for every string of a figure's labels
    was most of the cost of the first draw of a figure (~4 ms of a head's three figures' 12 ms to_dict)."""
    if isinstance(value, _ATOMS):
        return value
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            if isinstance(v, _ATOMS):
                out[k] = v
            elif is_skipped_key(k):
                out[k] = copy.deepcopy(v)
            elif type(v) not in (dict, list) and is_homogeneous_array(v):
                out[k] = to_typed_array_spec(copy.deepcopy(v))
            else:
                out[k] = plain_copy(v)
        return out
    if type(value) is list:
        return [plain_copy(v) for v in value]
    if type(value) is tuple:  # convert_to_base64 walks a tuple's dicts too (it cannot replace its arrays)
        return tuple(plain_copy(v) if type(v) in (dict, list, tuple) or isinstance(v, _ATOMS) else copy.deepcopy(v)
                     for v in value)
    return copy.deepcopy(value)  # anything else (an array in a list, a date) as deepcopy makes it, unconverted


class KeptFigure(QuickFigure):
    """A plotly figure kept beside a cached object (Beside) and drawn in every run of every session; nothing changes it
    once it is kept. st.plotly_chart calls to_dict() on every draw, which in plotly.py deep-copies the figure and
    encodes every array as base64 again: a kept figure makes that dict once, with plain_copy (the same dict, made
    faster), and a QuickFigure nothing has read makes it from its own dicts without ever building plotly.py's objects
    (the same JSON, perhaps with keys in another order). What plotly.io.to_json does to the dict afterwards (drop
    trace uids) does not change it."""

    _kept_dict: dict | None = None

    def to_dict(self) -> dict:
        if self._kept_dict is None:
            plain = self.plain()  # a QuickFigure never read: its own dicts, its plotly.py objects never built
            if plain is not None:
                self._kept_dict = {"data": plain_copy(plain[0]), "layout": plain_copy(plain[1])}
            else:
                kept = {"data": plain_copy(self._data), "layout": plain_copy(self._layout)}
                if self._frame_objs:
                    kept["frames"] = plain_copy([frame._props for frame in self._frame_objs])
                self._kept_dict = kept
        return self._kept_dict


def keepable(value: Any) -> Any:
    """value, a plotly figure made a KeptFigure in place (no copy: a KeptFigure is a go.Figure, or a QuickFigure whose
    objects are not built yet, with one method more)."""
    if type(value) in (go.Figure, QuickFigure):
        value.__class__ = KeptFigure
    return value


class Beside:
    """What is drawn from a cached object that never changes (a trace's figures, a chart's), kept beside it.

    Built once per (object, key) and shared by every session and rerun; held by the object's identity, so it goes
    when the object leaves CACHE and nothing else holds it. The key must name everything the value depends on
    besides the object (layer, tap, presentation mode...). At most `per_owner` values per object, the least recently
    used going first, so a class clicking through every layer and tap of a long sentence cannot grow it unbounded.
    """

    def __init__(self, per_owner: int = 64) -> None:
        self.per_owner = per_owner
        self._items: dict[int, tuple[weakref.ref, OrderedDict[Hashable, Any]]] = {}
        self._lock = threading.Lock()

    def _values(self, owner: Any) -> OrderedDict[Hashable, Any]:
        held = self._items.get(id(owner))
        if held is None or held[0]() is not owner:  # none yet, or an earlier object's that had the same id
            ref = weakref.ref(owner, functools.partial(self._forget, id(owner)))
            held = self._items[id(owner)] = (ref, OrderedDict())
        return held[1]

    def _forget(self, at: int, gone: weakref.ref) -> None:
        """The object at id `at` was freed: drop what was kept beside it (not a later object's at the same id). No
        lock: this runs wherever the last reference went, possibly inside get()."""
        held = self._items.get(at)
        if held is not None and held[0] is gone:
            self._items.pop(at, None)

    def get(self, owner: Any, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            values = self._values(owner)
            if key in values:
                values.move_to_end(key)
                return values[key]
        value = keepable(compute())  # outside the lock: two sessions may both build it the first time, one is kept
        with self._lock:
            values = self._values(owner)
            kept = values.setdefault(key, value)
            while len(values) > self.per_owner:
                values.popitem(last=False)
            return kept

    def __len__(self) -> int:
        return sum(len(values) for _, values in self._items.values())


BESIDE = Beside()
