"""Inside one head (issue 12): the numbers on the figures are the forward pass's, and the arithmetic between them holds."""

import math

import numpy as np
import pytest
import torch

from encoder import EncoderConfig, build_model, run
from encoder.viz import heads

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module", params=["post", "pre"])
def model(request):
    return build_model(EncoderConfig(d_model=48, num_heads=4, d_ff=96, num_layers=3, max_len=64, seed=5,
                                     norm=request.param))


@pytest.fixture(scope="module")
def trace(model):
    return run(model, TEXT)


def panel(fig, n: int) -> np.ndarray:
    """The z values of the figure's n-th heatmap (0-based), as float64."""
    return np.asarray([t for t in fig.data if t.type == "heatmap"][n].z, dtype=np.float64)


def titles(fig) -> str:
    return " | ".join(a.text for a in fig.layout.annotations)


@pytest.mark.parametrize(("layer", "head", "query"), [(0, 0, 0), (1, 2, 10), (2, 3, 15)])
def test_scaled_scores_softmax_to_the_traces_attention_row(trace, layer, head, query):
    steps = heads.head_steps(trace, layer, head, query)
    fig = heads.scores_figure(steps)
    row = trace.attention[layer, head, query].double().numpy()
    q, k = panel(fig, 0)[0], panel(fig, 1)  # (d_k,), (T, d_k) as drawn
    scores, scaled, shown = panel(fig, 2)[:, 0], panel(fig, 3)[:, 0], panel(fig, 4)[:, 0]
    np.testing.assert_allclose(scores, k @ q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(scaled, scores / math.sqrt(trace.config.d_head), rtol=0, atol=1e-12)
    np.testing.assert_allclose(torch.softmax(torch.tensor(scaled), 0).numpy(), row, rtol=0, atol=1e-6)
    np.testing.assert_allclose(shown, row, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(q, trace.heads[layer]["q"][head, query].double().numpy())
    np.testing.assert_array_equal(k, trace.heads[layer]["k"][head].double().numpy())


def test_weighted_values_sum_to_the_head_output_of_the_forward_pass(trace):
    steps = heads.head_steps(trace, 1, 3, 10)
    fig = heads.values_figure(steps)
    z, weights, v, mixed = panel(fig, 0)[0], panel(fig, 1)[:, 0], panel(fig, 2), panel(fig, 3)
    np.testing.assert_array_equal(v, trace.heads[1]["v"][3].double().numpy())
    np.testing.assert_allclose(mixed, weights[:, None] * v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(z, mixed.sum(0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(z, trace.heads[1]["z"][3, 10].double().numpy(), rtol=0, atol=1e-6)


def test_the_heads_shares_through_w_o_add_up_to_the_attn_tap(model, trace):
    layer, query = 2, 4
    w_o, b_o = model.layers[layer].attn.out.weight, model.layers[layer].attn.out.bias
    shares = []
    for h in range(trace.num_heads):
        fig = heads.output_figure(heads.head_steps(trace, layer, h, query), trace.num_heads, w_o)
        concat, share, attn = panel(fig, 0)[0], panel(fig, 1)[0], panel(fig, 2)[0]
        shares.append(share)
    np.testing.assert_array_equal(concat, trace.heads[layer]["concat"][query].double().numpy())
    np.testing.assert_array_equal(attn, trace.taps[layer]["attn"][query].double().numpy())
    np.testing.assert_allclose(np.sum(shares, 0) + b_o.double().detach().numpy(), attn, rtol=0, atol=1e-5)


def test_shapes_sit_on_the_figures(trace):
    T, dk, D = trace.seq_len, trace.config.d_head, trace.config.d_model
    steps = heads.head_steps(trace, 0, 1, 2)
    assert f"K: {T} × {dk}" in titles(heads.scores_figure(steps))
    assert f"÷ √{dk}" in titles(heads.scores_figure(steps))
    assert f"V: {T} × {dk}" in titles(heads.values_figure(steps))
    subtitle = heads.output_figure(steps, 4).layout.title.subtitle.text.replace("<br>", " ")
    assert f"1 × d_model = 1 × {D}; head 1 is columns {dk}–{2 * dk - 1}" in subtitle, subtitle
    assert len([t for t in heads.output_figure(steps, 4).data if t.type == "heatmap"]) == 2  # no W_O: no share strip


def test_training_mode_dropout_is_why_the_sum_differs(model):
    tr = run(build_model(model.cfg.replace(dropout=0.5)), TEXT, train=True)
    steps = heads.head_steps(tr, 0, 0, 3)
    np.testing.assert_allclose(steps.weights, steps.trace_row, rtol=0, atol=1e-6)  # dropout acts after the softmax
    assert np.abs(steps.z_sum - steps.z).max() > 1e-4


def test_token_labels_are_escaped_and_bad_choices_say_what_to_change(model):
    tr = run(model, "<b>bold</b> & <img src=x onerror=alert(1)>")
    fig = heads.scores_figure(heads.head_steps(tr, 0, 0, 1))
    labels = list(fig.data[1].y)
    assert "&lt; (1)" in labels and not any("<" in t for t in labels)
    with pytest.raises(ValueError, match="choose a token from 0 to"):
        heads.head_steps(tr, 0, 0, tr.seq_len)
    with pytest.raises(ValueError, match="choose a head from 0 to 3"):
        heads.head_steps(tr, 0, 4, 0)


@pytest.fixture(scope="module")
def windowed():
    """Rotary positions and a 4-token window (2 keys on each side), global attention in layers 0 and 2."""
    cfg = EncoderConfig(d_model=48, num_heads=4, d_ff=96, num_layers=3, max_len=64, seed=7, norm="pre",
                        positional="rotary", ffn="geglu", bias=False, window=4, global_every=2)
    return run(build_model(cfg), TEXT)


@pytest.mark.parametrize(("layer", "head", "query"), [(1, 0, 0), (1, 2, 8), (1, 3, 15), (0, 1, 8), (2, 0, 3)])
def test_a_window_layer_masks_the_keys_outside_its_window_as_the_forward_pass_did(windowed, layer, head, query):
    """In a sliding-window layer the softmax runs over the keys at most window/2 away: "row i of A" is the trace's."""
    steps = heads.head_steps(windowed, layer, head, query)
    row = windowed.attention[layer, head, query].double().numpy()
    radius = windowed.config.layer_window(layer) // 2
    far = np.abs(np.arange(windowed.seq_len) - query) > radius if radius else np.zeros(windowed.seq_len, dtype=bool)
    np.testing.assert_array_equal(steps.outside, far)
    assert steps.radius == radius
    np.testing.assert_allclose(steps.weights, row, rtol=0, atol=1e-6)
    np.testing.assert_allclose(steps.z_sum, steps.z, rtol=0, atol=1e-5)  # the masked weights give the pass's z
    assert (steps.weights[far] == 0).all() and (row[far] == 0).all()
    fig = heads.scores_figure(steps)
    drawn = panel(fig, 3)[:, 0]
    assert np.isnan(drawn[far]).all() and np.isfinite(drawn[~far]).all()  # the masked scores are empty cells
    np.testing.assert_allclose(panel(fig, 4)[:, 0], row, rtol=0, atol=1e-6)
    if radius:
        assert "sliding window" in fig.layout.title.subtitle.text and f"÷ √{steps.d_k}, −∞" in titles(fig)
        # without the mask the softmax would spread weight onto keys the layer never saw: the test can fail
        unmasked = torch.softmax(torch.tensor(steps.scaled), 0).numpy()
        assert np.abs(unmasked - row).max() > 1e-3
    else:
        assert "sliding window" not in fig.layout.title.subtitle.text


def test_the_model_s_own_numbers_travel_as_float32_and_the_recomputed_ones_as_float64(trace):
    # K and V are the trace's float32 taps: float32 on the page is every bit of them, at half the bytes. The scores
    # and weights are recomputed here in float64: they keep every bit too.
    steps = heads.head_steps(trace, 1, 3, 10)
    grids = {t.hovertemplate.split(" ")[0]: t for t in heads.scores_figure(steps).data + heads.values_figure(steps).data}
    for name, source in (("k", steps.k), ("v", steps.v), ("q_i", steps.q[None, :])):
        shipped = np.asarray(grids[name].z)
        assert shipped.dtype == np.float32 and np.array_equal(shipped.astype(np.float64), source)
    assert np.asarray(grids["a·v"].z).dtype == np.float64
    assert np.array_equal(np.asarray(grids["a·v"].z), steps.mixed)
