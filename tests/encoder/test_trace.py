"""run(model, text) -> Trace: shapes, tokens, truncation, statistics, NaN/Inf tracking, and no shared state touched."""

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from encoder import TAPS, EncoderConfig, Trace, build_model, run
from encoder.trace import STAT_COLUMNS

CFG = EncoderConfig(d_model=32, num_heads=4, d_ff=48, num_layers=2, dropout=0.2, max_len=64, seed=5)
TEXT = "The cat sat on the mat, and the dog didn't mind."


@pytest.fixture(scope="module")
def model():
    return build_model(CFG)


@pytest.fixture(scope="module")
def trace(model) -> Trace:
    return run(model, TEXT)


def forward(model, ids: list[int]):
    with torch.no_grad():
        return model(torch.tensor([ids]))


def test_shapes(trace):
    T = len(trace.tokens)
    L, H, D = CFG.num_layers, CFG.num_heads, CFG.d_model
    assert T == len(trace.token_ids) == trace.seq_len > 10
    assert trace.attention.shape == (L, H, T, T)
    assert trace.hidden_states.shape == (L + 1, T, D)
    assert len(trace.taps) == L
    for taps in trace.taps:
        assert list(taps) == list(TAPS)
        for name, tensor in taps.items():
            assert tensor.shape == ((T, CFG.d_ff) if name == "ffn_hidden" else (T, D)), name
            assert tensor.device.type == "cpu" and tensor.dtype == torch.float32
    assert (trace.num_layers, trace.num_heads) == (L, H)
    assert trace.device == "cpu" and trace.train is False and trace.truncated is False
    assert trace.config == CFG and trace.text == TEXT


def test_tokens_are_wordpiece_with_cls_and_sep(trace):
    assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    assert trace.token_ids[0] == 101 and trace.token_ids[-1] == 102
    assert trace.tokens[1:5] == ["the", "cat", "sat", "on"]
    assert "'" in trace.tokens and "," in trace.tokens


def test_trace_equals_a_plain_forward_pass(model, trace):
    out, patterns, taps = forward(model, trace.token_ids)
    assert torch.equal(trace.attention, torch.stack([p[0] for p in patterns]))
    assert torch.equal(trace.hidden_states[-1], out[0])
    with torch.no_grad():
        assert torch.equal(trace.hidden_states[0], model.embed(torch.tensor([trace.token_ids]))[0])
    for i, layer_taps in enumerate(taps):
        assert torch.equal(trace.hidden_states[i + 1], layer_taps["output"][0])
        for name in TAPS:
            assert torch.equal(trace.taps[i][name], layer_taps[name][0]), (i, name)
    assert trace.final is None and torch.equal(trace.output, trace.hidden_states[-1])


def test_attention_rows_sum_to_one(trace):
    torch.testing.assert_close(trace.attention.sum(-1), torch.ones(trace.attention.shape[:-1]), rtol=0, atol=1e-6)


def test_final_layer_norm_is_reported_separately():
    model = build_model(CFG.replace(norm="pre", final_norm=True))
    with torch.no_grad():  # a non-trivial final LayerNorm
        model.final_ln.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(0))
    trace = run(model, TEXT)
    assert trace.final is not None and trace.final.shape == trace.hidden_states[-1].shape
    with torch.no_grad():
        expected = model.final_ln(trace.hidden_states[-1])
    torch.testing.assert_close(trace.final, expected, rtol=0, atol=1e-6)
    assert torch.equal(trace.output, trace.final)
    assert torch.equal(trace.hidden_states[-1], trace.taps[-1]["output"])


def test_truncation_at_max_len():
    model = build_model(CFG.replace(max_len=8))
    fits = run(model, "a b c d e f")  # 6 words + [CLS] + [SEP] = 8
    assert fits.tokens == ["[CLS]", "a", "b", "c", "d", "e", "f", "[SEP]"] and not fits.truncated
    cut = run(model, "a b c d e f g h i j")
    assert cut.truncated is True
    assert cut.tokens == ["[CLS]", "a", "b", "c", "d", "e", "f", "[SEP]"]
    assert cut.attention.shape[-1] == 8 and cut.hidden_states.shape[1] == 8


@pytest.mark.parametrize("text", ["", " ", "   \n\t ", None, b"bytes"])
def test_empty_or_non_text_input_is_a_value_error(model, text):
    with pytest.raises(ValueError, match="empty"):
        run(model, text)


def test_vocab_smaller_than_the_tokenizer_is_a_value_error():
    model = build_model(CFG.replace(vocab_size=1000))
    with pytest.raises(ValueError, match="vocab_size=1000"):
        run(model, "zebra")  # id 29145


# --- stats ---------------------------------------------------------------------------------------------------


def expected_stats(tensor: torch.Tensor) -> list[float]:
    x = tensor.double().numpy().ravel()
    return [x.mean(), x.std(), x.min(), x.max(), np.sqrt((x**2).mean()), (x == 0).mean(), (~np.isfinite(x)).sum()]


def test_stats_has_one_row_per_layer_and_tap_in_tap_order(trace):
    df = trace.stats()
    assert list(df.columns) == ["layer", "tap", *STAT_COLUMNS]
    assert list(zip(df["layer"], df["tap"], strict=True)) == [(i, t) for i in range(CFG.num_layers) for t in TAPS]


def test_stats_values_match_direct_computation(trace):
    df = trace.stats()
    for row in df.itertuples(index=False):
        expected = expected_stats(trace.taps[row.layer][row.tap])
        actual = [getattr(row, c) for c in STAT_COLUMNS]
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-12, err_msg=f"{row.layer}/{row.tap}")
    relu = df[df["tap"] == "ffn_hidden"]
    assert (relu["zero_frac"] > 0.2).all() and (relu["min"] == 0).all()  # ReLU zeros are counted
    assert (df["nonfinite"] == 0).all() and df["nonfinite"].dtype.kind == "i"


def test_stats_returns_a_copy(trace):
    df = trace.stats()
    df.loc[:, "mean"] = 123.0
    assert (trace.stats()["mean"] != 123.0).all()


@pytest.mark.parametrize(
    "poison, where",
    [
        ("layers.0.ffn.w2.weight", (0, "ffn")),
        ("layers.1.attn.out.bias", (1, "attn")),
        ("layers.0.ln2.weight", (0, "norm2")),
        ("embed.tok.weight", (0, "input")),
    ],
)
@pytest.mark.parametrize("value", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_nonfinite_values_are_counted_and_located(poison, where, value):
    model = build_model(CFG)
    with torch.no_grad():
        tensor = model.get_parameter(poison)
        if poison == "embed.tok.weight":
            tensor[101, 0] = value  # the [CLS] row
        else:
            tensor.view(-1)[0] = value
    trace = run(model, TEXT)
    df = trace.stats()
    assert trace.first_nonfinite() == where
    layer, tap = where
    order = [(i, t) for i in range(CFG.num_layers) for t in TAPS]
    for row in df.itertuples(index=False):
        count = int((~torch.isfinite(trace.taps[row.layer][row.tap])).sum())
        assert row.nonfinite == count
        if order.index((row.layer, row.tap)) < order.index(where):
            assert count == 0
    assert df.set_index(["layer", "tap"]).loc[where, "nonfinite"] > 0


def test_nonfinite_is_located_in_the_placements_own_order():
    model = build_model(CFG.replace(norm="pre"))
    with torch.no_grad():
        model.layers[0].ln1.weight[0] = float("nan")  # Pre-LN: norm1 is computed first, then attention reads it
    trace = run(model, TEXT)
    stats = trace.stats().set_index(["layer", "tap"])
    assert stats.loc[(0, "attn"), "nonfinite"] > 0 and stats.loc[(0, "norm1"), "nonfinite"] > 0
    assert trace.first_nonfinite() == (0, "norm1")


def test_clean_run_has_no_nonfinite(trace):
    assert trace.first_nonfinite() is None


def test_replaced_taps_get_their_own_statistics(trace):
    assert trace.stats()["nonfinite"].sum() == 0  # computed and cached on the original first
    taps = [dict(layer) for layer in trace.taps]
    taps[1]["norm1"] = torch.full_like(taps[1]["norm1"], float("nan"))
    poisoned = dataclasses.replace(trace, taps=taps)
    stats = poisoned.stats().set_index(["layer", "tap"])
    assert stats.loc[(1, "norm1"), "nonfinite"] == taps[1]["norm1"].numel()
    assert poisoned.first_nonfinite() == (1, "norm1")
    assert trace.stats()["nonfinite"].sum() == 0 and trace.first_nonfinite() is None


# --- the attention arena (encoder/_buffers.py) ------------------------------------------------------------------


def test_run_keeps_all_layers_attention_in_one_buffer(trace):
    storage = trace.attention.untyped_storage()
    assert storage.nbytes() == trace.attention.numel() * 4  # one (L, 1, H, T, T) tensor, no stack copy
    with torch.no_grad():  # outside run() the layers allocate their own patterns
        _, patterns, _ = build_model(CFG)(torch.tensor([trace.token_ids]))
    assert len({p.untyped_storage().data_ptr() for p in patterns}) == CFG.num_layers


def test_concurrent_runs_on_one_model_keep_their_own_buffers(model):
    texts = ["one two", "The cat sat on the mat.", TEXT, "a b c d e f g h i j k l m n o p q r s t u v w x y z"]
    expected = [run(model, t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: run(model, t), texts * 4))
    for trace, want in zip(got, expected * 4, strict=True):
        assert torch.equal(trace.attention, want.attention) and torch.equal(trace.output, want.output)


# --- no shared state touched --------------------------------------------------------------------------------


def snapshot(model):
    return (
        {k: v.clone() for k, v in model.state_dict().items()},
        [m.training for m in model.modules()],
        [p.requires_grad for p in model.parameters()],
    )


@pytest.mark.parametrize("kwargs", [{}, {"train": True}, {"train": True, "seed": 3}, {"device": "cpu"}])
def test_run_does_not_mutate_the_model(kwargs):
    model = build_model(CFG)
    state, training, grads = snapshot(model)
    rng = torch.get_rng_state()
    run(model, TEXT, **kwargs)
    after_state, after_training, after_grads = snapshot(model)
    assert state.keys() == after_state.keys()
    for name in state:
        assert torch.equal(state[name], after_state[name]), name
    assert training == after_training and grads == after_grads
    assert torch.equal(torch.get_rng_state(), rng)


def test_run_on_a_model_in_training_mode_keeps_the_flag():
    model = build_model(CFG).train()
    run(model, TEXT, train=True)
    assert all(m.training for m in model.modules())


def test_train_mode_differs_from_eval_and_is_seeded(model, trace):
    train_a = run(model, TEXT, train=True, seed=1)
    train_b = run(model, TEXT, train=True, seed=1)
    train_c = run(model, TEXT, train=True, seed=2)
    assert train_a.train is True
    assert not torch.allclose(train_a.output, trace.output, atol=1e-3)
    assert torch.equal(train_a.output, train_b.output)
    assert torch.equal(train_a.attention, train_b.attention)
    assert not torch.allclose(train_a.output, train_c.output, atol=1e-3)
    default = run(model, TEXT, train=True)
    assert torch.equal(default.output, run(model, TEXT, train=True, seed=CFG.seed).output)
    assert torch.equal(run(model, TEXT).output, trace.output)  # eval after train is unchanged


def test_train_mode_drops_embeddings_with_rate_p(model, trace):
    dropped = run(model, TEXT, train=True, seed=4).hidden_states[0]
    clean = trace.hidden_states[0]
    kept = dropped != 0
    assert 0.05 < (~kept).float().mean().item() < 0.4  # p = 0.2 over T * 32 values
    torch.testing.assert_close(dropped[kept], clean[kept] / (1 - CFG.dropout))


def test_train_mode_without_dropout_equals_eval():
    model = build_model(CFG.replace(dropout=0.0))
    assert torch.equal(run(model, TEXT, train=True).output, run(model, TEXT).output)
