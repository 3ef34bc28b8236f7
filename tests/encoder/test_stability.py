"""Training stability: gradient norms at init (Xiong et al. 2020), the warm-up schedule, short training runs."""

import dataclasses
import math

import pytest
import torch

from encoder import build_model
from encoder.analysis.stability import (
    GROUPS,
    RUN_LABELS,
    compare_runs,
    depth_trend,
    grad_norms_at_init,
    reversal_heads,
    reverse_batch,
    train_run,
    trained_trace,
    warmup_lr,
)

TINY = dict(d_model=32, num_heads=2, d_ff=128)
TINY_TASK = dict(seq=8, vocab=8, batch=16)


def test_grad_norm_table_has_every_layer_and_matrix():
    df = grad_norms_at_init(3, "pre", **TINY, seq=8, batch=4, vocab=8)
    assert list(df["group"]) == list(GROUPS) * 3 and list(df["layer"]) == [i for i in range(3) for _ in GROUPS]
    assert (df["grad_norm"] > 0).all() and df["grad_norm"].map(math.isfinite).all()
    assert df.equals(grad_norms_at_init(3, "pre", **TINY, seq=8, batch=4, vocab=8))  # deterministic


def test_last_layer_gradient_shrinks_with_depth_for_pre_ln_only():
    """Xiong et al. 2020: Pre-LN's last-layer gradient ~ 1/sqrt(L); Post-LN's does not shrink (2 vs 16 layers)."""
    df = depth_trend(depths=(2, 16), seeds=(0, 1, 2, 3), **TINY, seq=16, batch=16, vocab=16)
    last = df.set_index(["norm", "num_layers"])["last_w2"]
    post, pre = last["post", 16] / last["post", 2], last["pre", 16] / last["pre", 2]
    assert pre < 0.75, pre  # measured ~0.57; 1/sqrt(8) = 0.35 is the large-depth limit
    assert post > 0.9, post  # measured ~1.2
    assert post > 1.5 * pre


def test_depth_trend_columns():
    df = depth_trend(depths=(1, 2), seeds=(0,), **TINY, seq=8, batch=4, vocab=8)
    assert list(df.columns) == ["norm", "num_layers", "last_w2", "first_w2", "last_over_first", "last_w2_x_sqrt_depth"]
    assert list(zip(df["norm"], df["num_layers"], strict=True)) == [("post", 1), ("post", 2), ("pre", 1), ("pre", 2)]
    one = df.query("num_layers == 1")
    assert (one["last_over_first"] == 1.0).all()  # with one layer the first layer is the last


def test_warmup_schedule_is_linear_then_constant():
    assert warmup_lr(0, 1e-3, 100) == pytest.approx(1e-5)
    assert warmup_lr(49, 1e-3, 100) == pytest.approx(5e-4)
    assert warmup_lr(99, 1e-3, 100) == pytest.approx(1e-3)
    assert warmup_lr(100, 1e-3, 100) == warmup_lr(10_000, 1e-3, 100) == 1e-3
    assert warmup_lr(0, 1e-3, 0) == 1e-3
    lrs = [warmup_lr(s, 3e-3, 50) for s in range(80)]
    assert all(a <= b for a, b in zip(lrs, lrs[1:], strict=False))
    with pytest.raises(ValueError):
        warmup_lr(-1, 1e-3, 10)


def test_reverse_task_targets_are_the_reversed_inputs():
    ids, targets = reverse_batch(torch.Generator().manual_seed(0), 4, 6, 10)
    assert ids.shape == (4, 6) and int(ids.max()) < 10
    assert torch.equal(targets[:, 0], ids[:, -1]) and torch.equal(targets.flip(1), ids)


@pytest.fixture(scope="module")
def pre_run():
    fractions = []
    result = train_run("pre", 0, 3e-3, 80, num_layers=2, **TINY, seed=1, progress=fractions.append, **TINY_TASK)
    return result, fractions


def test_pre_ln_learns_and_reports_progress(pre_run):
    result, fractions = pre_run
    assert len(result.losses) == 80 and result.chance_loss == pytest.approx(math.log(8))
    first, last = sum(result.losses[:10]) / 10, sum(result.losses[-10:]) / 10
    assert last < 0.6 * first and result.learned, (first, last)
    assert result.accuracy > 0.5  # chance is 1/8
    assert fractions[-1] == 1.0 and all(a < b for a, b in zip(fractions, fractions[1:], strict=False))
    assert not any(p.requires_grad for p in result.model.parameters()) and not result.model.training


def test_training_is_deterministic_and_leaves_the_global_rng_alone(pre_run):
    state = torch.get_rng_state()
    again = train_run("pre", 0, 3e-3, 80, num_layers=2, **TINY, seed=1, **TINY_TASK)
    assert torch.equal(torch.get_rng_state(), state)
    assert again.losses == pre_run[0].losses and again.accuracy == pre_run[0].accuracy
    other = train_run("pre", 0, 3e-3, 3, num_layers=2, **TINY, seed=2, **TINY_TASK)
    assert other.losses[0] != again.losses[0]


def test_compare_runs_share_init_and_data():
    fractions = []
    runs = compare_runs(3e-3, 4, warmup_steps=10, num_layers=2, **TINY, progress=fractions.append, **TINY_TASK)
    assert list(runs) == list(RUN_LABELS)
    cold, warm, pre = runs.values()
    assert cold.losses[0] == warm.losses[0]  # same weights, same first batch, only the learning rate differs
    assert cold.losses[1] != warm.losses[1]
    assert (cold.warmup_steps, warm.warmup_steps, pre.warmup_steps) == (0, 10, 0)
    assert pre.config.norm == "pre" and pre.config.final_norm and not cold.config.final_norm
    assert fractions[-1] == pytest.approx(1.0) and fractions == sorted(fractions)


def test_trained_model_opens_as_a_trace(pre_run):
    result, _ = pre_run
    trace = trained_trace(result, seed=0)
    labels = trace.tokens
    assert len(set(labels)) == 8 and all(t.startswith("t") for t in labels)
    assert trace.attention.shape == (2, 2, 8, 8)
    assert torch.allclose(trace.attention.sum(-1), torch.ones(2, 2, 8), atol=1e-5)
    assert trace.final is not None and trace.output.shape == (8, 32)
    assert len(trace.stats()) == 2 * 9
    # The read-out on the trace's output reverses the example: the model really was trained.
    predicted = result.readout(trace.output).argmax(-1).tolist()
    assert predicted == trace.token_ids[::-1]
    with pytest.raises(ValueError, match="tokens"):
        trained_trace(result, [99])


def test_a_trained_head_attends_along_the_anti_diagonal(pre_run):
    result, _ = pre_run
    heads = reversal_heads(result)
    assert len(heads) == 2 * 2 and list(heads.columns) == ["layer", "head", "anti_diagonal"]
    assert heads["anti_diagonal"].is_monotonic_decreasing
    assert heads["anti_diagonal"].iloc[0] > 0.5  # flat attention would give 1/8
    # At initialisation the same measure is near 1/seq: the structure was learned.
    untrained = dataclasses.replace(result, model=build_model(result.config, "cpu"))
    assert reversal_heads(untrained)["anti_diagonal"].iloc[0] < 0.35  # measured 0.20
