"""The measure registry: value-weighted norms, the attention block with residual and LayerNorm, attention flow.

Exactness against the trace's own taps (the forward pass is the oracle), flow against a hand-computed graph and
against networkx's max-flow, the [CLS]/[SEP] shares of issue 19's table, knock-outs and bad input.
"""

import math

import networkx as nx
import pytest
import torch

import encoder
from encoder import EncoderConfig, build_model, run
from encoder.analysis import measures
from encoder.analysis.embeddings import attention_rollout, residual_attention
from encoder.analysis.measures import MEASURES, Maps
from tests import checkpoints
from tests.encoder.conftest import DEFAULT

CUSTOM = dict(d_model=64, num_heads=4, d_ff=128, num_layers=3, dropout=0.1, max_len=512)


# "modern": the sidebar's ModernBERT-style choices (rotary, GeGLU, no biases, a window with global layers), Pre-LN;
# "post-nobias": Post-LN without biases (no b_O, no LayerNorm shift: the parts' rest is zero).
MODERN = dict(norm="pre", final_norm=True, positional="rotary", ffn="geglu", bias=False, window=4, global_every=2)


@pytest.fixture(scope="module", params=["pretrained", "post", "pre", "modern", "post-nobias"])
def model(request, pretrained):
    if request.param == "pretrained":
        return pretrained
    if request.param == "modern":
        return build_model(EncoderConfig(**CUSTOM, **MODERN, seed=3))
    if request.param == "post-nobias":
        return build_model(EncoderConfig(**CUSTOM, norm="post", bias=False, seed=3))
    return build_model(EncoderConfig(**CUSTOM, norm=request.param, final_norm=request.param == "pre",
                                     activation="gelu", seed=3))


def test_registry_lists_every_measure_of_issue_19_in_menu_order():
    assert list(MEASURES)[:6] == ["raw", "value", "value_raw", "block", "rollout", "flow"]
    assert [k for k, m in MEASURES.items() if m.per_head][:3] == ["raw", "value", "value_raw"]
    assert MEASURES["flow"].needs_token and MEASURES["flow"].cumulative and not MEASURES["block"].per_head
    assert not MEASURES["value_raw"].rows_sum_to_one
    for key in ("raw", "value", "value_raw", "block", "rollout", "flow"):
        describe = MEASURES[key].describe
        assert describe.count(".") == 1 and "ignore" in describe  # one sentence that says what it leaves out
    with pytest.raises(ValueError, match="already registered"):
        measures.register(MEASURES["raw"])


def test_value_vectors_plus_bias_reproduce_the_attention_output(model):
    trace = run(model, DEFAULT)
    for layer in range(trace.num_layers):
        f, bias = measures.value_vectors(model, trace, layer)  # (H, T, D)
        # Σ_h Σ_j α^h_ij f_h(x_j) + b, summed in float64 independently of the measure's own code path
        rebuilt = torch.einsum("hij,hjd->id", trace.attention[layer].double(), f.double()) + bias.double()
        assert (rebuilt - trace.taps[layer]["attn"].double()).abs().max() <= 1e-5


def test_value_measures_are_alpha_times_the_length_of_each_value(model):
    trace = run(model, DEFAULT)
    raw, scaled = MEASURES["value_raw"].compute(model, trace), MEASURES["value"].compute(model, trace)
    for layer in range(trace.num_layers):
        f, _ = measures.value_vectors(model, trace, layer)
        expected = trace.attention[layer] * f.norm(dim=-1)[:, None, :]  # (H, T, T)
        torch.testing.assert_close(raw.heads[layer], expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(scaled.heads[layer], expected / expected.sum(-1, keepdim=True), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(scaled.layers.sum(-1), torch.ones(trace.num_layers, trace.seq_len))
    torch.testing.assert_close(raw.layers, raw.heads.mean(1))


def test_block_parts_sum_to_the_tap_the_docstring_names(model):
    trace = run(model, DEFAULT)
    tap = "norm1" if model.cfg.norm == "post" else "add1"
    for layer in range(trace.num_layers):
        parts = measures.block_parts(model, trace, layer)
        assert parts.tap == tap and parts.parts.shape == (trace.seq_len, trace.seq_len, model.cfg.d_model)
        rebuilt = parts.parts.sum(1) + parts.rest
        assert (rebuilt - trace.taps[layer][tap].double()).abs().max() <= 1e-4
        # the measure's lengths, from a Gram matrix per token, are the lengths of these parts
        torch.testing.assert_close(measures.block_norms(model, trace, layer), parts.parts.norm(dim=-1),
                                   rtol=1e-5, atol=1e-7)
    some = measures.block_parts(model, trace, 1, rows=[3, 0])
    full = measures.block_parts(model, trace, 1)
    torch.testing.assert_close(some.parts, full.parts[[3, 0]])
    assert some.rows == (3, 0)


def test_measures_leave_the_model_as_it_was(model):
    before = {name: t.clone() for name, t in model.state_dict().items()}
    trace = run(model, DEFAULT, ablate={(0, 1), (1, "attn")})
    refused = set()
    for measure in MEASURES.values():
        try:
            measure.compute(model, trace, **({"token": 2} if measure.needs_token else {}))
        except ValueError as err:  # DecompX decomposes Post-LN layers only, the whole-model measures the 2017 layer
            assert "Post-LN" in str(err) or "2017 encoder layer" in str(err), err  # a sentence saying what to change
            refused.add(measure.key)
    expected = {"decompx", "decompx_layer"} if model.cfg.norm == "pre" else set()
    if not model.cfg.bias:  # no biases: ALTI, Value Zeroing and DecompX refuse; the norm-based measures still hold
        expected |= {"alti", "alti_rollout", "value_zeroing", "value_zeroing_rollout", "decompx", "decompx_layer"}
    assert refused == expected
    measures.block_parts(model, trace, 0)
    measures.value_vectors(model, trace, 1)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_block_measure_rows_sum_to_one_and_count_the_residual(model):
    trace = run(model, DEFAULT)
    maps = MEASURES["block"].compute(model, trace)
    assert maps.heads is None and maps.layers.shape == (trace.num_layers, trace.seq_len, trace.seq_len)
    torch.testing.assert_close(maps.layers.sum(-1), torch.ones(trace.num_layers, trace.seq_len))
    value = MEASURES["value"].compute(model, trace).layers
    diagonal = lambda m: m.diagonal(dim1=1, dim2=2).mean()  # noqa: E731
    assert diagonal(maps.layers) > diagonal(value)  # the residual path adds each token's own vector


def test_shares_on_special_tokens_reproduce_issue_19s_table(pretrained, default_trace):
    specials = measures.special_positions(default_trace)
    assert specials == (0, default_trace.seq_len - 1)
    share = {key: measures.special_share(MEASURES[key].compute(pretrained, default_trace), specials)
             for key in ("raw", "value", "block")}
    table = {"raw": [0.29, 0.56, 0.60, 0.52, 0.62, 0.40], "value": [0.12, 0.17, 0.17, 0.13, 0.14, 0.09]}
    for key, expected in table.items():
        assert share[key].tolist() == pytest.approx(expected, abs=0.0051)
    # raw attention on the default sentence equals the mean over heads and rows of the weight on [CLS]/[SEP]
    torch.testing.assert_close(share["raw"], default_trace.attention[..., list(specials)].sum(-1).mean((1, 2)))
    assert (share["value"] < share["raw"] / 2).all() and (share["block"] < share["raw"] / 2).all()


def test_special_positions_are_the_models_own(tmp_path, pretrained):
    roberta = encoder.load_pretrained(checkpoints.build("roberta", tmp_path / "tiny-roberta"))
    trace = run(roberta, "the cat sat")
    assert trace.tokens[0] == "<s>" and trace.tokens[-1] == "</s>"
    assert measures.special_positions(trace) == (0, trace.seq_len - 1)
    assert measures.special_positions(run(pretrained, "the cat sat")) == (0, 4)  # [CLS] the cat sat [SEP]


def test_special_share_reads_only_the_computed_rows_and_never_divides_by_zero():
    layers = torch.zeros(1, 3, 3)
    layers[0, 1] = torch.tensor([2.0, 1.0, 1.0])
    assert measures.special_share(Maps(layers=layers, rows=(1,)), [0]).tolist() == [0.5]
    assert measures.special_share(Maps(layers=layers), [0]).tolist() == pytest.approx([0.5 / 3])  # zero rows count 0
    assert measures.special_share(Maps(layers=layers), []).tolist() == [0.0]


def test_normalise_rows_leaves_zero_and_underflowing_rows_finite():
    x = torch.tensor([[0.0, 0.0], [1e-45, 0.0], [1e-40, 3e-40], [1.0, 3.0]])
    out = measures.normalise_rows(x)
    assert torch.isfinite(out).all() and out[0].tolist() == [0.0, 0.0]
    assert out[3].tolist() == [0.25, 0.75] and out[2].sum() <= 1.0


def test_knocked_out_heads_contribute_nothing(pretrained):
    knocked = run(pretrained, DEFAULT, ablate={(2, 3), (2, 7), (4, "attn")})
    value, raw = MEASURES["value"].compute(pretrained, knocked), MEASURES["value_raw"].compute(pretrained, knocked)
    assert value.heads[2, [3, 7]].abs().max() == 0 and raw.heads[4].abs().max() == 0
    assert value.heads[2, 0].abs().max() > 0
    torch.testing.assert_close(value.layers[2].sum(-1), torch.ones(knocked.seq_len))  # the mean of the live heads
    assert value.layers[4].abs().max() == 0 and torch.isfinite(value.layers).all()
    for layer in (2, 4):
        f, bias = measures.value_vectors(pretrained, knocked, layer)
        rebuilt = torch.einsum("hij,hjd->id", knocked.attention[layer].double(), f.double()) + bias.double()
        assert (rebuilt - knocked.taps[layer]["attn"].double()).abs().max() <= 1e-5
        parts = measures.block_parts(pretrained, knocked, layer)
        assert (parts.parts.sum(1) + parts.rest - knocked.taps[layer]["norm1"].double()).abs().max() <= 1e-4
    # with its attention knocked out, layer 4's block is the residual path alone: each token is all its own
    torch.testing.assert_close(MEASURES["block"].compute(pretrained, knocked).layers[4], torch.eye(knocked.seq_len))


def test_rollout_and_flow_leave_knocked_out_heads_out_of_the_average(pretrained, default_trace):
    torch.testing.assert_close(MEASURES["rollout"].compute(pretrained, default_trace).layers,
                               attention_rollout(default_trace.attention))
    knocked = run(pretrained, DEFAULT, ablate={(1, 0), (1, 5), (0, "attn")})
    live = [h for h in range(12) if h not in (0, 5)]
    by_hand = knocked.attention.clone()
    by_hand[0] = 0.0  # no attention in layer 0: the residual path alone
    averaged = torch.stack([by_hand[0].mean(0), by_hand[1, live].mean(0), *by_hand[2:].mean(1)])[:, None]
    torch.testing.assert_close(MEASURES["rollout"].compute(pretrained, knocked).layers, attention_rollout(averaged))
    assert torch.equal(MEASURES["rollout"].compute(pretrained, knocked).layers[0], torch.eye(knocked.seq_len))
    flow = MEASURES["flow"].compute(pretrained, knocked, token=4)
    assert flow.layers[0, 4].tolist() == torch.eye(knocked.seq_len)[4].tolist()  # layer 0 passes token 4 on alone
    torch.testing.assert_close(flow.layers[:, 4], measures.attention_flow(averaged, 4))


def _hand_attention() -> torch.Tensor:
    # Chosen so that residual_attention gives A'_0 = [[1,0,0],[.5,.5,0],[.25,.25,.5]], A'_1 = [[.5,.5,0],[0,1,0],
    # [.25,.25,.5]] (A = 2A' − I, one head).
    a0 = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    a1 = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    return torch.stack([a0, a1])[:, None]  # (L=2, H=1, T=3, T=3)


def test_attention_flow_on_a_hand_computed_three_token_two_layer_graph():
    attention = _hand_attention()
    torch.testing.assert_close(residual_attention(attention)[1], torch.tensor(
        [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]], dtype=torch.float64))
    flow = measures.attention_flow(attention, token=2)
    # From token 2 after layer 1: to input 0 through (1,0) min(.25, 1) + (1,1) min(.25, .5) + (1,2) min(.5, .25)
    # = .75; to input 1 through (1,1) .25 + (1,2) .25 = .5; to input 2 through (1,2) min(.5, .5) = .5; / 1.75.
    torch.testing.assert_close(flow, torch.tensor([[0.25, 0.25, 0.5], [3 / 7, 2 / 7, 2 / 7]]))
    # rollout on the same graph says [.5, .25, .25]: flow is a different measure, not a renamed one
    torch.testing.assert_close(attention_rollout(attention)[1, 2], torch.tensor([0.5, 0.25, 0.25]))


def test_attention_flow_equals_networkx_on_the_pretrained_model(pretrained):
    trace = run(pretrained, "Cats sleep all day.")
    token = 2
    maps = MEASURES["flow"].compute(pretrained, trace, token=token)
    assert maps.rows == (token,) and maps.layers[:, :token].abs().max() == 0 and maps.layers[:, token + 1:].abs().max() == 0
    a = residual_attention(trace.attention).numpy()
    seq = trace.seq_len
    graph = nx.DiGraph()  # float capacities, as in Abnar & Zuidema's code
    for layer in range(trace.num_layers):
        for i in range(seq):
            for j in range(seq):
                graph.add_edge((layer + 1, i), (layer, j), capacity=float(a[layer, i, j]))
    for layer in range(trace.num_layers):
        flows = [nx.maximum_flow_value(graph, (layer + 1, token), (0, j)) for j in range(seq)]
        expected = torch.tensor(flows) / sum(flows)
        torch.testing.assert_close(maps.layers[layer, token].double(), expected.double(), atol=1e-7, rtol=0)
    assert measures.special_share(maps, measures.special_positions(trace)).shape == (trace.num_layers,)


def test_flow_asks_for_one_token_and_refuses_long_sentences(pretrained, default_trace):
    for token in (None, -1, default_trace.seq_len, 1.5, True):
        with pytest.raises(ValueError, match="one output token"):
            MEASURES["flow"].compute(pretrained, default_trace, token=token)
    long = run(pretrained, "word " * 200, max_tokens=measures.FLOW_MAX_TOKENS + 1)
    with pytest.raises(ValueError, match=f"up to {measures.FLOW_MAX_TOKENS} tokens"):
        MEASURES["flow"].compute(pretrained, long, token=1)


def test_dropout_traces_are_refused_with_a_sentence(pretrained):
    noisy = run(pretrained, DEFAULT, train=True)
    for key in ("value", "value_raw", "block"):
        with pytest.raises(ValueError, match="dropout"):
            MEASURES[key].compute(pretrained, noisy)


@pytest.mark.parametrize("text", ["\u200b", "a", "[CLS] [SEP]"], ids=["specials_only", "one_word", "typed_specials"])
def test_short_sentences_give_finite_maps(pretrained, text):
    trace = run(pretrained, text)
    for key, measure in MEASURES.items():
        maps = measure.compute(pretrained, trace, **({"token": trace.seq_len - 1} if measure.needs_token else {}))
        assert torch.isfinite(maps.layers).all(), key
        if measure.rows_sum_to_one:
            rows = maps.layers[:, list(maps.rows or range(trace.seq_len))].sum(-1)
            torch.testing.assert_close(rows, torch.ones_like(rows))
        share = measures.special_share(maps, measures.special_positions(trace))
        if len(measures.special_positions(trace)) == trace.seq_len:
            torch.testing.assert_close(share, torch.ones_like(share))


def test_512_tokens(pretrained):
    trace = run(pretrained, "The quick brown fox jumps over the lazy dog. " * 60, max_tokens=512)
    assert trace.seq_len == 512
    for key in ("value", "value_raw", "block"):
        maps = MEASURES[key].compute(pretrained, trace)
        assert torch.isfinite(maps.layers).all() and maps.layers.dtype == torch.float32
    parts = measures.block_parts(pretrained, trace, 5, rows=[511])  # one row of a long sentence: (1, 512, 384)
    assert (parts.parts.sum(1) + parts.rest - trace.taps[5]["norm1"][[511]].double()).abs().max() <= 1e-4


def test_underflowing_attention_shows_zero_never_nan():
    # d_model 8 with scaled-up W_Q/W_K: softmax saturates, many weights are exactly 0 in float32
    model = build_model(EncoderConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=64, seed=1))
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.qkv.weight[:16] *= 60.0
    trace = run(model, "a b c d e f g h i j")
    assert (trace.attention == 0).any()
    for key, measure in MEASURES.items():
        maps = measure.compute(model, trace, **({"token": 3} if measure.needs_token else {}))
        assert torch.isfinite(maps.layers).all() and not math.isnan(float(maps.layers.sum())), key
