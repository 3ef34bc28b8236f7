"""Every caption is true for the config on screen: the statements the pages make, checked on the trace they show.

Three models: the pretrained all-MiniLM-L6-v2 (GELU, Post-LN, trained learned positions), a custom ReLU Post-LN
model (sinusoidal positions) and a custom GELU Pre-LN model (learned positions, untrained). First the caption
functions against the numbers they describe, then every page through AppTest: what its captions, notes and figure
subtitles say must hold for that model.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from streamlit.testing.v1 import AppTest

import encoder
from devkit.apptest import app_test, component_headers
from encoder.analysis import position
from encoder.analysis.variants import variant
from encoder.viz import attention
from tests.app.test_app import TIMEOUT, assert_clean, frame_of
from ui import captions, pages, settings

SENTENCE = settings.DEFAULT_SENTENCE
RELU = {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "256", "num_layers": "2", "norm": "post",
        "activation": "relu", "positional": "sinusoidal"}
GELU = RELU | {"norm": "pre", "activation": "gelu", "positional": "learned", "final_norm": "true"}
MODELS = {"pretrained": {}, "custom-relu": RELU, "custom-gelu": GELU}
NUMBER = r"-?\d+(?:\.\d+)?"


@pytest.fixture(scope="module")
def models() -> dict[str, tuple[str, encoder.Encoder]]:
    """name -> (model key, model)."""
    out = {"pretrained": ("pretrained", encoder.load_pretrained())}
    for name, params in (("custom-relu", RELU), ("custom-gelu", GELU)):
        values = settings.defaults() | {k: settings.SETTINGS[k].parse(v) for k, v in params.items()}
        cfg = settings.config_from(values)
        out[name] = (cfg.to_json(), encoder.build_model(cfg))
    return out


@pytest.fixture(scope="module")
def traces(models) -> dict[str, encoder.Trace]:
    return {name: encoder.run(model, SENTENCE) for name, (_, model) in models.items()}


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(NUMBER, text.replace("−", "-"))]


# ----------------------------------------------------------------------------------------- caption functions
@pytest.mark.parametrize("name", list(MODELS))
def test_zero_caption_says_what_the_activation_does(traces, name):
    trace = traces[name]
    stats = trace.stats()
    for layer in range(trace.num_layers):
        hidden = float(stats[(stats["layer"] == layer) & (stats["tap"] == "ffn_hidden")]["zero_frac"].iloc[0])
        text = captions.zeros_caption(trace, layer, "ffn_hidden")
        if trace.config.activation == "relu":
            assert "ReLU sets every negative input to exactly 0" in text and hidden > 0.2  # "many" holds
            assert f"{hidden:.0%}" in text
        else:
            assert "GELU" in text and "ReLU sets" not in text and hidden < 0.01  # "few exact zeros" holds
            assert f"{hidden:.1%}" in text


@pytest.mark.parametrize("name", list(MODELS))
def test_layernorm_caption_reports_the_measured_mean_and_std(traces, name):
    stats = traces[name].stats()
    for layer in range(traces[name].num_layers):
        text = captions.layernorm_caption(stats, layer)
        found = re.search(rf"norm1 measures mean ({NUMBER}), std ({NUMBER}) and norm2 mean ({NUMBER}), std ({NUMBER})",
                          text.replace("−", "-"))
        m1, s1, m2, s2 = (float(x) for x in found.groups())
        def row(tap: str, col: str, layer: int = layer) -> float:
            return float(stats[(stats["layer"] == layer) & (stats["tap"] == tap)][col].iloc[0])

        assert (m1, s1, m2, s2) == pytest.approx((row("norm1", "mean"), row("norm1", "std"),
                                                  row("norm2", "mean"), row("norm2", "std")), abs=0.006)
        assert "gamma" in text and "beta" in text
    if name == "pretrained":  # learned gamma/beta: the std really is not 1, which the caption must not deny
        assert row("norm2", "std") < 0.9


@pytest.mark.parametrize("name", list(MODELS))
def test_position_caption_calls_neighbours_similar_only_when_they_are(models, traces, name):
    key, model = models[name]
    trace = traces[name]
    table = position.pe_table(trace.config, trace.seq_len, model)
    near, far = captions.neighbour_similarity(table)
    text = captions.position_caption(table, trace.config.positional, captions.is_trained(key))
    claims = "Nearby positions have more similar vectors" in text
    assert claims == (near > far + captions.NEAR_MARGIN)
    assert f"{near:.2f}" in text and f"{far:.2f}" in text
    if name == "custom-gelu":  # learned but untrained: random, and the caption says so
        assert not claims and "untrained" in text
    else:
        assert claims  # sinusoidal, and MiniLM's trained positions


def test_attention_caption_and_figure_agree_on_renormalised_rows(traces):
    trace = traces["pretrained"]
    fig = attention.attention_heatmap(trace, 3, 1, hide_special=True)
    rows = torch.tensor(fig.data[0].z, dtype=torch.float64).sum(1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
    hidden = captions.attention_caption(True, "fixed", trace.special_tokens)
    assert "renormalised" in hidden and hidden.count("[CLS] and [SEP] are hidden") == 1
    shown = captions.attention_caption(False, "fixed", trace.special_tokens)
    assert "Every row sums to 1" in shown
    assert torch.allclose(trace.attention[3, 1].double().sum(-1), torch.ones(trace.seq_len, dtype=torch.float64),
                          atol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_residual_caption_matches_the_measured_norms(traces, name):
    trace = traces[name]
    norms = trace.hidden_states.double().norm(dim=-1).mean(-1)
    text = captions.residual_caption(trace)
    assert f"{float(norms[0]):.3g}" in text and f"{float(norms[-1]):.3g}" in text
    if "grows with depth" in text:
        assert trace.config.norm == "pre" and norms[-1] > norms[0]
    assert ("Post-LN" in text) == (trace.config.norm == "post")


def test_rewired_note_only_for_trained_weights(models, traces):
    key, model = models["pretrained"]
    note = captions.rewired_note(key, settings.PRETRAINED_LABEL, "post", "pre")
    assert "was trained as Post-LN" in note and "never trained that way" in note
    for name in ("custom-relu", "custom-gelu"):
        assert captions.rewired_note(models[name][0], "Custom", traces[name].config.norm, "pre") == ""
    # what the note warns about is real: rewired MiniLM parks most rows on [CLS]/[SEP]
    rewired = encoder.run(variant(model, norm="pre"), SENTENCE)
    shares = [captions.cls_share(rewired, layer, head) for layer in range(6) for head in range(12)]
    assert sum(shares) / len(shares) > 0.8


@pytest.mark.parametrize("name", list(MODELS))
def test_embedding_caption_matches_the_measured_similarity(models, traces, name):
    key, model = models[name]
    trace = traces[name]
    vectors = model.embed.tok.weight[trace.token_ids].detach()
    text = captions.embedding_caption(trace, vectors, captions.is_trained(key))
    mean = numbers(text.split("average")[1])[0]
    if captions.is_trained(key):
        assert "pretrained" in text
    else:
        assert "nearly orthogonal" in text and abs(mean) < 3 / vectors.shape[1] ** 0.5


def test_shuffle_caption_separates_rounding_from_information():
    text = captions.shuffle_caption({"none": 3e-8, "sinusoidal": 0.4})
    assert "none the differences are float rounding (at most 3e-08)" in text and "sinusoidal they reach 0.4" in text
    assert "rounding" not in captions.shuffle_caption({"learned": 0.2})


def test_dropout_note():
    assert captions.dropout_note(False, 0.1) == ""
    assert "p = 0.1" in captions.dropout_note(True, 0.1) and "nothing is dropped" in captions.dropout_note(True, 0.0)


# ----------------------------------------------------------------------------------------------- every page
PAGES = [pages.page(path).file for path in ("heatmaps", "statistics", "wordpieces", "side-by-side", "word-order",
                                              "walkthrough")]


def texts(at: AppTest) -> str:
    parts = [c.value for c in at.caption] + [w.value for w in at.warning] + [i.value for i in at.info]
    parts += [m.value for m in at.markdown]
    return "\n".join(parts).replace("\\", "")  # ui.literal escapes punctuation


def subtitles(at: AppTest) -> list[str]:
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return [s["layout"].get("title", {}).get("subtitle", {}).get("text", "") for s in specs]


@pytest.mark.parametrize("model", list(MODELS))
def test_every_page_says_only_what_holds_for_the_model(model):
    at = app_test(MODELS[model], TIMEOUT).run()
    trace = frame_of(at).trace
    relu = trace.config.activation == "relu"
    for page in [*PAGES, pages.page("diagram").file, pages.page("warmup").file, pages.page("check").file]:
        at.switch_page(page).run()
        assert_clean(at)
        said = texts(at)
        assert ("ReLU sets every negative input" in said) == (relu and page == pages.page("statistics").file), page
        assert "near mean 0 / std 1" not in said and "sit near" not in said, page
        if page in (pages.page("word-order").file,) and trace.config.positional != "none":
            assert ("Nearby positions have more similar" in said) == (model != "custom-gelu"), (page, said)
        if page == pages.page("side-by-side").file:
            assert ("never trained that way" in said) == (model == "pretrained"), said
        assert not any("dropout on" in s for s in subtitles(at)), page  # eval mode: nothing says dropout is on


# Pages whose figures show this forward pass (dropout changes them) and pages that show weights or eval-mode checks.
ACTIVATION_PAGES = [pages.page(path).file for path in ("heatmaps", "statistics", "side-by-side", "walkthrough")]


@pytest.mark.parametrize("page", PAGES)
def test_training_mode_figures_say_dropout_is_on(page):
    at = app_test(RELU | {"train": "true"}, TIMEOUT).run()
    at.switch_page(page).run()
    assert_clean(at)
    if page == pages.page("heatmaps").file:  # the map's title adds the note (ui/heatmap.js mapTitle, tests/js)
        header = component_headers(at)[0]
        assert header["train"] is True and "raw" not in header["refused"], header
        return
    subs = subtitles(at)
    assert subs, page
    if page in ACTIVATION_PAGES:
        assert "training mode: dropout on" in subs[0], (page, subs)  # the page's main figure
    else:  # embedding and positional tables are weights, the shuffle check runs in eval mode: no dropout to report
        assert not any("dropout on" in s for s in subs), (page, subs)


def test_impossible_config_is_said_once_with_values_the_sliders_offer():
    at = app_test(RELU | {"d_model": "64", "num_heads": "3"}, TIMEOUT).run()
    assert_clean(at)
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and "not divisible" in errors[0], errors
    offered = [int(x) for x in re.findall(r"(?:d_model|Heads|or) (\d+)", errors[0].split("choose")[1])]
    widths, heads = offered[:2], offered[2:]
    assert widths and heads and all(w in settings.D_MODEL_OPTIONS and w % 3 == 0 for w in widths)
    assert all(h in settings.HEAD_OPTIONS and 64 % h == 0 for h in heads), errors
