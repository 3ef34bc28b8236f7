"""The measures of what the model uses (encoder/analysis/measures.py) for the frame's trace, cached per trace.

Every measure is computed once per (trace, measure, token) and kept in the byte-bounded cache, so switching the
measure back and forth, or another session asking for the same sentence, computes nothing again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from encoder.analysis.measures import MEASURES, Maps, Measure

from . import Frame, get_model, get_trace
from .caches import CACHE
from .priority import behind

Progress = Callable[[int, int], None]


def measure(key: str) -> Measure:
    """The registered measure called `key`; ValueError names the ones there are."""
    if key not in MEASURES:
        raise ValueError(f"There is no measure called {key!r}; choose one of {', '.join(MEASURES)}.")
    return MEASURES[key]


def get_maps(fr: Frame, key: str, token: int | None = None, progress: Progress | None = None) -> Maps:
    """The measure's maps for the frame's trace (token: the output position, for measures computed for one token)."""
    m = measure(key)
    token = token if m.needs_token else None
    options = {"token": token} if m.needs_token else {}
    if progress is not None and _takes_progress(m):
        options["progress"] = progress
    model_key, device = fr.trace_key[:2]
    return CACHE.get(("measure", key, token, *fr.trace_key), lambda: behind(
        lambda: m.compute(get_model(model_key, device), get_trace(*fr.trace_key), **options)))


def cached(fr: Frame, key: str, token: int | None = None) -> bool:
    """Whether the measure's maps for the frame's trace are already computed (switching to it costs nothing)."""
    token = token if measure(key).needs_token else None
    return CACHE.peek(("measure", key, token, *fr.trace_key)) is not None


def _takes_progress(m: Measure) -> bool:
    return "progress" in inspect.signature(m.compute).parameters
