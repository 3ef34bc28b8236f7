"""Which measure is right here? The deletion test of faithfulness.py over a set of sentences, summed up per measure.

For each case (a sentence and its target) faithfulness.faithfulness ranks the words by every registered measure and
attribution method, and the AOPC of its deletion curve (the mean drop of the target as the top-k words are replaced)
says how well each ranking predicted the model. Over the set: the mean AOPC per ranking, its standard deviation and
range, how often it beat the seeded random order, and whether the ordering that Modarressi et al. 2023 (DecompX,
Table 2) report for BERT on SST-2 holds here: DecompX 0.627 > ALTI 0.416 > Integrated Gradients 0.340 >
Gradient × Input 0.310.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from ..model import Encoder
from ..trace import run
from .attribution import DEFAULT_STEPS, Progress, Target
from .faithfulness import faithfulness

# The published ordering, best first, as our registry names the rankings (ALTI as the authors aggregate it: rolled out).
PUBLISHED = ("decompx", "alti_rollout", "ig", "gxi")
PUBLISHED_AOPC = {"decompx": 0.627, "alti_rollout": 0.416, "ig": 0.340, "gxi": 0.310}


@dataclass(frozen=True)
class Case:
    """One sentence and the target its words are ranked for."""

    text: str
    target: Target


@dataclass(frozen=True)
class Ranking:
    """The deletion test over a set of cases."""

    table: pd.DataFrame  # one row per ranking: key, measure, mean/std/min/max of the deletion AOPC, n, beats_random
    # ("k of n": the cases where its deletion AOPC passed the random order's; "—" for the random order itself)
    cases: pd.DataFrame  # one row per (case, ranking): its AOPCs and areas
    skipped: dict[str, str]  # ranking key -> why it was left out (its own sentence), for the first case that refused
    seconds: float  # how long the whole set took


@dataclass(frozen=True)
class Order:
    """Whether the published ordering holds on this set."""

    holds: bool | None  # None: a ranking of the ordering is missing, so it cannot be checked
    clear: bool  # every step of the ordering (held or broken) is larger than the spread of the two means
    text: str  # one sentence saying so, with the numbers


def rank_measures(model: Encoder, cases: Sequence[Case], *, ablate: Iterable = frozenset(), steps: int = DEFAULT_STEPS,
                  progress: Progress | None = None) -> Ranking:
    """faithfulness() for every case (each sentence traced with the knock-outs `ablate`), aggregated per ranking.

    progress(done, total) counts the cases; a case whose target is refused (a sentence of special tokens only, an
    empty second sentence) raises its ValueError: the set is built in, so that is a mistake worth hearing about.
    """
    if not cases:
        raise ValueError("There are no sentences to rank the measures on.")
    started = time.perf_counter()
    rows, skipped = [], {}
    knocks = frozenset(ablate)
    for n, case in enumerate(cases):
        trace = run(model, case.text, ablate=knocks)
        chart, ranked = faithfulness(model, trace, case.target, steps=steps)
        for key, reason in ranked.skipped.items():
            skipped.setdefault(key, reason)
        for curve in chart.curves:
            rows.append(dict(case=n + 1, sentence=case.text, other=case.target.other, token=case.target.token
                             if case.target.kind == "token" else None, key=curve.key, measure=curve.label,
                             aopc_deletion=curve.aopc_deletion, aopc_insertion=curve.aopc_insertion,
                             deletion_auc=curve.deletion_auc, insertion_auc=curve.insertion_auc, full=chart.full))
        if progress is not None:
            progress(n + 1, len(cases))
    per_case = pd.DataFrame(rows)
    return Ranking(summarise(per_case), per_case, skipped, time.perf_counter() - started)


def summarise(per_case: pd.DataFrame) -> pd.DataFrame:
    """Per ranking: mean, standard deviation (n − 1), min and max of the deletion AOPC over the cases, the mean
    insertion AOPC, and on how many cases it beat the random order; best mean first."""
    random = per_case[per_case["key"] == "random"].set_index("case")["aopc_deletion"]
    out = []
    for key, group in per_case.groupby("key", sort=False):
        aopc = group["aopc_deletion"]
        beats = int((group.set_index("case")["aopc_deletion"] > random.reindex(group["case"]).to_numpy()).sum())
        out.append(dict(key=key, measure=group["measure"].iloc[0], mean_aopc=float(aopc.mean()),
                        std_aopc=float(aopc.std(ddof=1)) if len(aopc) > 1 else 0.0, min_aopc=float(aopc.min()),
                        max_aopc=float(aopc.max()), mean_aopc_insertion=float(group["aopc_insertion"].mean()),
                        n=len(group), beats_random=f"{beats} of {len(group)}" if key != "random" else "—"))
    table = pd.DataFrame(out)
    return table.sort_values("mean_aopc", ascending=False, kind="stable").reset_index(drop=True)


def published_order(table: pd.DataFrame, labels: Callable[[str], str] | None = None,
                    skipped: dict[str, str] | None = None) -> Order:
    """Whether mean deletion AOPC falls along PUBLISHED here, and whether each step is clear of the spread (the
    difference of the two means larger than their combined standard error)."""
    name = labels or (lambda key: key)
    rows = table.set_index("key")
    missing = [key for key in PUBLISHED if key not in rows.index]
    if missing:
        why = "; ".join(f"{name(key)}: {(skipped or {}).get(key, 'not computed')}" for key in missing)
        return Order(None, False, f"The published ordering cannot be checked here, because {why}")
    means = [float(rows.loc[key, "mean_aopc"]) for key in PUBLISHED]
    broken, unclear = [], []
    for (a, ma), (b, mb) in zip(zip(PUBLISHED, means, strict=True), zip(PUBLISHED[1:], means[1:], strict=True),
                                strict=False):
        sa, sb = (float(rows.loc[k, "std_aopc"]) / math.sqrt(max(int(rows.loc[k, "n"]), 1)) for k in (a, b))
        if not ma > mb:
            broken.append(f"{name(a)} ({ma:.3f}) is not above {name(b)} ({mb:.3f})")
        if abs(ma - mb) <= math.hypot(sa, sb):
            unclear.append(f"{name(a)} and {name(b)}")
    shown = " > ".join(f"{name(k)} {m:.3f}" for k, m in zip(PUBLISHED, means, strict=True))
    spread = (f" The gap between {', '.join(unclear)} is within the spread of the sentences, so that step is not "
              "settled by this set." if unclear else " Every step is larger than the spread of the sentences.")
    if broken:
        return Order(False, not unclear, "The published ordering does not hold on this model and target: "
                     + "; ".join(broken) + "." + spread)
    return Order(True, not unclear, f"The published ordering holds on this model and target: {shown}." + spread)
