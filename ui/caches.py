"""One byte-bounded cache for every tensor the server keeps: models, traces, variants, checks and training runs.

Sessions hold keys (their settings), never models or traces, so this cache is the only owner of the tensors:
what it evicts is freed at once, however many tabs are open or were closed. Its budget is twice the operator's
per-model budget (ENCODER_EXPLORER_MEMORY_MB), so the largest model allowed and its trace always fit.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import pandas as pd
import torch
from torch import nn

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
