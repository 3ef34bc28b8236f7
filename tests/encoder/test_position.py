"""Position: without a positional encoding the encoder is permutation-equivariant; with one it is not."""

import pytest
import torch

from encoder import EncoderConfig, build_model
from encoder.analysis.embeddings import cosine_matrix
from encoder.analysis.position import pe_table, permutation_check, permutation_check_ids
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
