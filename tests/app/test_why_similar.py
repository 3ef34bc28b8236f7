"""Why are these similar? (issues 19 and 27) through AppTest: what the page draws is what the library computes on the
same traces, for the pretrained model and small custom Post-LN and Pre-LN models, and the bad inputs (a one-token
sentence, special tokens only, 512 tokens, knocked-out heads, an empty or hostile second sentence, training mode, a
Pre-LN model that DecompX refuses) each give a sentence or a correct result, never a traceback.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import encoder
from devkit.apptest import text_box
from devkit.hostile_inputs import BY_ID
from encoder.analysis import attribution, faithfulness
from encoder.analysis.measures import MEASURES
from encoder.analysis.ranking import published_order
from tests.app.test_app import SMALL_POST, SMALL_PRE, assert_clean, clear_caches, frame_of, start
from tests.app.test_purpose_pages import numbers
from ui import pages, settings, why
from ui.state import STORE

PAGE = pages.page("why-similar").file
CURVES = "Compute the deletion and insertion curves"
TITLE = {"ig": "Integrated Gradients", "gxi": "Gradient × Input", "attgrad": "Attention × gradient"}


@pytest.fixture(autouse=True, scope="module")
def fresh_caches():
    clear_caches()
    yield
    clear_caches()


# The ranking on the built-in sentences computes every measure's deletion test on each with the pretrained model:
# past AppTest's usual run timeout on a busy 2-core machine (it ran out at 120 s with other tests beside it).
RANKING_S = 600


def open_page(params: dict | None = None):
    at = start(params)
    at.switch_page(PAGE).run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    return at


def with_curves(at):
    """Press "Compute the deletion and insertion curves" unless another session of this module computed them already
    (then they are drawn at once), and return `at` with the chart drawn."""
    for button in [b for b in at.button if b.label == CURVES]:
        button.click().run()
        assert_clean(at)
    assert titled(at, "Which ranking predicts the model?")
    return at


def specs(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def titled(at, prefix: str) -> list[dict]:
    return [s for s in specs(at) if s["layout"]["title"]["text"].startswith(prefix)]


def strip_scores(spec: dict) -> list[float]:
    """The coloured strip's cells in reading order (padding and the blank line between sentences left out)."""
    z = spec["data"][0]["z"]
    return [v for row in (z if isinstance(z, list) else numbers(z).tolist()) for v in row if v is not None]


@pytest.mark.parametrize("params", [{}, SMALL_POST, SMALL_PRE], ids=["pretrained", "custom-post", "custom-pre"])
def test_the_page_draws_what_the_library_computes(params):
    at = open_page(params)
    fr = frame_of(at)
    values = at.session_state[STORE]
    model, trace = fr.model, fr.trace
    other = encoder.run(model, values["text_b"])
    direct = [attribution.attribute(model, trace, attribution.similarity_target(values["text_b"]), "ig"),
              attribution.attribute(model, other, attribution.similarity_target(values["text"]), "ig")]
    [strip] = titled(at, "Integrated Gradients toward the similarity")
    want = [s for a in direct for s in a.scores.tolist()]
    np.testing.assert_allclose(strip_scores(strip), want, atol=1e-6)
    assert strip["layout"]["title"]["subtitle"]["text"] == f"cosine {direct[0].value:.3f}"
    bars = titled(at, "Sentence ")
    assert len(bars) == 2
    for spec, a in zip(bars, direct, strict=True):
        np.testing.assert_allclose(numbers(spec["data"][0]["y"]), a.scores.double().numpy(), atol=1e-6)
    # Integrated Gradients says its baseline and the completeness it reached (on a projector too: st.caption)
    assert any("Baseline: every word replaced by [MASK]" in c.value and f"{abs(direct[0].delta):.1e}" in c.value
               for c in at.caption)
    # The faithfulness chart, once asked for: every registered measure (or the reason it is left out), the methods and
    # the random order, each legend entry with its areas, best deletion area first.
    assert not titled(at, "Which ranking predicts the model?")
    with_curves(at)
    chart, _ = faithfulness.faithfulness(model, trace, attribution.similarity_target(values["text_b"]))
    [fig] = titled(at, "Which ranking predicts the model?")
    legend = [t["name"] for t in fig["data"] if t.get("showlegend", True)]
    by_area = sorted(chart.curves, key=lambda c: c.deletion_auc)
    assert legend == [f"{c.label} · {c.deletion_auc:.2f} / {c.insertion_auc:.2f}" for c in by_area]
    assert {"random", "ig", "gxi", "attgrad"} <= {c.key for c in chart.curves}
    assert any(a["text"].startswith("Deletion → [MASK]") for a in fig["layout"]["annotations"])
    skipped = " ".join(c.value for c in at.caption if c.value.startswith("Left out:"))
    for key in MEASURES:
        assert key in {c.key for c in chart.curves} or MEASURES[key].label in skipped, key
    if params.get("norm") == "pre":  # DecompX refuses Pre-LN with its own sentence, named under the chart
        assert "DecompX decomposes Post-LN layers only" in skipped
    table = at.dataframe[0].value
    assert list(table["measure"]) == list(chart.summary()["measure"])


def test_the_deletion_test_runs_when_asked_then_every_session_sees_it():
    params = {"text": "A sentence no other test opens.", "method": "gxi"}
    at = open_page(params)
    fr, values = frame_of(at), at.session_state[STORE]
    target = why.target_of(values)
    assert titled(at, "Gradient × Input toward the similarity")  # the attributions come at once
    assert not titled(at, "Which ranking") and not why.chart_cached(fr, values["text"], target, 20, frozenset())
    [button] = [b for b in at.button if b.label == CURVES]
    button.click().run()
    assert_clean(at)
    assert titled(at, "Which ranking predicts the model?")
    assert why.chart_cached(fr, values["text"], target, 20, frozenset())
    again = open_page(params)  # another session: drawn at once, no button
    assert titled(again, "Which ranking predicts the model?") and CURVES not in [b.label for b in again.button]


def test_token_target_and_the_other_methods():
    at = open_page({"target": "token", "token": "5", "method": "gxi"})
    fr = frame_of(at)
    assert at.selectbox(key="w:token").value == 5
    a = attribution.attribute(fr.model, fr.trace, attribution.token_target(5), "gxi")
    [strip] = titled(at, "Gradient × Input toward token 5's own direction")
    np.testing.assert_allclose(strip_scores(strip), a.scores.tolist(), atol=1e-5)
    assert len(titled(at, "Sentence ")) == 1  # one sentence: no second one for a token target
    assert not any("Baseline" in c.value for c in at.caption)  # only Integrated Gradients has one
    at.selectbox(key="w:method").set_value("attgrad").run()
    assert_clean(at)
    b = attribution.attribute(fr.model, fr.trace, attribution.token_target(5), "attgrad")
    [strip] = titled(at, "Attention × gradient toward token 5's own direction")
    np.testing.assert_allclose(strip_scores(strip), b.scores.tolist(), atol=1e-5)
    # the faithfulness chart of a one-token target includes attention flow, computed for that token
    [fig] = titled(with_curves(at), "Which ranking predicts the model?")
    assert any(t["name"].startswith("Attention flow") for t in fig["data"])


def test_the_downloads_are_offered():
    at = with_curves(open_page())
    found = {el.proto.label for el in at.get("download_button")}
    assert {"Download token scores (CSV)", "Download curves (CSV)", "Download word rankings (CSV)"} <= found


def test_one_token_special_tokens_only_and_an_empty_second_sentence():
    at = with_curves(open_page({"text": "Hello"}))  # one word: one removable position
    assert titled(at, "Which ranking predicts the model?")
    chart, _ = why.get_chart(frame_of(at), "Hello", why.target_of(at.session_state[STORE]), 20, frozenset())
    assert chart.words == 1 and all(c.removed == (0, 1) for c in chart.curves)
    at = open_page({"text": "[SEP]"})  # only special tokens: nothing to attribute to
    assert any("only special tokens" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not titled(at, "Which ranking") and CURVES not in [b.label for b in at.button]
    at = open_page({"text_b": "   "})
    assert any("Type a second sentence" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.segmented_control(key="w:target").set_value("token").run()  # the way out the message names
    assert_clean(at)
    assert titled(at, "Integrated Gradients toward token 1's own direction")


@pytest.mark.parametrize("name", ["script_tag", "markdown_js_link", "bold_tag", "nul", "special_tokens", "emoji_zwj"])
def test_a_hostile_second_sentence_stays_text(name):
    text = BY_ID[name]
    at = open_page(SMALL_POST | {"text_b": text})
    spec = json.dumps(specs(at))
    for tag in ("<script", "<b>", "<img"):
        assert tag not in spec.lower()
    assert titled(at, "Sentence 2")  # the second sentence has its bars, its tokens escaped
    assert text_box(at, "text_b").value == text


def test_knocked_out_heads_follow_into_the_attributions():
    at = open_page({"ablate": "3.1,4.attn", "method": "gxi"})
    fr = frame_of(at)
    assert any("L3 H1" in i.value and "L4 attention" in i.value for i in at.info)
    knocked = encoder.run(fr.model, fr.values["text"], ablate={(3, 1), (4, "attn")})
    a = attribution.attribute(fr.model, knocked, attribution.similarity_target(fr.values["text_b"]), "gxi")
    intact = attribution.attribute(fr.model, fr.trace, attribution.similarity_target(fr.values["text_b"]), "gxi")
    [strip] = titled(at, "Gradient × Input")
    got = strip_scores(strip)[: fr.trace.seq_len]
    np.testing.assert_allclose(got, a.scores.tolist(), atol=1e-5)
    assert not np.allclose(got, intact.scores.tolist(), atol=1e-4)  # the knock-out moved them
    [button] = [b for b in at.button if b.label == "Use the intact model"]
    button.click().run()
    assert_clean(at)
    assert at.session_state[STORE]["ablate"] == ""
    [strip] = titled(at, "Gradient × Input")
    np.testing.assert_allclose(strip_scores(strip)[: fr.trace.seq_len], intact.scores.tolist(), atol=1e-5)


def test_training_mode_is_refused_with_a_sentence():
    at = open_page(SMALL_POST | {"train": "true", "dropout": "0.1"})
    assert any("dropout" in w.value for w in at.warning), [w.value for w in at.warning]


def test_512_tokens_compute_on_request_and_stay_under_3_mb():
    text = " ".join(["The animal didn't cross the street because it was too tired."] * 60)
    at = open_page({"text": text, "method": "gxi"})
    assert frame_of(at).trace.seq_len == 512
    assert any("512 tokens" in i.value for i in at.info)
    assert not titled(at, "Gradient × Input")
    [button] = [b for b in at.button if b.label == "Compute the attributions"]
    button.click().run()
    assert_clean(at)
    assert titled(at, "Gradient × Input toward the similarity")
    assert "Compute the deletion and insertion curves" in [b.label for b in at.button]  # still on request
    size = sum(len(el.proto.spec) for el in at.get("plotly_chart"))
    assert size < 3_000_000, size


def test_which_measure_is_right_here_on_a_custom_model_and_on_the_pretrained_one():
    at = open_page(SMALL_PRE)
    [button] = [b for b in at.button if b.label.startswith("Rank the measures")]
    button.click().run()
    assert_clean(at)
    assert any("cannot be checked" in i.value and "DecompX" in i.value for i in at.info)  # Pre-LN: no DecompX
    assert any("not trained as BERT was" in i.value for i in at.info)
    at = open_page()
    [button] = [b for b in at.button if b.label == f"Rank the measures on {len(why.RANKING_PAIRS)} sentences"]
    button.click().run(timeout=RANKING_S)
    assert_clean(at)
    fr = frame_of(at)
    ranking = why.ranking_cached(fr, "similarity", "mean", 20, frozenset())
    assert ranking is not None and set(ranking.cases["case"]) == set(range(1, len(why.RANKING_PAIRS) + 1))
    # the table is the mean and spread of the per-sentence AOPCs the CSV keeps
    per_case = ranking.cases.groupby("key")["aopc_deletion"]
    table = ranking.table.set_index("key")
    np.testing.assert_allclose(table["mean_aopc"], per_case.mean().reindex(table.index))
    np.testing.assert_allclose(table["std_aopc"], per_case.std(ddof=1).reindex(table.index))
    # what the page says about the published ordering is what the table says, whichever way it goes
    order = published_order(ranking.table, lambda k: k)
    said = [m.value for m in (*at.success, *at.warning) if "published ordering" in m.value]
    assert len(said) == 1 and ("does not hold" in said[0]) == (order.holds is False)
    assert any(c.value.startswith("Computed in ") for c in at.caption)
    shown = at.dataframe[-1].value
    assert list(shown["measure"]) == list(ranking.table["measure"])
    # a second session finds it computed: no button, the same table
    again = open_page()
    assert not [b for b in again.button if b.label.startswith("Rank the measures")]
    assert list(again.dataframe[-1].value["measure"]) == list(shown["measure"])


def test_every_new_setting_round_trips_through_the_url():
    params = {"target": "token", "token": "3", "method": "attgrad", "ig_steps": "40"}
    at = open_page(params)
    store = at.session_state[STORE]
    assert {k: store[k] for k in params} == {"target": "token", "token": 3, "method": "attgrad", "ig_steps": 40}
    assert settings.to_query(store) | params == settings.to_query(store)
    at = start({"target": "nonsense", "ig_steps": "7"})  # a bad link is named on the session's first run
    assert any("target" in w.value for w in at.warning) and any("steps" in w.value and "7" in w.value for w in at.warning)


def test_scores_are_finite_for_every_method_on_a_custom_model():
    at = open_page(SMALL_POST)
    for method in attribution.METHODS:
        at.selectbox(key="w:method").set_value(method).run()
        assert_clean(at)
        [strip] = titled(at, TITLE[method])
        assert torch.isfinite(torch.tensor(strip_scores(strip))).all()
