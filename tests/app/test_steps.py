"""Step-through: the walk follows each placement's data flow and shows real taps."""

import pytest
import torch

from encoder import TAPS, EncoderConfig, build_model
from encoder.model import DROPOUTS, flow_edges, flow_order
from encoder.viz.diagram import HIGHLIGHTS
from ui.steps import FINAL, PROSE, layer_steps


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_order_follows_the_placement_table(norm):
    steps = layer_steps(EncoderConfig(norm=norm))
    keys = [s.key for s in steps]
    # Without the dropout stops, the walk is exactly the order the layer computes its taps in.
    assert tuple(k for k in keys if k not in DROPOUTS) == flow_order(norm)
    # Each dropout stops right before the add it feeds, showing the sub-layer output it acts on.
    for tail, head, kind in flow_edges(norm):
        if kind in DROPOUTS:
            at = keys.index(kind)
            assert keys[at + 1] == head and steps[at].tap == tail
    assert keys.count("drop1") == keys.count("drop2") == 1
    assert set(PROSE[norm]) == set(flow_order(norm))  # prose for every node, none for a node that is not there


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_every_step_shows_a_real_tap_and_highlights_a_diagram_node(norm):
    steps = layer_steps(EncoderConfig(norm=norm))
    assert {s.tap for s in steps} == set(TAPS)
    for s in steps:
        assert s.tap in TAPS and s.key in HIGHLIGHTS
        assert s.key == s.tap or s.key in ("drop1", "drop2")
        assert s.title and 40 < len(s.text) < 500
    # A dropout stop shows the sub-layer output it acts on (identity in eval mode).
    by_key = {s.key: s.tap for s in steps}
    assert (by_key["drop1"], by_key["drop2"]) == ("attn", "ffn")
    assert "identity" in next(s.text for s in steps if s.key == "drop1")


def test_post_and_pre_differ_in_where_layernorm_stands():
    post, pre = layer_steps(EncoderConfig(norm="post")), layer_steps(EncoderConfig(norm="pre"))
    assert [s.key for s in post] != [s.key for s in pre]
    assert [s.key for s in post].index("norm1") > [s.key for s in post].index("add1")
    assert [s.key for s in pre].index("norm1") < [s.key for s in pre].index("attn")
    assert "Pre-LN" in next(s.text for s in pre if s.key == "norm1")
    assert "Post-LN" in next(s.text for s in post if s.key == "norm1")


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_walk_ends_on_the_tensor_the_layer_returns(norm):
    """In the real layer, the step before "output" holds the same tensor as the output: norm2 (post), add2 (pre)."""
    cfg = EncoderConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1, vocab_size=50, max_len=8, norm=norm)
    layer = build_model(cfg, "cpu").layers[0]
    x = torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(0))
    _, _, taps = layer(x)
    order = [s.tap for s in layer_steps(cfg)]
    last = "norm2" if norm == "post" else "add2"
    assert order[-2] == last and torch.equal(taps["output"], taps[last])


# ------------------------------------------------------------ the settings of later encoders (issue 20)
MODERN = EncoderConfig(d_model=64, num_heads=4, d_ff=96, num_layers=4, norm="pre", final_norm=True, positional="rotary",
                       rope_theta=160000.0, ffn="geglu", bias=False, window=4, global_every=3, dropout=0.0)


def text_of(steps, key: str) -> str:
    return next(s.text for s in steps if s.key == key)


@pytest.mark.parametrize(("positional", "words"), [
    ("sinusoidal", "plus the sinusoidal positional encoding in layer 0"),
    ("learned", "plus the learned position embeddings in layer 0"),
    ("rotary", "rotary positions add nothing here"),
    ("none", "this model has no positional encoding")])
def test_the_input_step_says_where_positions_enter(positional, words):
    steps = layer_steps(EncoderConfig(positional=positional))
    assert words in text_of(steps, "input")
    assert ("rotary positions turn" in text_of(steps, "attn")) == (positional == "rotary")


def test_the_attention_step_follows_the_layer_window_and_theta():
    for layer, window in ((0, False), (1, True), (2, True), (3, False)):  # global every 3rd layer: 0 and 3
        attn = text_of(layer_steps(MODERN, layer), "attn")
        assert ("at most 2 positions away" in attn) == window and ("all tokens" in attn) == (not window)
        assert f"θ = {MODERN.layer_theta(layer):g}" in attn and "no bias terms" in attn
    assert "global layers" in text_of(layer_steps(MODERN, 0), "attn")
    assert "window" not in text_of(layer_steps(EncoderConfig()), "attn")


@pytest.mark.parametrize(("ffn", "activation", "words"), [
    ("plain", "relu", "the activation is ReLU, which zeroes"), ("plain", "gelu", "the activation is GELU, which squashes"),
    ("geglu", "relu", "GELU(x W) is multiplied element by element with x V"),
    ("swiglu", "relu", "SiLU(x W) is multiplied element by element with x V")])
def test_the_hidden_layer_step_names_the_feed_forward_it_has(ffn, activation, words):
    step = next(s for s in layer_steps(EncoderConfig(ffn=ffn, activation=activation)) if s.key == "ffn_hidden")
    assert words in step.text and ("GLU" in step.title) == (ffn != "plain")
    assert "(ReLU or GELU)" not in step.text  # said for this model, not for any model


def test_no_biases_and_a_final_layer_norm_are_steps_of_the_walk():
    steps = layer_steps(MODERN, 1)
    assert steps[-1].key == FINAL and steps[-1].tap == FINAL and steps[-1].key in HIGHLIGHTS
    assert "This model has one: the last step." in text_of(steps, "output")
    assert "no bias β" in text_of(steps, "norm1") and "no bias terms" in text_of(steps, "ffn")
    assert [s.key for s in steps[:-1]] == [s.key for s in layer_steps(MODERN.replace(final_norm=False), 1)]
    assert FINAL not in [s.key for s in layer_steps(EncoderConfig())]
    assert len(layer_steps(MODERN, 0)) == len(steps)  # the same stops in every layer: Previous/Next keep their place
