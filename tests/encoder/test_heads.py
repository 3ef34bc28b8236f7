"""Inside the heads: per-head q, k, v, z taps of the same forward pass, knock-outs, and run()'s token limit."""

import hashlib
import math

import pytest
import torch

from encoder import EncoderConfig, build_model, load_pretrained, run
from encoder.model import HEAD_TAPS

CFG = EncoderConfig(d_model=48, num_heads=4, d_ff=96, num_layers=3, dropout=0.1, max_len=64, seed=11)
TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def model():
    return build_model(CFG)


@pytest.fixture(scope="module")
def trace(model):
    return run(model, TEXT)


def digest(model) -> str:
    """SHA-256 of every parameter and buffer: any change to the shared model changes it."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    return h.hexdigest()


def test_head_taps_have_the_documented_shapes(trace):
    T, H, dh = trace.seq_len, CFG.num_heads, CFG.d_head
    assert len(trace.heads) == CFG.num_layers
    for heads in trace.heads:
        assert set(heads) == set(HEAD_TAPS)
        for name in ("q", "k", "v", "z"):
            assert heads[name].shape == (H, T, dh) and heads[name].dtype == torch.float32, name
            assert heads[name].device.type == "cpu"
        assert heads["concat"].shape == (T, CFG.d_model)


@pytest.mark.parametrize("pick", range(6))
def test_q_dot_k_over_sqrt_dk_then_softmax_is_the_attention_row(trace, pick):
    gen = torch.Generator().manual_seed(pick)
    layer, head, i = (int(torch.randint(n, (1,), generator=gen)) for n in (CFG.num_layers, CFG.num_heads, trace.seq_len))
    h = trace.heads[layer]
    q_i, k = h["q"][head, i].double(), h["k"][head].double()  # (dh,), (T, dh)
    row = torch.softmax(k @ q_i / math.sqrt(CFG.d_head), dim=-1)
    torch.testing.assert_close(row, trace.attention[layer, head, i].double(), rtol=0, atol=1e-6)
    z_i = (trace.attention[layer, head, i].double()[:, None] * h["v"][head].double()).sum(0)  # sum_j a_ij v_j
    torch.testing.assert_close(z_i, h["z"][head, i].double(), rtol=0, atol=1e-6)


def test_q_k_v_are_the_projections_of_what_attention_read(model, trace):
    for layer, (mod, heads) in enumerate(zip(model.layers, trace.heads, strict=True)):
        x = trace.taps[layer]["input"]  # Post-LN: attention reads the layer input
        q, k, v = mod.attn.qkv(x).view(trace.seq_len, 3, CFG.num_heads, CFG.d_head).permute(1, 2, 0, 3)  # 3 x (H, T, dh)
        for name, expected in zip("qkv", (q, k, v), strict=True):
            torch.testing.assert_close(heads[name], expected, rtol=0, atol=1e-6)


def test_concatenated_heads_times_w_o_is_the_attention_output(model, trace):
    for layer, (mod, heads) in enumerate(zip(model.layers, trace.heads, strict=True)):
        z = heads["z"]  # (H, T, dh)
        concat = z.transpose(0, 1).reshape(trace.seq_len, CFG.d_model)  # (T, D): head h in columns h*dh..(h+1)*dh
        assert torch.equal(concat, heads["concat"])
        attn = concat @ mod.attn.out.weight.T + mod.attn.out.bias
        torch.testing.assert_close(attn, trace.taps[layer]["attn"], rtol=0, atol=1e-6)


def test_z_shares_memory_with_concat(trace):
    for heads in trace.heads:
        assert heads["z"].untyped_storage().data_ptr() == heads["concat"].untyped_storage().data_ptr()


# --- knock-outs ---------------------------------------------------------------------------------------------


def assert_bit_identical(a, b):
    assert torch.equal(a.attention, b.attention) and torch.equal(a.hidden_states, b.hidden_states)
    for ta, tb in zip(a.taps + a.heads, b.taps + b.heads, strict=True):
        assert ta.keys() == tb.keys() and all(torch.equal(ta[n], tb[n]) for n in ta)


@pytest.mark.parametrize("kwargs", [{}, {"train": True, "seed": 3}])
def test_knocking_out_nothing_is_bit_identical(model, kwargs):
    plain = run(model, TEXT, **kwargs)
    for nothing in (None, set(), frozenset(), []):
        other = run(model, TEXT, ablate=nothing, **kwargs)
        assert_bit_identical(plain, other)
        assert other.ablate == frozenset()


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (1, 2), (2, 3)])
def test_knocking_out_a_head_zeroes_exactly_its_slice_before_w_o(model, trace, layer, head):
    before = digest(model)
    knocked = run(model, TEXT, ablate={(layer, head)})
    assert digest(model) == before  # the shared model is untouched
    assert knocked.ablate == frozenset({(layer, head)})
    dh = CFG.d_head
    concat, intact = knocked.heads[layer]["concat"], trace.heads[layer]["concat"]
    mine = torch.zeros(CFG.d_model, dtype=torch.bool)
    mine[head * dh : (head + 1) * dh] = True
    assert (concat[:, mine] == 0).all() and (intact[:, mine] != 0).any()
    assert torch.equal(concat[:, ~mine], intact[:, ~mine])  # the other heads of that layer are unchanged
    assert torch.equal(knocked.attention[layer], trace.attention[layer])  # the pattern itself is still computed
    for earlier in range(layer):
        assert torch.equal(knocked.taps[earlier]["output"], trace.taps[earlier]["output"])
    assert not torch.allclose(knocked.output, trace.output, atol=1e-4)  # and it does change what follows


def test_knocking_out_several_heads_and_layers_at_once(model, trace):
    knocked = run(model, TEXT, ablate=iter([(0, 1), (0, 3), [2, 0]]))  # any iterable, even a one-shot iterator
    assert knocked.ablate == frozenset({(0, 1), (0, 3), (2, 0)})
    z = knocked.heads[0]["z"]
    assert (z[[1, 3]] == 0).all() and torch.equal(z[[0, 2]], trace.heads[0]["z"][[0, 2]])
    assert (knocked.heads[2]["z"][0] == 0).all()


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_knocking_out_a_sublayer_zeroes_its_output(norm):
    model = build_model(CFG.replace(norm=norm))
    before = digest(model)
    attn_off = run(model, TEXT, ablate={(1, "attn")})
    ffn_off = run(model, TEXT, ablate={(1, "ffn")})
    assert digest(model) == before
    t = attn_off.taps[1]
    assert (t["attn"] == 0).all()
    assert torch.equal(t["add1"], t["input"])  # x + 0, in both placements
    t = ffn_off.taps[1]
    assert (t["ffn"] == 0).all() and (t["ffn_hidden"] != 0).any()
    residual = t["norm1"] if norm == "post" else t["add1"]
    assert torch.equal(t["add2"], residual)


@pytest.mark.parametrize(
    ("ablate", "words"),
    [
        ({(3, 0)}, "layer 3 does not exist; choose a layer from 0 to 2"),
        ({(-1, 0)}, "layer -1 does not exist"),
        ({(0, 4)}, "head 4 does not exist; choose a head from 0 to 3"),
        ({(0, "mlp")}, "'mlp' is no sub-layer; use 'attn', 'ffn'"),
        ({(0, True)}, "head True does not exist"),
        ({(0, 1.0)}, "head 1.0 does not exist"),
        ({(0,)}, "must be a pair"),
        ({0}, "must be a pair"),
        ("0,1", "must be a set of pairs"),
        (3, "must be a set of pairs"),
    ],
)
def test_bad_knockouts_are_value_errors_that_say_what_to_change(model, ablate, words):
    with pytest.raises(ValueError, match=words):
        run(model, TEXT, ablate=ablate)


# --- max_tokens ---------------------------------------------------------------------------------------------


def test_max_tokens_truncates_the_tokenisation(model, trace):
    cut = run(model, TEXT, max_tokens=6)
    assert cut.seq_len == 6 and cut.truncated and cut.max_tokens == 6
    assert cut.tokens == trace.tokens[:5] + ["[SEP]"]
    assert cut.attention.shape[-1] == 6 and cut.heads[0]["q"].shape[1] == 6
    fits = run(model, TEXT, max_tokens=trace.seq_len)
    assert not fits.truncated and fits.tokens == trace.tokens
    assert trace.max_tokens == CFG.max_len  # the default is the model's max_len


@pytest.mark.parametrize("bad", [1, 0, 65, 2.5, True, "256"])
def test_max_tokens_out_of_range_is_a_value_error(model, bad):
    with pytest.raises(ValueError, match="max_tokens=.* from 2 to this model's max_len=64"):
        run(model, TEXT, max_tokens=bad)


def test_pretrained_at_the_sentence_transformers_limit():
    model = load_pretrained()
    trace = run(model, "word " * 400, max_tokens=256)
    assert trace.seq_len == 256 and trace.tokens[-1] == "[SEP]" and trace.truncated
    with pytest.raises(ValueError, match="max_len=512"):
        run(model, "word", max_tokens=513)
