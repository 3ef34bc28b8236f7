"""What the model uses, beside raw attention: token-to-token measures from one traced forward pass, in one registry.

A measure maps a (model, trace) to how much each position takes from each token, per layer: row i of layer l's map
is position i (after layer l), column j a token. Per-layer measures look inside layer l alone (j is a position
entering that layer); cumulative ones reach back through layers 0..l to the input tokens. Every measure here is
computed from the model's own modules and the trace's taps; none changes the shared model.

The app's Measure choice, the head view's lines and the faithfulness chart all read MEASURES; adding a measure is
one `register(Measure(...))` call in the module that computes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from ..model import Encoder
from ..trace import Trace
from .embeddings import attention_rollout


@dataclass(frozen=True)
class Maps:
    """One measure's numbers for one trace."""

    layers: Tensor  # (L, T, T): row i, column j; non-negative
    heads: Tensor | None = None  # (L, H, T, T) where the measure has a per-head form, else None
    rows: tuple[int, ...] | None = None  # the rows computed, when not all of them (e.g. flow for one token)


@dataclass(frozen=True)
class Measure:
    """A registered measure: how it is named, what it says about itself, and how it is computed."""

    key: str  # its value in the URL and the settings table
    label: str  # its name on screen
    describe: str  # one true sentence: what it includes and what it ignores
    compute: Callable[..., Maps]  # compute(model, trace, **options) -> Maps
    per_head: bool = False  # Maps.heads is set: the one-head map, the grid and the model view can show it
    cumulative: bool = False  # layer l's map reaches back through layers 0..l to the input tokens
    rows_sum_to_one: bool = True
    needs_token: bool = False  # computed for one chosen output token only (compute(..., token=i))


MEASURES: dict[str, Measure] = {}


def register(measure: Measure) -> Measure:
    """Add a measure to the registry (each key once)."""
    if measure.key in MEASURES:
        raise ValueError(f"A measure named {measure.key!r} is already registered.")
    MEASURES[measure.key] = measure
    return measure


def _raw(model: Encoder, trace: Trace) -> Maps:
    return Maps(layers=trace.attention.mean(1), heads=trace.attention)


def _rollout(model: Encoder, trace: Trace) -> Maps:
    return Maps(layers=attention_rollout(trace.attention))


register(Measure("raw", "Raw attention", "The softmax weights alone: they ignore how long each value vector is, the "
                 "residual path, LayerNorm and the feed-forward sub-layer.", _raw, per_head=True))
register(Measure("rollout", "Rollout", "Head-averaged attention mixed half and half with the residual path and "
                 "multiplied through the layers: it ignores the values, W_O, LayerNorm and the feed-forward sub-layer.",
                 _rollout, cumulative=True))
