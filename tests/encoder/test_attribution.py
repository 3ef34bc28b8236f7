"""Gradient attributions: Integrated Gradients' completeness, the targets' values against the trace, Gradient x
Input against plain autograd, knock-outs, bad input, and the shared model left as it was while another thread
traces with it."""

import threading

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from devkit.hostile_inputs import BY_ID
from encoder import EncoderConfig, build_model, run
from encoder.analysis import attribution
from encoder.analysis.attribution import (
    DEFAULT_STEPS,
    METHODS,
    attribute,
    integrated_gradients,
    removal_token,
    similarity_target,
    token_target,
)
from encoder.analysis.embeddings import sentence_embedding
from tests.encoder.conftest import DEFAULT

OTHER = "The creature stayed on the pavement because it was exhausted."


@pytest.fixture(scope="module")
def trace(default_trace):
    return default_trace


def complete(result) -> bool:
    """Integrated Gradients' completeness: Σ scores = f(x) − f(x') within 1 %."""
    change = result.value - result.baseline_value
    return abs(float(result.scores.double().sum()) - change) <= 0.01 * abs(change) and abs(result.delta) <= 0.01 * abs(change)


@pytest.mark.parametrize("target", [similarity_target(OTHER), similarity_target(OTHER, "cls")], ids=["mean", "cls"])
def test_integrated_gradients_toward_similarity_are_complete_at_the_default_steps(pretrained, trace, target):
    result = integrated_gradients(pretrained, trace, target)
    assert result.steps == DEFAULT_STEPS and "[MASK]" in result.baseline
    assert complete(result)
    special = [0, trace.seq_len - 1]
    assert result.scores[special].abs().max() == 0  # the baseline keeps them: nothing to attribute there


def test_integrated_gradients_toward_every_token_are_complete(pretrained, trace):
    used = []
    for token in range(trace.seq_len):
        result = integrated_gradients(pretrained, trace, token_target(token))
        assert complete(result), token
        used.append(result.steps)
    # most tokens need only the default nodes; a few ("." here) need the doubled count
    assert used.count(DEFAULT_STEPS) > len(used) / 2 and set(used) <= {DEFAULT_STEPS, 2 * DEFAULT_STEPS}


def test_integrated_gradients_are_complete_at_128_tokens(pretrained):
    long = run(pretrained, (DEFAULT + " ") * 9, max_tokens=128)
    assert long.seq_len == 128
    seen = []
    result = integrated_gradients(pretrained, long, similarity_target(OTHER), progress=lambda d, t: seen.append((d, t)))
    assert complete(result) and result.steps == DEFAULT_STEPS
    assert seen[-1] == (DEFAULT_STEPS, DEFAULT_STEPS) and all(d <= t for d, t in seen)


def test_the_targets_values_are_the_traces(pretrained, trace):
    expected = float(sentence_embedding(trace) @ sentence_embedding(run(pretrained, OTHER)))
    for method in METHODS:
        assert attribute(pretrained, trace, similarity_target(OTHER), method).value == pytest.approx(expected, abs=1e-5)
    token = attribute(pretrained, trace, token_target(4), "gxi")
    assert token.value == pytest.approx(float(trace.output[4].norm()), rel=1e-5)


def test_targets_name_themselves(trace):
    assert similarity_target(OTHER).rows(5) == (0, 1, 2, 3, 4) and similarity_target(OTHER, "cls").rows(5) == (0,)
    assert token_target(3).rows(5) == (3,)
    assert "'cross'" in token_target(6).describe(trace) and "cls-pooled" in similarity_target(OTHER, "cls").describe(trace)


def test_gradient_x_input_equals_plain_autograd(pretrained, trace):
    target = token_target(2)
    result = attribute(pretrained, trace, target, "gxi")
    x = pretrained.embed(torch.tensor([trace.token_ids])).detach().requires_grad_()
    with torch.enable_grad():
        out = pretrained.forward_embedded(x)[0]
        value = out[0, 2] @ (trace.output[2] / trace.output[2].norm())
        (grad,) = torch.autograd.grad(value, x)
    torch.testing.assert_close(result.scores, (grad * x).detach()[0].sum(-1), rtol=1e-4, atol=1e-5)


def test_attention_x_gradient_per_head_respects_knock_outs(pretrained):
    knocked = run(pretrained, DEFAULT, ablate={(1, 2), (3, "attn"), (5, "ffn")})
    target = similarity_target(OTHER)
    result = attribute(pretrained, knocked, target, "attgrad")
    assert result.heads.shape == (6, 12, knocked.seq_len, knocked.seq_len) and torch.isfinite(result.heads).all()
    assert result.heads[1, 2].abs().max() == 0 and result.heads[3].abs().max() == 0
    assert result.heads[1, 0].abs().max() > 0
    torch.testing.assert_close(result.scores, result.heads.sum((0, 1, 2)))
    # the target follows the knocked-out model: the second sentence runs with the same knock-outs
    other = run(pretrained, OTHER, ablate=knocked.ablate)
    assert result.value == pytest.approx(float(sentence_embedding(knocked) @ sentence_embedding(other)), abs=1e-5)
    ig = integrated_gradients(pretrained, knocked, target)
    assert complete(ig) and ig.value == pytest.approx(result.value, abs=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_custom_models(norm):
    model = build_model(EncoderConfig(d_model=64, num_heads=4, d_ff=128, num_layers=2, norm=norm,
                                      final_norm=norm == "pre", seed=5))
    trace = run(model, DEFAULT)
    for target in (similarity_target(OTHER), token_target(3)):
        assert complete(integrated_gradients(model, trace, target))
        for method in ("gxi", "attgrad"):
            assert torch.isfinite(attribute(model, trace, target, method).scores).all()


def test_removal_token_is_mask_else_pad_else_refused(pretrained, tmp_path):
    assert removal_token(pretrained) == (103, "[MASK]")
    for vocab, expected in (({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "b": 5}, (0, "[PAD]")),
                            ({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4}, None)):
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                           special_tokens=[("[CLS]", vocab["[CLS]"]),
                                                                           ("[SEP]", vocab["[SEP]"])])
        folder = tmp_path / str(len(vocab))
        folder.mkdir()
        tok.save(str(folder / "tokenizer.json"))
        model = build_model(EncoderConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1, vocab_size=8, max_len=32))
        model.vocab_dir = folder
        assert run(model, "a b a").tokens == ["[CLS]", "a", "b", "a", "[SEP]"]
        if expected is None:
            with pytest.raises(ValueError, match="neither a mask nor a padding token"):
                removal_token(model)
        else:
            assert removal_token(model) == expected
            result = integrated_gradients(model, run(model, "a b a"), token_target(1))
            assert result.baseline.startswith("every word replaced by [PAD]") and complete(result)


@pytest.mark.parametrize("other", ["", " \t\n "], ids=["empty", "blank"])
def test_an_empty_second_sentence_is_refused(pretrained, trace, other):
    for method in METHODS:
        with pytest.raises(ValueError, match="second sentence is empty"):
            attribute(pretrained, trace, similarity_target(other), method)


@pytest.mark.parametrize("name", ["script_tag", "paragraph_20k", "nul", "emoji_zwj", "zero_width", "bidi_override"])
def test_a_hostile_second_sentence_gives_a_correct_result(pretrained, trace, name):
    other = BY_ID[name]
    result = attribute(pretrained, trace, similarity_target(other), "gxi")
    expected = float(sentence_embedding(trace) @ sentence_embedding(run(pretrained, other, max_tokens=trace.max_tokens)))
    assert result.value == pytest.approx(expected, abs=1e-5) and torch.isfinite(result.scores).all()


def test_bad_targets_and_traces_get_a_sentence(pretrained, trace):
    cases = [
        (run(pretrained, "\u200b"), token_target(0), "only special tokens"),
        (run(pretrained, "[CLS] [SEP]"), similarity_target(OTHER), "only special tokens"),
        (trace, token_target(trace.seq_len), "not a position"),
        (trace, token_target(-1), "not a position"),
        (trace, similarity_target(OTHER, "max"), "pooling"),
        (trace, attribution.Target("logits"), "not supported"),
        (run(pretrained, DEFAULT, train=True), token_target(1), "dropout"),
        (run(build_model(EncoderConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1)), DEFAULT), token_target(1),
         "another model"),
    ]
    for bad_trace, target, message in cases:
        for method in METHODS:
            with pytest.raises(ValueError, match=message):
                attribute(pretrained, bad_trace, target, method)
    for steps in (0, 1, 2.5, True, 10_000):
        with pytest.raises(ValueError, match="steps="):
            integrated_gradients(pretrained, trace, token_target(1), steps=steps)
    with pytest.raises(ValueError, match="not offered"):
        attribute(pretrained, trace, token_target(1), "lime")


def test_one_word_sentence(pretrained):
    one = run(pretrained, "tired")
    result = integrated_gradients(pretrained, one, similarity_target(OTHER))
    assert complete(result) and result.scores[[0, 2]].abs().max() == 0


def test_512_tokens(pretrained):
    long = run(pretrained, "The quick brown fox jumps over the lazy dog. " * 60, max_tokens=512)
    assert long.seq_len == 512
    for method in ("gxi", "attgrad"):  # the same batched forward and backward as Integrated Gradients, once
        result = attribute(pretrained, long, similarity_target(OTHER), method)
        assert result.scores.shape == (512,) and torch.isfinite(result.scores).all()
    assert attribution.batch_size(pretrained, 512) >= 1


def _hooks(model: torch.nn.Module) -> int:
    kinds = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    local = sum(len(getattr(m, kind)) for m in model.modules() for kind in kinds)
    from torch.nn.modules import module as nn_module

    global_ = sum(len(getattr(nn_module, f"_global{kind}")) for kind in kinds)
    return local + global_


def test_the_shared_model_stays_untouched_while_another_thread_traces(pretrained, trace):
    assert not any(p.requires_grad for p in pretrained.parameters()) and _hooks(pretrained) == 0
    done, errors, results = threading.Event(), [], []

    def work():
        try:
            for method in METHODS:
                results.append(attribute(pretrained, trace, similarity_target(OTHER), method))
        except BaseException as err:  # noqa: BLE001 (reported by the main thread's assertion)
            errors.append(err)
        finally:
            done.set()

    worker = threading.Thread(target=work)
    worker.start()
    overlapped = 0
    while not done.is_set():  # trace again and again for as long as the attributions run
        again = run(pretrained, DEFAULT)
        overlapped += not done.is_set()
        torch.testing.assert_close(again.output, trace.output, rtol=0, atol=1e-6)
        torch.testing.assert_close(again.attention, trace.attention, rtol=0, atol=1e-6)
        assert not any(p.requires_grad or p.grad is not None for p in pretrained.parameters())
        assert _hooks(pretrained) == 0
    worker.join()
    assert not errors and len(results) == len(METHODS) and overlapped >= 1
    assert not any(p.requires_grad or p.grad is not None for p in pretrained.parameters()) and _hooks(pretrained) == 0
    assert torch.is_grad_enabled()  # this thread's grad mode is as it was
