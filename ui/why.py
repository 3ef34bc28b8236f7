"""Streamlit glue for "Why are these similar?" (issues 19 and 27): the target the store describes, attributions, the
faithfulness chart and the measures ranked over a built-in set of sentence pairs.

Each result is computed once per (model, sentence, target, knock-outs, steps) in the byte-bounded cache, so a second
session asking for the same one waits for it instead of computing it again, and nothing is kept in the session. While
a result is computed, a progress bar with the step count stands where it will be drawn; it goes when the result is in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from encoder.analysis import faithfulness
from encoder.analysis.attribution import METHODS, Attribution, Target, attribute, similarity_target, token_target
from encoder.analysis.measures import MEASURES
from encoder.analysis.ranking import Case, Ranking, rank_measures

from . import Frame, get_model, purpose
from . import measures as measure_maps
from .caches import CACHE
from .priority import behind
from .progress import Progress

__all__ = ["Progress", "get_attribution", "get_chart", "get_ranking", "target_of", "ranking_cases"]

AUTO_ATTRIBUTE = 128  # tokens up to which attributions are computed when the page opens (longer: on request)
SLOW_CURVES = 64  # tokens past which the faithfulness chart (always on request) is said to take a while
# "Which measure is right here?": each example set's first sentence with its second and third (a paraphrase, a close
# variant or a contrast). The unrelated fourth is left out: a similarity near 0 has little to lose when words go.
RANKING_PAIRS: tuple[tuple[str, str], ...] = tuple((first, other) for first, *rest in purpose.SENTENCE_SETS.values()
                                                   for other in rest[:2])
RANKING_TOKEN = 1  # the token target of the ranked set: each sentence's first word

Show = Callable[[str], Callable[[int, int], None]]  # show(what) -> progress(done, total)


def target_of(values: dict[str, Any]) -> Target:
    """The target the store describes: the similarity to the second sentence, or one token's own direction."""
    if values["target"] == "token":
        return token_target(int(values["token"]))
    return similarity_target(values["text_b"], values["pool"])


def _target_key(target: Target) -> tuple:
    if target.kind == "token":
        return "token", target.token
    return "similarity", target.other, target.pooling


def _run_key(fr: Frame, text: str, knocks: purpose.Knocks) -> tuple:
    return fr.model_key, fr.device, text, bool(fr.values["train"]), purpose.format_ablate(knocks)


def get_attribution(fr: Frame, text: str, target: Target, method: str, steps: int, knocks: purpose.Knocks,
                    show: Show | None = None) -> Attribution:
    """One method's attribution of `text`'s words toward the target, computed once per key."""
    def compute() -> Attribution:
        trace = purpose.get_run(fr, text, knocks)
        options = {}
        if method == "ig":
            options = dict(steps=steps, progress=show("Integrated Gradients, steps") if show else None)
        return attribute(get_model(fr.model_key, fr.device), trace, target, method, **options)

    key = ("why-attribution", *_run_key(fr, text, knocks), _target_key(target), method, steps if method == "ig" else 0)
    return CACHE.get(key, lambda: behind(compute))


def get_chart(fr: Frame, text: str, target: Target, steps: int, knocks: purpose.Knocks,
              show: Show | None = None) -> tuple[faithfulness.Faithfulness, faithfulness.Scores]:
    """Every registered measure and attribution method ranks `text`'s words for the target; their deletion and
    insertion curves and a random order's (faithfulness.curves), computed once per key."""
    def compute() -> tuple[faithfulness.Faithfulness, faithfulness.Scores]:
        model = get_model(fr.model_key, fr.device)
        trace = purpose.get_run(fr, text, knocks)
        # Maps the other pages already computed for this very trace are reused.
        own = text == fr.values["text"] and not knocks
        scores, labels, skipped = {}, {}, {}
        step = show("Measures computed") if show else None
        for n, key in enumerate(MEASURES):
            measure = MEASURES[key]
            maps = ({key: measure_maps.get_maps(fr, key)} if own and not measure.needs_token
                    and measure_maps.cached(fr, key) else None)
            one = faithfulness.all_scores(model, trace, target, measures=(key,), methods=(), maps=maps)
            scores |= one.scores
            labels |= one.labels
            skipped |= one.skipped
            if step:
                step(n + 1, len(MEASURES))
        for key, method in METHODS.items():
            scores[key] = get_attribution(fr, text, target, key, steps, knocks, show).scores
            labels[key] = method.label
        chart = faithfulness.curves(model, trace, target, scores, labels,
                                    progress=show("Perturbed sentences run") if show else None)
        return chart, faithfulness.Scores(scores, labels, skipped)

    return CACHE.get(("why-chart", *_run_key(fr, text, knocks), _target_key(target), steps), lambda: behind(compute))


def chart_cached(fr: Frame, text: str, target: Target, steps: int, knocks: purpose.Knocks) -> bool:
    return CACHE.peek(("why-chart", *_run_key(fr, text, knocks), _target_key(target), steps)) is not None


def attribution_cached(fr: Frame, text: str, target: Target, method: str, steps: int, knocks: purpose.Knocks) -> bool:
    key = ("why-attribution", *_run_key(fr, text, knocks), _target_key(target), method, steps if method == "ig" else 0)
    return CACHE.peek(key) is not None


def ranking_cases(kind: str, pool: str) -> list[Case]:
    """The built-in set: RANKING_PAIRS toward their similarity, or each pair's second sentence toward its first
    word's own direction."""
    if kind == "token":
        return [Case(other, token_target(RANKING_TOKEN)) for _, other in RANKING_PAIRS]
    return [Case(first, similarity_target(other, pool)) for first, other in RANKING_PAIRS]


def _ranking_key(fr: Frame, kind: str, pool: str, steps: int, knocks: purpose.Knocks) -> tuple:
    return ("why-ranking", fr.model_key, fr.device, bool(fr.values["train"]), kind, pool if kind == "similarity" else "",
            steps, purpose.format_ablate(knocks))


def get_ranking(fr: Frame, kind: str, pool: str, steps: int, knocks: purpose.Knocks,
                show: Show | None = None) -> Ranking:
    """The deletion test over the built-in set (encoder.analysis.ranking), computed once per key."""
    def compute() -> Ranking:
        if fr.values["train"]:
            raise ValueError("Attributions follow the forward pass without dropout; switch training mode off.")
        return rank_measures(get_model(fr.model_key, fr.device), ranking_cases(kind, pool), ablate=knocks, steps=steps,
                             progress=show("Sentences done") if show else None)

    return CACHE.get(_ranking_key(fr, kind, pool, steps, knocks), lambda: behind(compute))


def ranking_cached(fr: Frame, kind: str, pool: str, steps: int, knocks: purpose.Knocks) -> Ranking | None:
    return CACHE.peek(_ranking_key(fr, kind, pool, steps, knocks))
