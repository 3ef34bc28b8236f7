"""Deletion and insertion curves: the ends of every curve, the ranking rule, the seeded random order, the areas,
special tokens never removed, knock-outs, and bad or extreme input."""

import pytest
import torch

from encoder import run
from encoder.analysis import faithfulness, measures
from encoder.analysis.attribution import objective, similarity_target, token_target
from encoder.analysis.embeddings import sentence_embedding
from encoder.analysis.faithfulness import all_scores, curves, ranking_scores
from encoder.analysis.measures import MEASURES, Maps
from tests.encoder.conftest import DEFAULT

OTHER = "The creature stayed on the pavement because it was exhausted."


@pytest.fixture(scope="module")
def trace(default_trace):
    return default_trace


@pytest.fixture(scope="module")
def chart(pretrained, trace):
    return faithfulness.faithfulness(pretrained, trace, similarity_target(OTHER))


def test_deletion_with_nothing_removed_equals_the_full_score(pretrained, trace, chart):
    result, _ = chart
    expected = float(sentence_embedding(trace) @ sentence_embedding(run(pretrained, OTHER)))
    assert result.full == pytest.approx(expected, abs=1e-5)
    for curve in result.curves:
        assert curve.removed[0] == 0 and curve.removed[-1] == result.words
        assert float(curve.deletion[0]) == result.full and float(curve.insertion[-1]) == result.full
        assert float(curve.deletion[-1]) == result.empty and float(curve.insertion[0]) == result.empty


def test_every_measure_and_method_and_a_random_order_are_drawn(chart):
    result, ranked = chart
    keys = [c.key for c in result.curves]
    assert keys[-1] == "random" and set(keys) == set(ranked.scores) | {"random"}
    assert {"raw", "value", "value_raw", "block", "rollout", "ig", "gxi", "attgrad"} <= set(keys)
    assert "flow" in ranked.skipped and "one token" in ranked.skipped["flow"]  # mean pooling reads every row
    assert result.replacement == "[MASK]" and "[MASK]" in result.note and "never" in result.note
    summary = result.summary()
    assert list(summary["aopc_deletion"]) == sorted(summary["aopc_deletion"], reverse=True)
    assert len(result.points()) == sum(len(c.removed) for c in result.curves)


def test_special_tokens_are_never_removed(trace, chart):
    result, _ = chart
    words = set(range(1, trace.seq_len - 1))
    assert result.words == len(words)
    for curve in result.curves:
        assert sorted(curve.order) == sorted(words)


def test_areas_and_aopc_follow_their_definitions(chart):
    result, _ = chart
    for curve in result.curves:
        x = torch.tensor(curve.removed, dtype=torch.float64) / result.words
        assert curve.deletion_auc == pytest.approx(float(torch.trapezoid(curve.deletion, x)))
        assert curve.insertion_auc == pytest.approx(float(torch.trapezoid(curve.insertion, x)))
        assert curve.aopc_deletion == pytest.approx(float((result.full - curve.deletion).mean()))
        assert curve.aopc_insertion == pytest.approx(float((curve.insertion - result.empty).mean()))


def test_integrated_gradients_beat_the_random_order_on_the_default_sentence(chart):
    by_key = {c.key: c for c in chart[0].curves}
    assert by_key["ig"].aopc_deletion > by_key["random"].aopc_deletion
    assert by_key["ig"].deletion_auc < by_key["random"].deletion_auc


def test_each_curve_point_is_the_model_run_on_that_sentence(pretrained, trace, chart):
    result, _ = chart
    curve = next(c for c in result.curves if c.key == "value")
    k = curve.removed[2]
    ids = list(trace.token_ids)
    for position in curve.order[:k]:
        ids[position] = 103  # [MASK]
    fn = objective(pretrained, trace, similarity_target(OTHER))
    with torch.inference_mode():
        out = pretrained(torch.tensor([ids]))[0]
    assert float(curve.deletion[2]) == pytest.approx(float(fn(out)[0]), abs=1e-5)


def test_the_ranking_rule_reads_the_targets_rows_of_the_last_layer():
    layers = torch.rand(2, 4, 4)
    maps = Maps(layers=layers)
    torch.testing.assert_close(ranking_scores(maps, token_target(2)), layers[1, 2])
    torch.testing.assert_close(ranking_scores(maps, similarity_target("x", "cls")), layers[1, 0])
    torch.testing.assert_close(ranking_scores(maps, similarity_target("x", "mean")), layers[1].mean(0))
    with pytest.raises(ValueError, match="other tokens"):
        ranking_scores(Maps(layers=layers, rows=(1,)), token_target(2))


def test_orders_follow_the_scores_and_the_random_order_its_seed(pretrained, trace):
    target = token_target(3)
    scores = {"up": torch.arange(trace.seq_len, dtype=torch.float32), "flat": torch.zeros(trace.seq_len)}
    first = curves(pretrained, trace, target, scores, seed=1, points=3)
    again = curves(pretrained, trace, target, scores, seed=1, points=3)
    other = curves(pretrained, trace, target, scores, seed=2, points=3)
    order = {c.key: c.order for c in first.curves}
    assert order["up"] == tuple(range(trace.seq_len - 2, 0, -1))  # highest score first
    assert order["flat"] == tuple(range(1, trace.seq_len - 1))  # ties keep sentence order
    assert order["random"] == again.curves[-1].order != other.curves[-1].order
    assert [c.removed for c in first.curves] == [(0, 7, 14)] * 3
    assert "seeded (1)" in first.note


def test_a_token_target_includes_flow_for_that_token(pretrained, trace):
    ranked = all_scores(pretrained, trace, token_target(10), methods=("gxi",))
    assert "flow" in ranked.scores and not ranked.skipped
    flow = MEASURES["flow"].compute(pretrained, trace, token=10)
    torch.testing.assert_close(ranked.scores["flow"], flow.layers[-1, 10])


def test_maps_already_computed_are_used(pretrained, trace):
    given = {"raw": Maps(layers=torch.ones(6, trace.seq_len, trace.seq_len))}
    ranked = all_scores(pretrained, trace, token_target(1), measures=("raw",), methods=(), maps=given)
    assert ranked.scores["raw"].tolist() == [1.0] * trace.seq_len


def test_knocked_out_heads_are_kept_in_every_curve(pretrained):
    knocked = run(pretrained, DEFAULT, ablate={(0, 1), (2, "attn")})
    result, _ = faithfulness.faithfulness(pretrained, knocked, token_target(4), methods=("gxi",), points=3)
    assert result.full == pytest.approx(float(knocked.output[4].norm()), rel=1e-5)


def test_one_word(pretrained):
    one = run(pretrained, "tired")
    result, _ = faithfulness.faithfulness(pretrained, one, similarity_target(OTHER), methods=("gxi",))
    assert result.words == 1 and all(c.removed == (0, 1) for c in result.curves)
    assert all(torch.isfinite(c.deletion).all() for c in result.curves)


@pytest.mark.parametrize("text", ["\u200b", "[CLS] [SEP]"], ids=["specials_only", "typed_specials"])
def test_special_tokens_only_is_refused(pretrained, text):
    with pytest.raises(ValueError, match="only special tokens"):
        faithfulness.faithfulness(pretrained, run(pretrained, text), token_target(0))


def test_unknown_measures_and_methods_are_refused(pretrained, trace):
    with pytest.raises(ValueError, match="No measure is registered as 'attention'"):
        all_scores(pretrained, trace, token_target(1), measures=("attention",), methods=())
    with pytest.raises(ValueError, match="not offered"):
        all_scores(pretrained, trace, token_target(1), measures=(), methods=("shap",))


def test_a_measure_that_refuses_the_sentence_is_left_out_with_its_reason(pretrained):
    long = run(pretrained, "word " * 200, max_tokens=measures.FLOW_MAX_TOKENS + 2)
    ranked = all_scores(pretrained, long, token_target(3), measures=("flow", "value"), methods=())
    assert list(ranked.scores) == ["value"] and f"up to {measures.FLOW_MAX_TOKENS} tokens" in ranked.skipped["flow"]


def test_bad_scores_and_points_are_refused(pretrained, trace):
    with pytest.raises(ValueError, match="expected"):
        curves(pretrained, trace, token_target(1), {"short": torch.zeros(3)})
    for points in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="points="):
            curves(pretrained, trace, token_target(1), {}, points=points)
    with pytest.raises(ValueError, match="second sentence is empty"):
        curves(pretrained, trace, similarity_target(" "), {})


def test_512_tokens(pretrained):
    long = run(pretrained, "The quick brown fox jumps over the lazy dog. " * 60, max_tokens=512)
    maps = MEASURES["value"].compute(pretrained, long)
    target = similarity_target(OTHER)
    result = curves(pretrained, long, target, {"value": ranking_scores(maps, target)}, points=3)
    assert result.words == 510 and [c.removed for c in result.curves] == [(0, 255, 510)] * 2
    assert all(torch.isfinite(c.deletion).all() and torch.isfinite(c.insertion).all() for c in result.curves)
    assert measures.special_positions(long) == (0, 511)
