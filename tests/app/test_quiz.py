"""Quiz: eight well-formed questions, feedback and score, and answers that agree with the live model."""

import dataclasses
import re

import pytest
import torch

from encoder import EncoderConfig, build_model, run
from ui.quiz import PAGES, QUESTIONS, check, live_facts, question, score

TOPICS = ["attention", "layers", "ffn", "residual", "encoder_only", "output", "layernorm", "bidirectional"]
SMALL = EncoderConfig(d_model=32, num_heads=4, d_ff=128, num_layers=2)


def _answer(qid: str) -> str:
    q = question(qid)
    return q.options[q.answer]


def test_eight_questions_on_the_seed_topics_each_well_formed():
    assert [q.id for q in QUESTIONS] == TOPICS
    for q in QUESTIONS:
        assert 0 <= q.answer < len(q.options) and len(q.options) == 4
        assert len(set(q.options)) == len(q.options)
        assert q.page in PAGES and q.prompt.endswith("?")
        assert q.explanation and q.demo.endswith(".")


def test_check_gives_feedback_and_rejects_bad_input():
    for q in QUESTIONS:
        ok, text = check(q.id, q.answer)
        assert ok and text.startswith("Correct") and q.explanation in text
        wrong = (q.answer + 1) % len(q.options)
        ok, text = check(q.id, wrong)
        assert not ok and q.options[q.answer] in text
    with pytest.raises(ValueError, match="Unknown question"):
        check("nope", 0)
    with pytest.raises(ValueError, match="choice"):
        check("layers", 4)
    with pytest.raises(ValueError, match="choice"):
        check("layers", True)


def test_score_counts_correct_answers_only():
    right = {q.id: q.answer for q in QUESTIONS}
    assert score(right) == 8
    assert score({}) == 0
    assert score({**right, "layers": 0, "ffn": None}) == 6


@pytest.fixture(scope="module")
def trace():
    return run(build_model(SMALL, "cpu"), "The animal didn't cross the street because it was too tired.")


@pytest.mark.parametrize("source", ["trace", "model"])
def test_live_facts_agree_with_the_answer_key(source, trace):
    facts = live_facts(trace if source == "trace" else build_model(SMALL, "cpu"))
    # attention, bidirectional: no causal mask, so weight on both sides of the diagonal
    assert "without a mask" in _answer("attention") and facts["max_weight_right_of_diagonal"] > 0.01
    assert "both sides" in _answer("bidirectional") and facts["weight_left_of_diagonal"] > 0
    # layers: the default config is the paper's base encoder
    assert int(_answer("layers")) == facts["default_num_layers"] == EncoderConfig().num_layers
    # ffn: 4 x d_model, and the live hidden tap has width d_ff
    ratio = int(re.match(r"(\d+) × d_model", _answer("ffn")).group(1))
    assert ratio == facts["default_ffn_ratio"] and facts["ffn_hidden_width"] == SMALL.d_ff == ratio * SMALL.d_model
    # residual: add1 is exactly input + attention output
    assert "direct path" in _answer("residual") and facts["residual_error"] == 0.0
    # output: one d_model vector per position
    assert "every input position" in _answer("output")
    assert facts["output_shape"] == (facts["seq_len"], SMALL.d_model)
    # layernorm: the original is Post-LN, our default too
    assert "Post-LN" in _answer("layernorm") and facts["default_norm"] == "post"


def test_live_facts_would_catch_a_causal_mask(trace):
    causal = torch.tril(trace.attention)
    causal = causal / causal.sum(-1, keepdim=True)
    facts = live_facts(dataclasses.replace(trace, attention=causal))
    assert facts["weight_right_of_diagonal"] == 0.0 and facts["weight_left_of_diagonal"] > 0


def test_live_facts_rejects_other_objects():
    with pytest.raises(ValueError, match="Encoder or a Trace"):
        live_facts("a sentence")
