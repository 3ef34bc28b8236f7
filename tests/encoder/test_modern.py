"""The settings of later encoders against references written from their definitions: RoPE from the RoFormer
equations, GeGLU/SwiGLU from Shazeer's, the sliding window against an explicit mask; and their validation."""

import math

import pytest
import torch
import torch.nn.functional as F

from encoder import EncoderConfig, build_model, run
from encoder.model import HEAD_TAPS, flow_order, placement
from encoder.rotary import rope_angles, rotate
from encoder.window import band_mask, banded_attention

SMALL = dict(d_model=32, num_heads=4, d_ff=48, num_layers=3, dropout=0.0, vocab_size=64, max_len=128)
MODERN = dict(norm="pre", final_norm=True, embed_norm=True, positional="rotary", ffn="geglu", bias=False,
              window=8, global_every=3, rope_theta=160000.0, first_norm1=False)


def small(**changes) -> EncoderConfig:
    return EncoderConfig(**{**SMALL, **changes})


@torch.no_grad()
def randomize(model, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model


# --- RoPE --------------------------------------------------------------------------------------------------------


def roformer_matrix(m: int, d: int, theta: float) -> torch.Tensor:
    """R^d_{Theta,m} of RoFormer (eq. 15): blocks [[cos m t_i, -sin m t_i], [sin m t_i, cos m t_i]], t_i = theta^(-2i/d)."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a = m * theta ** (-2 * i / d)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return R


def to_interleaved(d: int) -> torch.Tensor:
    """P with (P x)[2i] = x[i], (P x)[2i + 1] = x[i + d/2]: our pairing (i, i + d/2) onto RoFormer's (2i, 2i + 1)."""
    P = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        P[2 * i, i] = P[2 * i + 1, i + d // 2] = 1
    return P


@pytest.mark.parametrize("d, theta", [(8, 10000.0), (16, 160000.0), (2, 10.0)])
def test_rotary_is_roformers_rotation_in_our_pairing(d, theta):
    T = 50
    x = torch.randn(3, T, d, generator=torch.Generator().manual_seed(0))
    cos, sin = rope_angles(T, d, theta, torch.device("cpu"))
    ours = rotate(x, cos, sin).double()
    P = to_interleaved(d)
    for m in range(T):
        expected = x[:, m].double() @ (P.T @ roformer_matrix(m, d, theta) @ P).T
        torch.testing.assert_close(ours[:, m], expected, rtol=0, atol=2e-5)


def test_rotary_scores_depend_on_the_distance_only():
    d, T = 16, 40
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(d, generator=gen), torch.randn(d, generator=gen)
    cos, sin = rope_angles(T, d, 10000.0, torch.device("cpu"))
    rq, rk = rotate(q.expand(T, d), cos, sin), rotate(k.expand(T, d), cos, sin)  # the same q and k at every position
    scores = rq @ rk.T  # (T, T): q at m against k at n
    for shift in (-7, 0, 3, 20):
        diagonal = torch.diagonal(scores, offset=shift)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=0, atol=1e-4)
    assert torch.diagonal(scores, 0)[0] != pytest.approx(torch.diagonal(scores, 5)[0].item(), abs=1e-3)


def test_attention_with_rotary_positions_follows_the_equations():
    cfg = small(positional="rotary")
    attn = randomize(build_model(cfg)).layers[1].attn
    x = torch.randn(1, 12, cfg.d_model, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out, pattern, heads = attn(x, None)
    W, b = attn.qkv.weight.double(), attn.qkv.bias.double()
    q, k, v = (x[0].double() @ W.T + b).split(cfg.d_model, dim=-1)  # (T, D) each
    P, dh = to_interleaved(cfg.d_head), cfg.d_head
    z = []
    for h in range(cfg.num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        turn = lambda t, m: P.T @ roformer_matrix(m, dh, cfg.rope_theta) @ P @ t  # noqa: E731
        qr = torch.stack([turn(q[m, cols], m) for m in range(12)])
        kr = torch.stack([turn(k[n, cols], n) for n in range(12)])
        a = torch.softmax(qr @ kr.T / math.sqrt(dh), dim=-1)
        torch.testing.assert_close(pattern[0, h].double(), a, rtol=0, atol=1e-5)
        torch.testing.assert_close(heads["q"][0, h].double(), qr, rtol=0, atol=1e-5)  # the tap is the turned q
        z.append(a @ v[:, cols])
    expected = torch.cat(z, dim=-1) @ attn.out.weight.double().T + attn.out.bias.double()
    torch.testing.assert_close(out[0].double(), expected, rtol=0, atol=1e-5)


def test_rotary_adds_nothing_to_the_embeddings_and_breaks_order_blindness():
    model = randomize(build_model(small(positional="rotary")))
    ids = torch.tensor([[3, 17, 42, 8, 59, 23, 11]])
    perm = torch.tensor([4, 0, 6, 2, 1, 5, 3])
    with torch.no_grad():
        assert model.embed.positions(7) is None
        torch.testing.assert_close(model.embed(ids), model.embed.tok(ids))  # no positional term, no LayerNorm
        out, _, _ = model(ids)
        out_p, _, _ = model(ids[:, perm])
    assert (out_p - out[:, perm]).abs().max().item() > 1e-2


# --- gated feed-forward ------------------------------------------------------------------------------------------


def gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))  # x * Phi(x)


def silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + torch.exp(-x))  # x * sigmoid(x)


@pytest.mark.parametrize("ffn, act", [("geglu", gelu), ("swiglu", silu)])
@pytest.mark.parametrize("bias", [True, False])
def test_gated_ffn_follows_its_definition(ffn, act, bias):
    cfg = small(ffn=ffn, bias=bias)
    layer = randomize(build_model(cfg)).layers[0].ffn
    x = torch.randn(2, 5, cfg.d_model, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        hidden, out = layer(x)
    w1 = layer.w1.weight.double()
    W, V = w1[: cfg.d_ff], w1[cfg.d_ff :]  # the activated half, then the linear half
    b, c = (layer.w1.bias.double()[: cfg.d_ff], layer.w1.bias.double()[cfg.d_ff :]) if bias else (0.0, 0.0)
    expected_hidden = act(x.double() @ W.T + b) * (x.double() @ V.T + c)  # Shazeer 2020: act(xW + b) * (xV + c)
    expected = expected_hidden @ layer.w2.weight.double().T + (layer.w2.bias.double() if bias else 0.0)
    assert hidden.shape == (2, 5, cfg.d_ff) and layer.w1.weight.shape == (2 * cfg.d_ff, cfg.d_model)
    torch.testing.assert_close(hidden.double(), expected_hidden, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5)


def test_gelu_tanh_is_the_tanh_approximation():
    layer = randomize(build_model(small(activation="gelu_tanh"))).layers[0].ffn
    x = torch.randn(3, 4, 32, generator=torch.Generator().manual_seed(4))
    pre = layer.w1(x)
    expected = 0.5 * pre * (1 + torch.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre**3)))
    torch.testing.assert_close(layer.hidden(x), expected, rtol=0, atol=1e-6)


def test_bias_off_leaves_no_bias_anywhere():
    model = build_model(small(**MODERN))
    assert not [name for name, _ in model.named_parameters() if name.endswith("bias")]
    assert all(p.abs().sum() > 0 for p in model.parameters())


# --- sliding window ----------------------------------------------------------------------------------------------


def explicit(q, k, v, radius, pad_mask):
    """Attention with the band written out as a full (T, T) mask: the definition the blocks must equal."""
    T = q.shape[2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    outside = band_mask(T, radius)[None, None] | (pad_mask[:, None, None, :] if pad_mask is not None else False)
    pattern = torch.softmax(scores.masked_fill(outside, float("-inf")), dim=-1)
    return pattern, pattern @ v


@pytest.mark.parametrize("radius", [1, 4, 16, 40])
@pytest.mark.parametrize("T", [2, 5, 17, 32, 33, 64, 100])
def test_banded_attention_equals_the_explicit_mask(radius, T):
    gen = torch.Generator().manual_seed(T * 100 + radius)
    q, k, v = (torch.randn(2, 3, T, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([T, max(1, T - 7)])
    pad = torch.arange(T)[None, :] >= lengths[:, None]
    garbage = torch.full((2, 3, T, T), 7.0, dtype=torch.float64)  # the trace's buffer is reused: it must be zeroed
    pattern, z = banded_attention(q, k, v, radius, pad, garbage, lambda a: a)
    ref_pattern, ref_z = explicit(q, k, v, radius, pad)
    real = ~pad  # real queries; a padded query's row is finite here and has no meaning
    assert pattern is garbage
    torch.testing.assert_close(pattern[real[:, None, :, None].expand_as(pattern)],
                               ref_pattern[real[:, None, :, None].expand_as(pattern)], rtol=0, atol=1e-12)
    torch.testing.assert_close(z[real[:, None, :, None].expand_as(z)], ref_z[real[:, None, :, None].expand_as(z)],
                               rtol=0, atol=1e-12)
    assert (pattern[:, :, band_mask(T, radius)] == 0).all()
    assert torch.isfinite(pattern).all() and torch.isfinite(z).all()


def test_banded_attention_has_the_explicit_masks_gradients():
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 70, 8, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    weights = torch.randn(1, 2, 70, 8, generator=gen, dtype=torch.float64)
    grads = []
    for attend in (lambda: banded_attention(q, k, v, 6, None, None, lambda a: a), lambda: explicit(q, k, v, 6, None)):
        _, z = attend()
        grads.append(torch.autograd.grad((z * weights).sum(), (q, k, v)))
    for ours, ref in zip(*grads, strict=True):
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)


def test_a_windowed_model_traces_the_band_and_global_layers_in_full():
    cfg = small(window=6, global_every=2, num_layers=4, vocab_size=30522)
    model = randomize(build_model(cfg))
    trace = run(model, "the window lets each token see its neighbours only , so far words get no weight at all")
    T = trace.seq_len
    assert T >= 20 and [cfg.layer_window(i) for i in range(4)] == [0, 6, 0, 6]
    far = band_mask(T, 3)
    for layer in (1, 3):
        assert (trace.attention[layer][:, far] == 0).all() and (trace.attention[layer][:, ~far] > 0).all()
    for layer in (0, 2):
        assert (trace.attention[layer] > 0).all()
    torch.testing.assert_close(trace.attention.sum(-1), torch.ones(4, cfg.num_heads, T), rtol=0, atol=1e-5)
    with torch.no_grad():
        _, patterns, _ = model(torch.tensor([trace.token_ids]))
    torch.testing.assert_close(trace.attention, torch.stack(patterns)[:, 0], rtol=0, atol=0)


def test_a_window_wider_than_the_sentence_is_global_attention():
    wide, plain = build_model(small(window=64)), build_model(small())
    plain.load_state_dict(wide.state_dict())
    ids = torch.randint(0, 64, (1, 20), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert torch.equal(wide(ids)[0], plain(ids)[0])


# --- the ModernBERT-style layer, ALBERT-style sharing, ELECTRA-style embeddings, RoBERTa-style positions -----------


def test_the_placement_table_is_what_a_modern_layer_computes():
    model = randomize(build_model(small(**MODERN)))
    ids = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(7))
    assert type(model.layers[0].ln1).__name__ == "Identity" and type(model.layers[1].ln1).__name__ == "LayerNorm"
    with torch.no_grad():
        out, _, taps = model(ids)
        for layer, t in zip(model.layers, taps, strict=True):
            assert set(t) == {*flow_order("pre"), *HEAD_TAPS}
            for wire in placement("pre"):
                inputs = [t[tail] for tail, _ in wire.inputs]
                if wire.op == "+":
                    expected = inputs[0] + inputs[1]
                elif wire.op == "attn":
                    expected = layer.attn(inputs[0], None)[0]
                elif wire.op == "w1":
                    expected = layer.ffn.hidden(inputs[0])
                elif wire.op == "w2":
                    expected = layer.ffn.w2(inputs[0])
                elif wire.op in ("ln1", "ln2"):
                    expected = getattr(layer, wire.op)(inputs[0])
                else:
                    continue
                torch.testing.assert_close(t[wire.tap], expected, rtol=0, atol=1e-6)
        assert t["norm1"] is not taps[0]["norm1"] and taps[0]["norm1"] is taps[0]["input"]  # layer 0: ln1 = identity
        torch.testing.assert_close(out, model.final_ln(taps[-1]["output"]), rtol=0, atol=0)


def test_shared_layers_apply_one_layer_again_and_again():
    model = randomize(build_model(small(share_layers=True, num_layers=4)))
    first = dict(model.layers[0].named_parameters())
    assert all(p is first[n] for layer in model.layers for n, p in layer.named_parameters())
    x = torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        out, _, _ = model.forward_embedded(x)
        y = x
        for _ in range(4):
            y = model.layers[0](y)[0]
    torch.testing.assert_close(out, y, rtol=0, atol=0)
    assert torch.equal(next(build_model(small(share_layers=True)).parameters()), next(build_model(
        small(share_layers=True)).parameters()))


def test_narrow_embeddings_are_projected_to_d_model():
    model = randomize(build_model(small(d_embed=16, positional="learned", type_vocab_size=2, embed_norm=True)))
    e = model.embed
    ids = torch.tensor([[5, 0, 63, 5, 9]])
    assert e.tok.weight.shape == (64, 16) and e.proj.weight.shape == (32, 16)
    expected = e.proj(e.ln(e.tok.weight[ids] + e.pos.weight[:5] + e.seg.weight[0]))
    torch.testing.assert_close(e(ids), expected, rtol=0, atol=1e-6)


def test_offset_positions_skip_padding_as_roberta_does():
    model = randomize(build_model(small(positional="learned", pos_offset=2, max_len=16)))
    e = model.embed
    assert e.pos.weight.shape == (18, 32)
    plain = torch.tensor([[5, 6, 7]])
    torch.testing.assert_close(e(plain), e.tok(plain) + e.pos.weight[2:5], rtol=0, atol=0)
    padded = torch.tensor([[5, 1, 6, 7, 1]])  # id 1 = pos_offset - 1, the padding token
    rows = torch.tensor([[2, 1, 3, 4, 1]])  # transformers: cumsum(ids != pad) * (ids != pad) + pad
    torch.testing.assert_close(e(padded), e.tok(padded) + e.pos(rows), rtol=0, atol=0)


def test_trace_records_the_bundled_tokenizers_special_tokens():
    trace = run(build_model(small(vocab_size=30522)), "Paris is the [MASK] of France [SEP] really")
    assert trace.special_tokens == ("[CLS]", "[SEP]")
    typed = trace.tokens.index("[SEP]")
    assert trace.special_positions == (0, typed, trace.seq_len - 1) and 0 < typed < trace.seq_len - 1
    assert trace.tokens.index("[MASK]") not in trace.special_positions


# --- validation --------------------------------------------------------------------------------------------------

INVALID = [
    (dict(window=7), ["window=7", "even", "window=6 or 8"]),
    (dict(window=-2), ["window=-2", "between 0 and 8192"]),
    (dict(window=300), ["window=300", "covers every token", "window=0"]),
    (dict(global_every=2.0), ["global_every=2.0", "whole number"]),
    (dict(rope_theta=1.0), ["rope_theta=1.0", "above 1", "10000"]),
    (dict(rope_theta_local=math.nan), ["rope_theta_local=nan"]),
    (dict(rope_theta="1e4"), ["rope_theta='1e4'"]),
    (dict(positional="rotary", d_model=36, num_heads=4), ["positional='rotary'", "d_head", "even", "9"]),
    (dict(first_norm1=False), ["first_norm1=False", "norm='pre'"]),
    (dict(first_norm1=False, norm="pre", share_layers=True), ["share_layers=True", "first_norm1=False"]),
    (dict(pos_offset=2), ["pos_offset=2", "positional='learned'"]),
    (dict(pos_offset=17, positional="learned"), ["pos_offset=17", "between 0 and 16"]),
    (dict(d_embed=4), ["d_embed=4", "0", "between 8 and 4096"]),
    (dict(d_embed=True), ["d_embed=True"]),
    (dict(ffn="reglu"), ["ffn='reglu'", "'plain', 'geglu', 'swiglu'"]),
    (dict(bias=0), ["bias=0", "true or false"]),
    (dict(share_layers="yes"), ["share_layers='yes'", "true or false"]),
]


@pytest.mark.parametrize("changes, words", INVALID, ids=[repr(c) for c, _ in INVALID])
def test_every_invalid_modern_setting_names_its_field_and_the_fix(changes, words):
    with pytest.raises(ValueError) as info:
        small(**changes)
    for word in words:
        assert word in str(info.value), f"{word!r} missing from {info.value}"


def test_the_modern_defaults_are_the_2017_encoder():
    cfg = EncoderConfig()
    assert (cfg.ffn, cfg.bias, cfg.window, cfg.global_every, cfg.pos_offset, cfg.d_embed) == ("plain", True, 0, 0, 0, 0)
    assert (cfg.share_layers, cfg.first_norm1, cfg.rope_theta, cfg.rope_theta_local) == (False, True, 10000.0, 10000.0)
    assert cfg.ffn_activation == "relu" and small(ffn="swiglu").ffn_activation == "silu"
    assert EncoderConfig.from_dict(small(**MODERN).to_dict()) == small(**MODERN)


def test_a_gated_w1_is_initialised_as_two_projections():
    layer = build_model(small(ffn="geglu", d_ff=96)).layers[0]
    bound = math.sqrt(6.0 / (32 + 96))  # W and V are each d_ff x d_model
    assert 0.9 * bound < layer.ffn.w1.weight.abs().max().item() <= bound
    assert F.gelu is layer.ffn.act
