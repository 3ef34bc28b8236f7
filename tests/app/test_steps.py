"""Step-through: the walk follows each placement's data flow and shows real taps."""

import pytest
import torch

from encoder import TAPS, EncoderConfig, build_model
from encoder.model import DROPOUTS, flow_edges, flow_order
from encoder.viz.diagram import HIGHLIGHTS
from ui.steps import PROSE, layer_steps


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
