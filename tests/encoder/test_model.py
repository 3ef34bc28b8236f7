"""The from-scratch encoder against PyTorch's own layers (the oracle), plus the properties the seeds promise."""

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from encoder import TAPS, Encoder, EncoderConfig, build_model, pick_device
from encoder.model import HEAD_TAPS, flow_edges, flow_order, placement, sinusoidal_table

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(d_model=32, num_heads=4, d_ff=48, num_layers=3, dropout=0.0, vocab_size=64, max_len=16)
LENGTHS = [7, 4, 1]  # a batch of three sentences padded to 7 tokens


def small(**changes) -> EncoderConfig:
    return EncoderConfig(**{**SMALL, **changes})


def pad_mask(lengths: list[int], seq: int) -> torch.Tensor:
    """(B, T) bool, True at padding."""
    return torch.arange(seq)[None, :] >= torch.tensor(lengths)[:, None]


@torch.no_grad()
def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-zero biases and non-unit LayerNorms, so a swapped or dropped parameter shows in the output."""
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model


@torch.no_grad()
def copy_into_torch(ref: nn.TransformerEncoderLayer, layer) -> None:
    """Our layer's weights into PyTorch's: in_proj = [W_Q; W_K; W_V], out_proj = W_O, linear1/2 = FFN."""
    ref.self_attn.in_proj_weight.copy_(layer.attn.qkv.weight)
    ref.self_attn.in_proj_bias.copy_(layer.attn.qkv.bias)
    ref.self_attn.out_proj.load_state_dict(layer.attn.out.state_dict())
    ref.linear1.load_state_dict(layer.ffn.w1.state_dict())
    ref.linear2.load_state_dict(layer.ffn.w2.state_dict())
    ref.norm1.load_state_dict(layer.ln1.state_dict())
    ref.norm2.load_state_dict(layer.ln2.state_dict())


def torch_layer(cfg: EncoderConfig) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(
        cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=0.0, activation=cfg.activation,
        layer_norm_eps=cfg.layer_norm_eps, batch_first=True, norm_first=cfg.norm == "pre",
    ).eval()


def max_real_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None) -> float:
    """Largest |a - b| over real (non-padded) positions of (B, T, D) tensors."""
    keep = torch.ones(a.shape[:2], dtype=torch.bool) if mask is None else ~mask
    return (a - b)[keep].abs().max().item()


VARIANTS = [(norm, act, masked) for norm in ("post", "pre") for act in ("relu", "gelu") for masked in (False, True)]
VARIANT_IDS = [f"{n}-{a}-{'mask' if m else 'nomask'}" for n, a, m in VARIANTS]


@pytest.mark.parametrize("norm, activation, masked", VARIANTS, ids=VARIANT_IDS)
def test_layer_equals_torch_transformer_encoder_layer(norm, activation, masked):
    cfg = small(norm=norm, activation=activation)
    layer = randomize(build_model(cfg)).layers[0]
    ref = torch_layer(cfg)
    copy_into_torch(ref, layer)
    x = torch.randn(len(LENGTHS), max(LENGTHS), cfg.d_model, generator=torch.Generator().manual_seed(1))
    mask = pad_mask(LENGTHS, x.shape[1]) if masked else None
    with torch.no_grad():
        ours, _, _ = layer(x, mask)
        theirs = ref(x, src_key_padding_mask=mask)
    assert max_real_diff(ours, theirs, mask) <= 1e-5


@pytest.mark.parametrize("norm, activation, masked", VARIANTS, ids=VARIANT_IDS)
def test_stack_equals_torch_transformer_encoder(norm, activation, masked):
    final_norm = norm == "pre"  # Pre-LN stacks end with a LayerNorm
    cfg = small(norm=norm, activation=activation, final_norm=final_norm)
    model = randomize(build_model(cfg))
    ref = nn.TransformerEncoder(
        torch_layer(cfg), cfg.num_layers, enable_nested_tensor=False,
        norm=nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps) if final_norm else None,
    ).eval()
    for ours, theirs in zip(model.layers, ref.layers, strict=True):
        copy_into_torch(theirs, ours)
    if final_norm:
        ref.norm.load_state_dict(model.final_ln.state_dict())
    x = torch.randn(len(LENGTHS), max(LENGTHS), cfg.d_model, generator=torch.Generator().manual_seed(2))
    mask = pad_mask(LENGTHS, x.shape[1]) if masked else None
    with torch.no_grad():
        ours, _, _ = model.forward_embedded(x, mask)
        theirs = ref(x, src_key_padding_mask=mask)
    assert max_real_diff(ours, theirs, mask) <= 1e-5


@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_attention_equals_torch_multihead_attention(norm, masked):
    cfg = small(norm=norm)
    model = randomize(build_model(cfg))
    ids = torch.randint(0, cfg.vocab_size, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(3))
    mask = pad_mask(LENGTHS, ids.shape[1]) if masked else None
    with torch.no_grad():
        _, patterns, taps = model(ids, mask)
    for layer, pattern, tap in zip(model.layers, patterns, taps, strict=True):
        mha = nn.MultiheadAttention(cfg.d_model, cfg.num_heads, dropout=0.0, batch_first=True).eval()
        with torch.no_grad():
            mha.in_proj_weight.copy_(layer.attn.qkv.weight)
            mha.in_proj_bias.copy_(layer.attn.qkv.bias)
            mha.out_proj.load_state_dict(layer.attn.out.state_dict())
            x = tap["input"] if norm == "post" else tap["norm1"]  # what the attention read
            out, weights = mha(x, x, x, key_padding_mask=mask, need_weights=True, average_attn_weights=False)
        assert pattern.shape == weights.shape == (len(LENGTHS), cfg.num_heads, ids.shape[1], ids.shape[1])
        assert (pattern - weights).abs().max().item() <= 1e-5
        assert max_real_diff(tap["attn"], out, mask) <= 1e-5


def test_embeddings_follow_the_formula():
    ids = torch.tensor([[5, 0, 63, 5, 9]])
    for positional in ("sinusoidal", "learned", "none"):
        model = randomize(build_model(small(positional=positional)))
        expected = model.embed.tok.weight[ids]
        if positional == "sinusoidal":
            expected = expected + sinusoidal_table(16, 32)[:5]
        elif positional == "learned":
            expected = expected + model.embed.pos.weight[:5]
        torch.testing.assert_close(model.embed(ids), expected, rtol=0, atol=1e-6)
    bert_like = randomize(build_model(small(positional="learned", type_vocab_size=2, embed_norm=True)))
    e = bert_like.embed
    expected = e.ln(e.tok.weight[ids] + e.pos.weight[:5] + e.seg.weight[0])  # BERT: every token has type 0
    torch.testing.assert_close(e(ids), expected, rtol=0, atol=1e-6)


# --- properties --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def padded_run():
    """A model, a padded batch with junk ids at the padding, and its outputs."""
    model = randomize(build_model(small(norm="pre", final_norm=True)))
    ids = torch.randint(1, 64, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(4))
    mask = pad_mask(LENGTHS, ids.shape[1])
    with torch.no_grad():
        out, patterns, taps = model(ids, mask)
    return model, ids, mask, out, patterns


def test_attention_rows_sum_to_one(padded_run):
    _, _, _, _, patterns = padded_run
    for pattern in patterns:
        assert (pattern >= 0).all()
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]), rtol=0, atol=1e-6)


def test_padded_keys_get_zero_weight(padded_run):
    _, _, mask, _, patterns = padded_run
    for pattern in patterns:
        weights_on_padding = pattern.masked_select(mask[:, None, None, :].expand_as(pattern))
        assert weights_on_padding.numel() > 0 and (weights_on_padding == 0).all()
        assert (pattern.masked_select(~mask[:, None, None, :].expand_as(pattern)) > 0).all()


def test_padding_does_not_change_real_tokens(padded_run):
    model, ids, mask, out, patterns = padded_run
    for b, n in enumerate(LENGTHS):
        with torch.no_grad():
            alone, alone_patterns, _ = model(ids[b : b + 1, :n])
        assert (alone[0] - out[b, :n]).abs().max().item() <= 1e-5
        for p_alone, p_batch in zip(alone_patterns, patterns, strict=True):
            assert (p_alone[0] - p_batch[b, :, :n, :n]).abs().max().item() <= 1e-5


def test_junk_at_padded_positions_changes_nothing_real(padded_run):
    model, ids, mask, out, _ = padded_run
    other = ids.masked_fill(mask, 0)
    with torch.no_grad():
        out2, _, _ = model(other, mask)
    assert not torch.equal(other, ids)
    assert max_real_diff(out, out2, mask) <= 1e-5


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_without_positions_a_permutation_of_tokens_permutes_everything(norm):
    model = randomize(build_model(small(positional="none", norm=norm)))
    ids = torch.tensor([[3, 17, 42, 8, 59, 23, 11]])
    perm = torch.tensor([4, 0, 6, 2, 1, 5, 3])
    with torch.no_grad():
        out, patterns, _ = model(ids)
        out_p, patterns_p, _ = model(ids[:, perm])
    assert (out_p - out[:, perm]).abs().max().item() <= 1e-5
    P = torch.eye(len(perm))[perm]  # (P x)_i = x_perm[i]
    for a, a_p in zip(patterns, patterns_p, strict=True):
        assert (a_p - P @ a @ P.T).abs().max().item() <= 1e-5


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_with_positions_order_matters(positional):
    # The same check fails once positions are added: it is what makes the permutation test meaningful.
    model = randomize(build_model(small(positional=positional)))
    ids = torch.tensor([[3, 17, 42, 8, 59, 23, 11]])
    perm = torch.tensor([4, 0, 6, 2, 1, 5, 3])
    with torch.no_grad():
        out, _, _ = model(ids)
        out_p, _, _ = model(ids[:, perm])
    assert (out_p - out[:, perm]).abs().max().item() > 1e-2


def test_dropout_acts_only_with_a_generator():
    model = build_model(small(dropout=0.3))
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        eval1, _, _ = model(ids)
        eval2, _, _ = model(ids)
        train1, _, _ = model(ids, gen=torch.Generator().manual_seed(7))
        train2, _, _ = model(ids, gen=torch.Generator().manual_seed(7))
        train3, _, _ = model(ids, gen=torch.Generator().manual_seed(8))
    assert torch.equal(eval1, eval2)
    assert not torch.allclose(train1, eval1, atol=1e-3)
    assert torch.equal(train1, train2)
    assert not torch.allclose(train1, train3, atol=1e-3)
    assert not model.training and not any(m.training for m in model.modules())


def test_zero_dropout_with_a_generator_equals_eval():
    model = build_model(small(dropout=0.0))
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert torch.equal(model(ids)[0], model(ids, gen=torch.Generator().manual_seed(7))[0])


def test_dropout_zeroes_a_fraction_p_and_rescales_the_rest():
    p = 0.25
    model = build_model(small(dropout=p, vocab_size=64))
    ids = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        clean = model.embed(ids)
        dropped = model.embed(ids, torch.Generator().manual_seed(1))
    kept = dropped != 0
    assert abs((~kept).float().mean().item() - p) < 0.03  # 4096 draws: 0.03 is > 4 standard deviations
    torch.testing.assert_close(dropped[kept], clean[kept] / (1 - p))


def recompute(layer, wire, taps: dict, act) -> torch.Tensor:
    """A tap computed again from the taps the placement table says it reads (eval mode: dropout is the identity)."""
    inputs = [taps[tail] for tail, _ in wire.inputs]
    if wire.op == "+":
        return inputs[0] + inputs[1]
    if wire.op == "attn":
        return layer.attn(inputs[0], None)[0]
    if wire.op == "w1":
        return act(layer.ffn.w1(inputs[0]))
    if wire.op == "w2":
        return layer.ffn.w2(inputs[0])
    return getattr(layer, wire.op)(inputs[0])  # ln1, ln2


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_placement_table_is_what_the_forward_computes(norm, activation):
    model = randomize(build_model(small(norm=norm, activation=activation)))
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(9))
    act = F.relu if activation == "relu" else F.gelu
    table = placement(norm)
    kinds = {kind for _, _, kind in flow_edges(norm)}
    assert kinds == {"qkv", "drop1", "drop2", "hidden", "res", ""}
    assert [w.tap for w in table][0] == "input" and [w.tap for w in table][-1] == "output"
    with torch.no_grad():
        out, patterns, taps = model(ids)
        for i, (layer, t) in enumerate(zip(model.layers, taps, strict=True)):
            assert set(t) == {*flow_order(norm), *HEAD_TAPS}  # the forward names exactly the table's taps
            for wire in table:
                if wire.op == "input":
                    assert not wire.inputs
                elif wire.op == "=":  # the output is the very tensor of its one input
                    assert len(wire.inputs) == 1 and t[wire.tap] is t[wire.inputs[0][0]]
                else:
                    torch.testing.assert_close(t[wire.tap], recompute(layer, wire, t, act), rtol=0, atol=1e-6)
                # every tap a wire reads was computed before it
                assert all(flow_order(norm).index(tail) < flow_order(norm).index(wire.tap) for tail, _ in wire.inputs)
            assert t["ffn_hidden"].shape == (2, 6, 48)
            if i + 1 < len(taps):
                assert torch.equal(taps[i + 1]["input"], t["output"])
        assert torch.equal(out, taps[-1]["output"])


def test_the_placement_table_tells_the_placements_apart():
    # A swapped row would still pass the test above for one placement only if the forward matched it: pin the
    # one fact that distinguishes them, where the LayerNorm sits relative to the residual add.
    post, pre = dict((w.tap, w) for w in placement("post")), dict((w.tap, w) for w in placement("pre"))
    assert post["norm1"].inputs == (("add1", ""),) and pre["norm1"].inputs == (("input", ""),)
    assert post["add2"].inputs[1] == ("norm1", "res") and pre["add2"].inputs[1] == ("add1", "res")
    assert TAPS == flow_order("post") and sorted(flow_order("pre")) == sorted(TAPS)
    with pytest.raises(ValueError, match="norm='mid'"):
        placement("mid")


def test_post_ln_outputs_are_normalised_at_init():
    cfg = EncoderConfig(dropout=0.0)  # the paper's base model, as built
    model = build_model(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 20), generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        _, _, taps = model(ids)
    for t in taps:
        out = t["output"]
        assert out.mean(-1).abs().max().item() < 1e-5
        assert (out.std(-1, correction=0) - 1).abs().max().item() < 1e-3
        assert out.std().item() > 0.5  # not trivially zero


def test_init_is_xavier_uniform_per_projection():
    # d_ff = 3 * d_model: W_1 has the same shape as the fused W_QKV but is one projection, not three.
    cfg = small(d_model=32, num_heads=4, d_ff=96, num_layers=1)
    model = build_model(cfg)
    layer = model.layers[0]
    for name, weight, fan_in, fan_out in [
        ("qkv", layer.attn.qkv.weight, 32, 32),  # each of W_Q, W_K, W_V is d_model x d_model
        ("out", layer.attn.out.weight, 32, 32),
        ("w1", layer.ffn.w1.weight, 32, 96),
        ("w2", layer.ffn.w2.weight, 96, 32),
    ]:
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        largest = weight.abs().max().item()
        assert 0.9 * bound < largest <= bound, f"{name}: max |w| {largest:.4f}, Xavier bound {bound:.4f}"
    for lin in (layer.attn.qkv, layer.attn.out, layer.ffn.w1, layer.ffn.w2):
        assert (lin.bias == 0).all()
    assert (layer.ln1.weight == 1).all() and (layer.ln1.bias == 0).all()


# --- determinism and devices --------------------------------------------------------------------------------

DIGEST_SCRIPT = """
import hashlib, torch
from encoder import EncoderConfig, build_model
cfg = EncoderConfig(d_model=32, num_heads=4, d_ff=48, num_layers=3, dropout=0.0, vocab_size=64, max_len=16, seed=123)
model = build_model(cfg)
h = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    h.update(name.encode()); h.update(tensor.contiguous().numpy().tobytes())
with torch.no_grad():
    out, _, _ = model(torch.arange(10)[None] % 64)
h.update(out.numpy().tobytes())
print(h.hexdigest())
"""


def digest(model) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    with torch.no_grad():
        out, _, _ = model(torch.arange(10)[None] % 64)
    h.update(out.numpy().tobytes())
    return h.hexdigest()


def test_same_config_and_seed_give_bit_identical_weights_and_outputs():
    a, b = build_model(small(seed=123)), build_model(small(seed=123))
    for (na, ta), (nb, tb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert na == nb and torch.equal(ta, tb), na
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert torch.equal(a(ids)[0], b(ids)[0])
    assert digest(a) != digest(build_model(small(seed=124)))


def test_same_seed_is_bit_identical_in_another_process():
    torch.manual_seed(999)  # the global RNG must not matter
    ours = digest(build_model(small(seed=123)))
    result = subprocess.run([sys.executable, "-c", DIGEST_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ours


def test_building_and_running_leave_the_global_rng_alone():
    before = torch.get_rng_state()
    model = build_model(small(dropout=0.5))
    with torch.no_grad():
        model(torch.arange(8)[None], gen=torch.Generator().manual_seed(1))
    assert torch.equal(torch.get_rng_state(), before)


def test_global_seed_does_not_change_the_model():
    torch.manual_seed(1)
    a = digest(build_model(small()))
    torch.manual_seed(2)
    assert digest(build_model(small())) == a


@pytest.mark.parametrize("d_model", [8, 9, 32])
def test_sinusoidal_table_matches_the_formula(d_model):
    table = sinusoidal_table(50, d_model)
    assert table.shape == (50, d_model) and table.dtype == torch.float32
    for pos in range(50):
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(table[pos, j].item() - expected) <= 1e-6, (pos, j)
    model = build_model(EncoderConfig(d_model=d_model, num_heads=1, d_ff=8, num_layers=1, vocab_size=8, max_len=50))
    assert torch.equal(model.embed.pe, table)


def test_encoder_works_on_its_own_without_build_model():
    cfg = small(positional="sinusoidal", max_len=16)
    with torch.random.fork_rng(devices=[]):
        model = Encoder(cfg).eval()  # nn's own init, no init_weights
    assert torch.equal(model.embed.pe, sinusoidal_table(16, 32))
    ids = torch.tensor([[5, 0, 63, 5, 9]])
    with torch.no_grad():
        expected = model.embed.tok.weight[ids] + sinusoidal_table(16, 32)[:5]
        torch.testing.assert_close(model.embed(ids), expected, rtol=0, atol=1e-6)
        assert model(ids)[0].shape == (1, 5, 32)


@pytest.mark.parametrize("eps", [1e-6, 1e-5, 1e-12])
def test_layer_norm_epsilon_reaches_every_layer_norm(eps):
    cfg = small(layer_norm_eps=eps, final_norm=True, embed_norm=True, positional="learned")
    model = randomize(build_model(cfg))
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * cfg.num_layers + 2 and all(m.eps == eps for m in norms)
    # Keras' LayerNormalization (seed 002): (x - mean) / sqrt(var + eps) * gamma + beta, var without correction.
    x = 1e-3 * torch.randn(3, cfg.d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ln = model.layers[0].ln1.double()
    mean, var = x.mean(-1, keepdim=True), x.var(-1, correction=0, keepdim=True)
    keras = (x - mean) / torch.sqrt(var + eps) * ln.weight + ln.bias
    with torch.no_grad():
        torch.testing.assert_close(ln(x), keras, rtol=0, atol=1e-9)
        other = (x - mean) / torch.sqrt(var + (1e-5 if eps != 1e-5 else 1e-6)) * ln.weight + ln.bias
        assert (ln(x) - other).abs().max().item() > 1e-3  # at variance ~1e-6 the epsilon shows


def test_pick_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    # Selection logic only: this machine has no GPU, so nothing is moved to the chosen device.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device() == torch.device("cuda")
    assert pick_device("cpu") == torch.device("cpu")  # an explicit choice wins
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")


def test_build_model_returns_an_eval_model_on_the_cpu_here():
    model = build_model(small(), device="cpu")
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert not model.training
