"""Quiz: nine well-formed questions, feedback and score, and answers that agree with the live model; the links that
set settings open their page on them (AppTest)."""

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from encoder import EncoderConfig, build_model, run
from encoder.trace import Trace
from ui import pages, settings
from ui.quiz import QUESTIONS, check, question, score

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["attention", "layers", "ffn", "residual", "encoder_only", "output", "layernorm", "bidirectional", "special_tokens"]
SMALL = EncoderConfig(d_model=32, num_heads=4, d_ff=128, num_layers=2)


def _answer(qid: str) -> str:
    q = question(qid)
    return q.options[q.answer]


def test_nine_questions_on_the_seed_topics_and_issue_19_each_well_formed():
    assert [q.id for q in QUESTIONS] == TOPICS
    for q in QUESTIONS:
        assert 0 <= q.answer < len(q.options) and len(q.options) == 4
        assert len(set(q.options)) == len(q.options)
        assert q.page in pages.BY_PATH and q.prompt.endswith("?")
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
    assert score(right) == 9
    assert score({}) == 0
    assert score({**right, "layers": 0, "ffn": None}) == 7


def live_facts(trace: Trace) -> dict:
    """What the quiz's answers predict, read off a real trace."""
    seq, attention, first = trace.seq_len, trace.attention, trace.taps[0]
    upper = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)  # keys to the right of the query
    lower = torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=-1)
    norm1 = torch.nn.functional.layer_norm(first["add1"], (trace.config.d_model,), eps=trace.config.layer_norm_eps)
    return {
        "weight_right_of_diagonal": float(attention[..., upper].sum()),
        "weight_left_of_diagonal": float(attention[..., lower].sum()),
        "max_weight_right_of_diagonal": float(attention[..., upper].max()),
        "num_layers": trace.num_layers,
        "ffn_hidden_width": int(first["ffn_hidden"].shape[-1]),
        "residual_error": float((first["add1"] - (first["input"] + first["attn"])).abs().max()),
        "norm_after_add_error": float((first["norm1"] - norm1).abs().max()),  # Post-LN: LN right after the add
        "output_shape": tuple(trace.output.shape),
    }


@pytest.fixture(scope="module")
def base_trace() -> Trace:
    """The default config is the paper's base encoder; run it for real (random weights) on a short sentence."""
    return run(build_model(EncoderConfig(), "cpu"), "The animal didn't cross the street because it was too tired.")


def test_live_facts_agree_with_the_answer_key(base_trace):
    facts, cfg = live_facts(base_trace), base_trace.config
    # attention, bidirectional: no causal mask, so weight on both sides of the diagonal
    assert "without a causal mask" in _answer("attention") and facts["max_weight_right_of_diagonal"] > 0.01
    assert "both sides" in _answer("bidirectional") and facts["weight_left_of_diagonal"] > 0
    # layers: the base encoder runs through 6 layers
    assert int(_answer("layers")) == facts["num_layers"]
    # ffn: the hidden tap is k x d_model wide
    ratio = int(re.match(r"(\d+) × d_model", _answer("ffn")).group(1))
    assert facts["ffn_hidden_width"] == ratio * cfg.d_model
    # residual: add1 is exactly input + attention output (eval mode: dropout is the identity)
    assert "direct path" in _answer("residual") and facts["residual_error"] == 0.0
    # output: one d_model vector per position
    assert "every input position" in _answer("output")
    assert facts["output_shape"] == (base_trace.seq_len, cfg.d_model)
    # layernorm: the original normalises right after each residual add (Post-LN), as the base model does
    assert "Post-LN" in _answer("layernorm") and facts["norm_after_add_error"] < 1e-5


def test_live_facts_would_catch_a_causal_mask(base_trace):
    causal = torch.tril(base_trace.attention)
    causal = causal / causal.sum(-1, keepdim=True)
    facts = live_facts(dataclasses.replace(base_trace, attention=causal))
    assert facts["weight_right_of_diagonal"] == 0.0 and facts["weight_left_of_diagonal"] > 0


def test_live_facts_would_catch_pre_ln():
    pre = run(build_model(dataclasses.replace(SMALL, norm="pre"), "cpu"), "A short sentence for the check.")
    assert live_facts(pre)["norm_after_add_error"] > 1e-3


def test_every_question_links_to_a_registered_page():
    for q in QUESTIONS:
        shows = pages.page(q.page)
        assert (ROOT / shows.file).is_file() and shows.title, (q.id, shows)


def test_the_special_token_gap_holds_on_the_live_pretrained_model():
    """Question 9's answer on the model its link opens: on the default sentence, every layer's raw attention puts at
    least twice the share on [CLS]/[SEP] that the value-weighted measure does, and three times over the layers."""
    from encoder import load_pretrained
    from encoder.analysis.measures import MEASURES, special_share

    model = load_pretrained()
    trace = run(model, settings.DEFAULT_SENTENCE)
    specials = trace.special_positions
    q = question("special_tokens")
    raw = special_share(MEASURES["raw"].compute(model, trace), specials)
    flows = special_share(MEASURES[dict(q.settings)["measure"]].compute(model, trace), specials)
    assert "several times smaller" in _answer("special_tokens")
    assert bool((raw >= 2 * flows).all()), (raw, flows)
    assert float(raw.sum() / flows.sum()) >= 3, (raw, flows)
    layer = dict(q.settings)["layer"]  # the layer the link opens shows it plainly
    assert float(raw[layer]) >= 3 * float(flows[layer]), (raw, flows)


def test_a_link_with_settings_opens_its_page_on_them():
    from tests.app.test_app import assert_clean, start
    from ui.state import STORE

    q = question("special_tokens")
    values, problems = settings.from_query({k: settings.SETTINGS[k].format(v) for k, v in q.settings})
    assert not problems and values == dict(q.settings)
    at = start()
    at.switch_page(pages.page("check").file).run()
    at.radio(key=f"w:quiz_{q.id}").set_value(q.answer).run()
    assert_clean(at)
    [button] = [b for b in at.button if b.key == f"see_{q.id}"]
    button.click().run()
    assert_clean(at)
    store = at.session_state[STORE]
    assert {k: store[k] for k, _ in q.settings} == dict(q.settings)
    assert at.selectbox(key="w:measure").value == "value"  # Inside a head, with its lines value-weighted
