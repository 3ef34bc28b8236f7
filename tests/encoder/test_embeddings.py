"""Sentence embeddings against sentence-transformers (the oracle), and the properties of pooling, PCA and rollout."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # the oracle reads the installed folder; it must never reach for the network
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from encoder import EncoderConfig, build_model, load_pretrained, run  # noqa: E402
from encoder.analysis import embeddings  # noqa: E402
from encoder.tokenizer import bundled_model_dir  # noqa: E402
from tests.encoder.test_layers import top_level_modules_after  # noqa: E402

LONG = "Sentence embeddings squeeze a whole paragraph into one vector, and the model only reads so far. " * 20
SENTENCES = [
    "A man is playing guitar.",
    "Someone plays an instrument.",
    "The stock market fell sharply on Monday.",
    "Wait... what?! (Yes) -- it's 100% true; isn't it? #hashtag @user e-mail: a.b@c.org",
    "Crème brûlée à la façon de Zoë: naïve café au lait in São Paulo, Ångström.",
    "I love pizza 🍕🔥 so much 😂! 👩‍💻 codes.",
    "我喜欢学习机器学习。東京は日本の首都です。",
    "Paris is the [MASK] of France.",
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "guitar playing man a is",
    LONG,
]


@pytest.fixture(scope="module")
def ours():
    return load_pretrained()


@pytest.fixture(scope="module")
def oracle():
    from sentence_transformers import SentenceTransformer  # test-only: the library never imports it

    return SentenceTransformer(str(bundled_model_dir()), device="cpu")


def test_the_library_never_imports_the_oracles():
    loaded = top_level_modules_after("encoder", "encoder.analysis.embeddings")
    assert "torch" in loaded and not loaded & {"sentence_transformers", "transformers"}


def test_the_package_truncates_at_256_tokens(oracle):
    config = json.loads((bundled_model_dir() / "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == oracle.max_seq_length == 256


def test_mean_pooled_embedding_equals_sentence_transformers(ours, oracle):
    expected = torch.from_numpy(oracle.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True))
    traces = [run(ours, s, max_tokens=oracle.max_seq_length) for s in SENTENCES]
    assert traces[-1].truncated and traces[-1].seq_len == 256  # the long one really is cut where theirs is
    assert len(oracle.tokenizer(LONG)["input_ids"]) > 256
    mine = torch.stack([embeddings.sentence_embedding(t, "mean") for t in traces])
    assert mine.shape == expected.shape == (len(SENTENCES), 384)
    assert (mine - expected).abs().max().item() <= 1e-5
    torch.testing.assert_close(mine.norm(dim=-1), torch.ones(len(SENTENCES)), rtol=0, atol=1e-6)
    # The similarities the page shows: paraphrases above the unrelated sentence.
    sim = embeddings.cosine_matrix(mine)
    assert sim[0, 1] > sim[0, 2] + 0.2


def test_cls_pooling_is_the_unit_vector_at_position_0(ours):
    trace = run(ours, SENTENCES[0])
    v = embeddings.sentence_embedding(trace, "cls")
    torch.testing.assert_close(v, trace.output[0] / trace.output[0].norm(), rtol=0, atol=1e-6)
    assert not torch.allclose(v, embeddings.sentence_embedding(trace, "mean"), atol=1e-3)
    with pytest.raises(ValueError, match="pooling='max'.*'mean' or 'cls'"):
        embeddings.sentence_embedding(trace, "max")


# --- properties -----------------------------------------------------------------------------------------------

SMALL = EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2, dropout=0.0, max_len=32, seed=3)


def test_mean_pool_weights_by_the_attention_mask():
    model = build_model(SMALL.replace(positional="learned"))
    lengths = [7, 4, 2]
    ids = torch.randint(1000, 2000, (3, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.arange(7)[None, :] < torch.tensor(lengths)[:, None]  # (B, T) True at real tokens
    with torch.no_grad():
        out, _, _ = model(ids, ~mask)
        batch = embeddings.mean_pool(out, mask)  # (B, D)
        for b, n in enumerate(lengths):
            alone = embeddings.mean_pool(model(ids[b : b + 1, :n])[0][0])  # (D,)
            torch.testing.assert_close(batch[b], alone, rtol=0, atol=1e-5)
            torch.testing.assert_close(batch[b], F.normalize(out[b, :n].mean(0), dim=0), rtol=0, atol=1e-6)


def test_without_positions_word_order_does_not_change_the_mean_pooled_vector():
    model = build_model(SMALL.replace(positional="none"))
    a, b = "the dog bit the man", "the man bit the dog"
    va, vb = (embeddings.sentence_embedding(run(model, s)) for s in (a, b))
    assert (va - vb).abs().max().item() <= 1e-5
    ordered = build_model(SMALL.replace(positional="sinusoidal"))
    wa, wb = (embeddings.sentence_embedding(run(ordered, s)) for s in (a, b))
    assert (wa - wb).abs().max().item() > 1e-3  # with positions the same check sees the order


def test_pca_of_an_exactly_rank_two_set_reconstructs_it():
    gen = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(16, 2, generator=gen, dtype=torch.float64))[0].T  # (2, 16), orthonormal
    weights = torch.randn(40, 2, generator=gen, dtype=torch.float64) * torch.tensor([5.0, 1.0])
    x = weights @ basis + torch.randn(16, generator=gen, dtype=torch.float64)  # rank 2 around a mean
    fit = embeddings.pca(x, k=2)
    torch.testing.assert_close(fit.coords @ fit.components + fit.mean, x, rtol=0, atol=1e-10)
    torch.testing.assert_close(fit.components @ fit.components.T, torch.eye(2, dtype=torch.float64), rtol=0, atol=1e-12)
    assert fit.shares.sum().item() == pytest.approx(1.0, abs=1e-12) and fit.shares[0] > fit.shares[1]
    three = embeddings.pca(x, k=3)
    assert three.shares[2].item() < 1e-20 and torch.allclose(three.coords[:, :2], fit.coords)


def test_pca_signs_are_fixed_and_degenerate_input_is_safe():
    x = torch.randn(10, 5, generator=torch.Generator().manual_seed(2))
    a, b = embeddings.pca(x), embeddings.pca(x[torch.randperm(10, generator=torch.Generator().manual_seed(3))])
    torch.testing.assert_close(a.components, b.components, rtol=0, atol=1e-10)  # row order does not flip an axis
    flat = embeddings.pca(torch.ones(4, 3), k=2)
    assert not flat.shares.any() and not flat.coords.any()  # no variance: zeros, not NaN


def test_trajectories_are_one_projection_of_every_layer():
    trace = run(build_model(SMALL), "the cat sat on the mat because it was warm")
    points, shares = embeddings.trajectories(trace)
    L, T = trace.num_layers, trace.seq_len
    assert points.shape == (L + 1, T, 2) and shares.shape == (2,)
    assert 0 < shares[1] <= shares[0] and shares.sum() <= 1 + 1e-6
    states = trace.hidden_states.double().reshape((L + 1) * T, -1)
    fit = embeddings.pca(states)
    torch.testing.assert_close(points.double().reshape(-1, 2), (states - states.mean(0)) @ fit.components.T, rtol=0, atol=1e-5)


def test_token_similarity_is_the_cosine_at_every_depth():
    trace = run(build_model(SMALL), "the cat sat on the mat")
    sims = embeddings.token_similarity(trace, 2, 5)
    assert len(sims) == trace.num_layers + 1
    for depth, value in enumerate(sims):
        a, b = trace.hidden_states[depth, 2].double(), trace.hidden_states[depth, 5].double()
        assert value == pytest.approx((a @ b / (a.norm() * b.norm())).item(), abs=1e-12)
    with pytest.raises(ValueError, match="j=99 is not a token position"):
        embeddings.token_similarity(trace, 0, 99)


def test_cosine_matrix():
    v = torch.randn(5, 8, generator=torch.Generator().manual_seed(4))
    sim = embeddings.cosine_matrix(v)
    expected = F.cosine_similarity(v[:, None, :], v[None, :, :], dim=-1)
    torch.testing.assert_close(sim, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(sim.diagonal(), torch.ones(5), rtol=0, atol=1e-6)


def test_attention_rollout_rows_sum_to_one_and_follow_the_recursion():
    trace = run(build_model(SMALL.replace(num_layers=3)), "the cat sat on the mat")
    rollout = embeddings.attention_rollout(trace.attention)
    T = trace.seq_len
    assert rollout.shape == (3, T, T) and (rollout >= 0).all()
    torch.testing.assert_close(rollout.sum(-1), torch.ones(3, T), rtol=0, atol=1e-6)
    mixed = [0.5 * trace.attention[layer].double().mean(0) + 0.5 * torch.eye(T, dtype=torch.float64) for layer in range(3)]
    torch.testing.assert_close(rollout[0].double(), mixed[0], rtol=0, atol=1e-6)  # A rows sum to 1: no renormalising
    torch.testing.assert_close(rollout[2].double(), mixed[2] @ mixed[1] @ mixed[0], rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="layers, heads, T, T"):
        embeddings.attention_rollout(trace.attention[0])
