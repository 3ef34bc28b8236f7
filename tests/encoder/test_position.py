"""Position: without a positional encoding the encoder is permutation-equivariant; with one it is not."""

import pytest
import torch

from encoder import EncoderConfig, build_model
from encoder.analysis.embeddings import cosine_matrix
from encoder.analysis.position import order_blind_changes, pe_table, permutation_check, permutation_check_ids, rope_table
from encoder.analysis.variants import variant
from encoder.model import sinusoidal_table

TEXT = "The animal didn't cross the street because it was unbelievably tired."
SMALL = dict(d_model=32, num_heads=4, d_ff=64, num_layers=2)


def _model(positional: str, norm: str = "post") -> torch.nn.Module:
    return build_model(EncoderConfig(**SMALL, positional=positional, norm=norm, final_norm=norm == "pre"), "cpu")


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_without_positions_outputs_and_attention_just_permute(norm):
    r = permutation_check(_model("none", norm), TEXT, seed=3)
    assert r.invariant
    assert r.out_diff < 1e-4 and r.attn_diff < 1e-5 and len(r.attn_diff_per_layer) == 2
    assert r.permuted_tokens != r.tokens and sorted(r.permuted_tokens) == sorted(r.tokens)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_with_positions_the_model_sees_the_order(positional):
    r = permutation_check(_model(positional), TEXT, seed=3)
    assert not r.invariant
    assert r.out_diff > 0.1 and r.attn_diff > 1e-3


def test_cls_sep_stay_and_wordpieces_move_together():
    r = permutation_check(_model("none"), TEXT, seed=0)
    assert r.permuted_tokens[0] == "[CLS]" and r.permuted_tokens[-1] == "[SEP]"
    assert r.permutation[0] == 0 and r.permutation[-1] == len(r.tokens) - 1
    for i, tok in enumerate(r.permuted_tokens):
        if tok.startswith("##"):  # a continuation still follows the piece it followed before
            assert r.permutation[i] == r.permutation[i - 1] + 1


def test_seeds_give_different_shuffles_and_the_same_seed_the_same():
    m = _model("none")
    a, b, c = (permutation_check(m, TEXT, seed=s) for s in (1, 1, 2))
    assert a.permutation == b.permutation != c.permutation


def test_a_sentence_that_cannot_be_shuffled_is_refused():
    with pytest.raises(ValueError, match="two different words"):
        permutation_check(_model("sinusoidal"), "hello hello", seed=0)


def test_ids_check_works_without_a_tokenizer_and_rejects_bad_permutations():
    m = build_model(EncoderConfig(**SMALL, positional="none", vocab_size=40, max_len=16), "cpu")
    ids = torch.randint(0, 40, (10,), generator=torch.Generator().manual_seed(0)).tolist()
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(1)).tolist()
    assert permutation_check_ids(m, ids, perm).invariant
    with pytest.raises(ValueError, match="permutation"):
        permutation_check_ids(m, ids, [0, 0, *range(2, 10)])



def test_pe_table_per_kind():
    cfg = EncoderConfig(**SMALL, max_len=64)
    assert torch.equal(pe_table(cfg, 10), sinusoidal_table(64, 32)[:10])
    learned = cfg.replace(positional="learned")
    model = build_model(learned, "cpu")
    assert torch.equal(pe_table(learned, 10, model), model.embed.pos.weight[:10])
    assert torch.equal(pe_table(cfg.replace(positional="none"), 10), torch.zeros(10, 32))
    with pytest.raises(ValueError, match="max_len"):
        pe_table(cfg, 65)


def test_sinusoidal_neighbours_are_more_alike_than_distant_positions():
    sim = cosine_matrix(pe_table(EncoderConfig(**SMALL), 20))
    assert sim.shape == (20, 20)
    assert torch.allclose(sim.diagonal(), torch.ones(20), atol=1e-6)
    assert sim[0, 1] > sim[0, 10]  # sinusoidal: neighbours look more alike than distant positions


# ------------------------------------------------------------------- rotary positions and windows (issue 20)
def test_rotary_positions_are_relative_so_a_shuffle_is_seen_and_without_them_it_is_not():
    """RoPE adds nothing to the embeddings, yet the check finds the model order-aware: every score depends on the
    distance between query and key, which a shuffle changes. The same weights without the rotation are blind."""
    model = build_model(EncoderConfig(**SMALL, positional="rotary", ffn="swiglu", bias=False), "cpu")
    rotary = permutation_check(model, TEXT, seed=3)
    assert not rotary.invariant and rotary.attn_diff > 1e-3 and rotary.out_diff > 1e-3
    assert order_blind_changes(model.cfg) == (("positional", "none"),)
    blind = permutation_check(variant(model, positional="none"), TEXT, seed=3)
    assert blind.invariant and blind.attn_diff < 1e-5
    assert torch.equal(pe_table(model.cfg, 10), torch.zeros(10, 32))  # nothing is added: the table is empty


def test_rotary_scores_depend_on_the_distance_alone():
    """The property the Position page shows: shifting every position by the same amount changes no score."""
    cfg = EncoderConfig(**SMALL, positional="rotary", max_len=64)
    table = rope_table(cfg, 40)
    assert table.shape == (40, cfg.d_head)
    sim = cosine_matrix(table.double())
    for k in range(1, 40):  # constant along every diagonal: row m against row m + k is the same for every m
        assert float(sim.diagonal(k).max() - sim.diagonal(k).min()) < 1e-6
    q, key = torch.randn(2, cfg.d_head, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    half = cfg.d_head // 2
    cos, sin = table[:, :half].double(), table[:, half:].double()

    def turned(x, m):
        x1, x2 = x[:half], x[half:]
        return torch.cat((x1 * cos[m] - x2 * sin[m], x2 * cos[m] + x1 * sin[m]))
    assert abs(float(turned(q, 7) @ turned(key, 3)) - float(turned(q, 30) @ turned(key, 26))) < 1e-5
    assert abs(float(turned(q, 7) @ turned(key, 3)) - float(turned(q, 7) @ turned(key, 4))) > 1e-3
    with pytest.raises(ValueError, match="rotary"):
        rope_table(EncoderConfig(**SMALL), 10)


def test_a_sliding_window_sees_order_too_and_the_blind_variant_attends_globally():
    model = build_model(EncoderConfig(**SMALL, positional="none", window=4), "cpu")
    assert not permutation_check(model, TEXT, seed=3).invariant  # which keys a query sees depends on where they stand
    assert order_blind_changes(model.cfg) == (("window", 0),)
    assert permutation_check(variant(model, window=0), TEXT, seed=3).invariant
    both = EncoderConfig(**SMALL, positional="rotary", window=4)
    assert order_blind_changes(both) == (("positional", "none"), ("window", 0))
    assert order_blind_changes(EncoderConfig(**SMALL, positional="none")) == ()


def test_the_shuffle_moves_whole_words_and_keeps_the_special_tokens_in_place():
    result = permutation_check(_model("none"), "unbelievably tired animals crossed", seed=1)
    tokens, shuffled = result.tokens, result.permuted_tokens
    assert shuffled[0] == tokens[0] == "[CLS]" and shuffled[-1] == tokens[-1] == "[SEP]"
    joined = " ".join(shuffled[1:-1]).replace(" ##", "")
    assert sorted(joined.split()) == sorted("unbelievably tired animals crossed".split())  # no word was cut apart
