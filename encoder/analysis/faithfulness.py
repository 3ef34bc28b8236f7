"""Does a measure predict what the model does? Deletion and insertion curves (DeYoung et al. 2020, ERASER).

For one target (attribution.Target), each measure ranks the sentence's words; the words are then replaced, most
important first, by the vocabulary's mask token ([PAD] where there is none) and the target is recomputed:
deletion removes the top k, insertion keeps only the top k. Special tokens ([CLS], [SEP]) are never removed. A
faithful ranking makes the deletion curve fall fast (low area) and the insertion curve rise fast (high area).
A seeded random order is the baseline every measure should beat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from ..model import Encoder
from ..trace import Trace, model_device
from .attribution import (
    METHODS,
    Progress,
    Target,
    attribute,
    batch_size,
    check_target,
    objective,
    removable,
    removal_token,
    replaced,
)
from .measures import MEASURES, Maps

POINTS = 11  # curve points at most: every 10 % of the words; a short sentence gets one point per word


def ranking_scores(maps: Maps, target: Target) -> Tensor:
    """How a token-to-token measure scores the input tokens for a target, (T,): the one rule for every measure.

    The last layer's map is read (for a cumulative measure it reaches back to the input tokens; for a per-layer
    measure its columns are the positions entering the last layer), at the rows the target reads: row i for
    token i, row 0 for [CLS] pooling, the mean of all rows for mean pooling (which averages every position).
    """
    rows = target.rows(maps.layers.shape[-1])
    if maps.rows is not None and not set(rows) <= set(maps.rows):
        raise ValueError("This measure was computed for other tokens than the target reads; compute it for "
                         f"position{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:5]))}.")
    return maps.layers[-1].double()[list(rows)].mean(0).float()


@dataclass(frozen=True)
class Scores:
    """Every ranking for one target: scores (T,) by key, their labels, and what was left out and why."""

    scores: dict[str, Tensor]
    labels: dict[str, str]
    skipped: dict[str, str]


def all_scores(model: Encoder, trace: Trace, target: Target, measures: tuple[str, ...] | None = None,
               methods: tuple[str, ...] = tuple(METHODS), maps: Mapping[str, Maps] | None = None,
               progress: Progress | None = None, **options) -> Scores:
    """The registry's measures (ranked by ranking_scores) and the attribution methods for one target.

    `maps` passes measures already computed for this trace; options (steps=) go to the methods. A measure that
    needs one token is computed for the target's row when it reads one row, else skipped with the reason.
    """
    check_target(model, trace, target)
    scores, labels, skipped = {}, {}, {}
    rows = target.rows(trace.seq_len)
    for key in MEASURES if measures is None else measures:
        if key not in MEASURES:
            raise ValueError(f"No measure is registered as {key!r}; choose from {', '.join(MEASURES)}.")
        measure = MEASURES[key]
        labels[key] = measure.label
        if maps is not None and key in maps:
            computed = maps[key]
        elif measure.needs_token and len(rows) != 1:
            skipped[key] = f"{measure.label} is computed for one token; mean pooling reads every token."
            continue
        else:
            try:  # a measure that refuses this sentence (too long, say) is left out with its own sentence
                computed = measure.compute(model, trace, **({"token": rows[0]} if measure.needs_token else {}))
            except ValueError as err:
                skipped[key] = str(err)
                continue
        scores[key] = ranking_scores(computed, target)
    for key in methods:
        extra = dict(options, progress=progress) if key == "ig" else {}  # only Integrated Gradients takes steps
        scores[key] = attribute(model, trace, target, key, **extra).scores
        labels[key] = METHODS[key].label
    return Scores(scores, labels, skipped)


@dataclass(frozen=True)
class Curve:
    """One ranking's deletion and insertion curves; areas over the fraction of words removed (0 to 1)."""

    key: str
    label: str
    order: tuple[int, ...]  # the removable positions, most important first
    removed: tuple[int, ...]  # k at each point: how many words are removed (deletion) or kept (insertion)
    deletion: Tensor  # (P,) float64: the target with the first k words replaced
    insertion: Tensor  # (P,) float64: the target with every word but the first k replaced
    deletion_auc: float  # lower: the target falls sooner
    insertion_auc: float  # higher: the target comes back sooner
    aopc_deletion: float  # mean over the points of f(x) − deletion_k (Samek et al. 2017); higher is more faithful
    aopc_insertion: float  # mean over the points of insertion_k − f(every word replaced); higher is more faithful


@dataclass(frozen=True)
class Faithfulness:
    """Every ranking's curves for one target on one sentence."""

    full: float  # the target at the sentence: every deletion curve starts here
    empty: float  # the target with every word replaced: every insertion curve starts here
    replacement: str  # the token that replaces a word, e.g. "[MASK]"
    words: int  # how many positions may be removed (all but the special tokens)
    curves: tuple[Curve, ...]  # in the order of the scores given, the random baseline last
    note: str  # the rules, in one sentence for the chart

    def summary(self) -> pd.DataFrame:
        """One row per ranking: its areas and AOPCs, best deletion AOPC first."""
        rows = [(c.key, c.label, c.deletion_auc, c.insertion_auc, c.aopc_deletion, c.aopc_insertion) for c in self.curves]
        frame = pd.DataFrame(rows, columns=["key", "measure", "deletion_auc", "insertion_auc", "aopc_deletion",
                                           "aopc_insertion"])
        return frame.sort_values("aopc_deletion", ascending=False, kind="stable").reset_index(drop=True)

    def points(self) -> pd.DataFrame:
        """Every point of every curve (for the CSV): ranking, words removed or kept, fraction, both targets."""
        rows = [(c.key, c.label, k, k / max(self.words, 1), float(d), float(i))
                for c in self.curves for k, d, i in zip(c.removed, c.deletion, c.insertion, strict=True)]
        return pd.DataFrame(rows, columns=["key", "measure", "k", "fraction", "deletion", "insertion"])


def _points(n: int, points: int) -> tuple[int, ...]:
    """Evenly spaced k from 0 to n, at most `points` of them (every k when n is small)."""
    count = min(points, n + 1)
    return tuple(sorted({round(i * n / (count - 1)) for i in range(count)}))


def _order(scores: Tensor, positions: tuple[int, ...]) -> tuple[int, ...]:
    """The positions by score, highest first; ties keep sentence order."""
    values = scores.double()[list(positions)]
    ranked = torch.sort(values, descending=True, stable=True).indices
    return tuple(positions[i] for i in ranked.tolist())


def _area(values: Tensor, fractions: Tensor) -> float:
    return float(torch.trapezoid(values.double(), fractions.double())) if len(values) > 1 else float(values[0])


def curves(model: Encoder, trace: Trace, target: Target, scores: Mapping[str, Tensor],
           labels: Mapping[str, str] | None = None, *, seed: int = 0, points: int = POINTS,
           progress: Progress | None = None) -> Faithfulness:
    """Deletion and insertion curves for every ranking in `scores` ((T,) each) and a random order (seeded).

    All the sequences are distinct token lists run in batches, without gradients, with the trace's knock-outs.
    """
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points={points!r} must be a whole number of at least 2.")
    fn = objective(model, trace, target)
    token, name = removal_token(model)
    words = removable(trace)
    n = len(words)
    for key, value in scores.items():
        if value.shape != (trace.seq_len,):
            raise ValueError(f"The scores of {key!r} have shape {tuple(value.shape)}; expected ({trace.seq_len},).")
    random = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    orders = {key: _order(value, words) for key, value in scores.items()}
    orders["random"] = tuple(words[i] for i in random.tolist())
    ks = _points(n, points)
    wanted: dict[tuple[int, ...], int] = {}  # removed positions -> row of the batch; shared sequences run once
    for order in orders.values():
        for k in ks:
            wanted.setdefault(tuple(sorted(order[:k])), len(wanted))
            wanted.setdefault(tuple(sorted(order[k:])), len(wanted))
    values = _run(model, trace, fn, [replaced(trace, removed, token)[0] for removed in wanted], progress)
    fractions = torch.tensor(ks, dtype=torch.float64) / n
    full, empty = values[wanted[()]].item(), values[wanted[tuple(sorted(words))]].item()
    out = []
    for key, order in orders.items():
        deletion = values[[wanted[tuple(sorted(order[:k]))] for k in ks]]
        insertion = values[[wanted[tuple(sorted(order[k:]))] for k in ks]]
        out.append(Curve(key, "Random order" if key == "random" else (labels or {}).get(key, key), order, ks,
                         deletion, insertion, _area(deletion, fractions), _area(insertion, fractions),
                         float((full - deletion).mean()), float((insertion - empty).mean())))
    note = (f"Words replaced by {name}, most important first, at {len(ks)} points; [CLS] and [SEP] are never "
            f"removed; the random order is seeded ({seed}).")
    return Faithfulness(full, empty, name, n, tuple(out), note)


def _run(model: Encoder, trace: Trace, fn, sequences: list[Tensor], progress: Progress | None) -> Tensor:
    """The target for each token-id sequence (T,), batched under inference_mode: (N,) float64."""
    device = model_device(model)
    size = 4 * batch_size(model, trace.seq_len)  # no graph is kept: a forward pass needs about a quarter
    out = []
    with torch.inference_mode():
        for start in range(0, len(sequences), size):
            ids = torch.stack(sequences[start:start + size]).to(device)
            hidden = model.forward_embedded(model.embed(ids), None, None, trace.ablate)[0]
            out.append(fn(hidden).double().cpu())
            if progress is not None:
                progress(min(start + size, len(sequences)), len(sequences))
    return torch.cat(out)


def faithfulness(model: Encoder, trace: Trace, target: Target, *, seed: int = 0, points: int = POINTS,
                 progress: Progress | None = None, **options) -> tuple[Faithfulness, Scores]:
    """all_scores, then curves: every registered measure and attribution method against a random order."""
    ranked = all_scores(model, trace, target, progress=progress, **options)
    return curves(model, trace, target, ranked.scores, ranked.labels, seed=seed, points=points,
                  progress=progress), ranked
