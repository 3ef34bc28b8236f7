"""Issue 20 in the app, through AppTest: the custom model's modern settings (URL round trip, bad values, drawn only where
they apply, the validator's sentences, the preset, each caption), a RoBERTa-style checkpoint from the models folder
with its own special tokens and readable tokens, the memory budget at the app's token cap, and Compare across models."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import encoder
import ui
from devkit.apptest import app_test, component_headers
from encoder.analysis.cost import param_summary
from encoder.tokenizer import SPACE_MARK
from tests import checkpoints as tiny
from tests.app.test_purpose_pages import numbers
from ui import captions, checkpoints, pages, settings
from ui.caches import CACHE
from ui.resources import APP_MAX_TOKENS, BUDGET_ENV, check_budget, estimate_bytes

TIMEOUT = 180
SMALL = {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "128", "num_layers": "3"}
MODERN = SMALL | {"norm": "pre", "final_norm": "true", "positional": "rotary", "rope_theta": "160000", "ffn": "geglu",
                  "bias": "false", "window": "4", "global_every": "3", "dropout": "0"}
NEW = ("positional", "rope_theta", "rope_theta_local", "ffn", "bias", "window", "global_every")


def start(params: dict | None = None, page: str | None = None):
    at = app_test(params, TIMEOUT)
    if page is not None:
        at.switch_page(pages.page(page).file)
    return at.run()


def assert_clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not [e.value for e in at.error if "ran into a problem" in e.value]


def frame_of(at) -> ui.Frame:
    return ui.frame(at.session_state[ui.state.STORE])


def specs(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def drawn(at) -> set[str]:
    """The settings whose widgets the sidebar draws."""
    return {w.key.removeprefix("w:") for kind in ("selectbox", "select_slider", "slider", "radio", "checkbox", "toggle",
                                                  "segmented_control", "number_input")
            for w in getattr(at.sidebar, kind) if w.key and w.key.startswith("w:")}


@pytest.fixture(autouse=True, scope="module")
def fresh_caches():
    CACHE.clear()
    yield
    CACHE.clear()


# ------------------------------------------------------------------------------------- settings and the URL
def test_the_new_settings_round_trip_through_the_url():
    values = settings.defaults() | {k: settings.SETTINGS[k].parse(v) for k, v in MODERN.items()} | {
        "rope_theta_local": 160000.0, "model_b": "pretrained", "layer_b": 2, "head_b": 3, "compare": "models"}
    query = settings.to_query(values)
    parsed, problems = settings.from_query(query)
    assert problems == [] and settings.defaults() | parsed == values
    at = start(MODERN)
    assert_clean(at)
    assert {k: at.query_params[k] for k in MODERN} == MODERN  # the app wrote back what it was given
    cfg = frame_of(at).config
    assert (cfg.positional, cfg.rope_theta, cfg.ffn, cfg.bias, cfg.window, cfg.global_every, cfg.final_norm) == (
        "rotary", 160000.0, "geglu", False, 4, 3, True)
    assert at.segmented_control(key="w:ffn").value == "geglu" and at.checkbox(key="w:bias").value is False
    assert at.select_slider(key="w:window").value == 4 and at.selectbox(key="w:rope_theta").value == 160000.0


@pytest.mark.parametrize(("key", "raw", "needle"), [
    ("positional", "spiral", "choose one of sinusoidal, learned, rotary, none"),
    ("rope_theta", "5", "choose one of 10000, 160000, 500000"),
    ("ffn", "glu", "choose one of plain, geglu, swiglu"),
    ("bias", "maybe", "expected true or false"),
    ("window", "7", "choose one of 0, 4, 8, 16"),
    ("global_every", "1", "choose one of 0, 2, 3, 4, 6"),
])
def test_bad_values_of_the_new_settings_fall_back_with_a_sentence(key, raw, needle):
    parsed, problems = settings.from_query({key: [raw]})
    assert key not in parsed and len(problems) == 1 and needle in problems[0] and "using" in problems[0]
    at = start(SMALL | {key: raw})
    assert_clean(at)
    said = [w.value.replace("\\", "") for w in at.warning]
    assert any(f"URL parameter {key}=" in w and raw in w and needle in w for w in said), said
    assert frame_of(at).trace is not None


def test_a_knob_is_drawn_only_where_it_applies_and_a_hidden_one_never_changes_the_model():
    plain = drawn(start(SMALL))
    assert {"positional", "ffn", "bias", "window", "activation", "final_norm"} <= plain
    assert not {"rope_theta", "rope_theta_local", "global_every"} & plain
    assert {"rope_theta", "rope_theta_local", "global_every"} <= drawn(start(MODERN)) and "activation" not in drawn(
        start(MODERN))
    assert "rope_theta_local" not in drawn(start(MODERN | {"window": "0"}))
    # a hidden knob keeps its value in the URL but the model gets the default: the same model, the same cache entry
    hidden = settings.defaults() | {k: settings.SETTINGS[k].parse(v) for k, v in SMALL.items()} | {
        "rope_theta": 500000.0, "global_every": 4, "rope_theta_local": 160000.0}
    shown = settings.defaults() | {k: settings.SETTINGS[k].parse(v) for k, v in SMALL.items()}
    assert settings.config_from(hidden) == settings.config_from(shown)
    assert ui.model_key_of(hidden) == ui.model_key_of(shown)


def test_the_validator_says_what_to_change_in_the_sidebars_words():
    one = MODERN | {"num_layers": "1"}
    at = start(one)
    assert_clean(at)
    message = next(e.value for e in at.error)
    assert "window never applies" in message and "Layers 2 or more" in message and "never" in message
    values = settings.defaults() | {k: settings.SETTINGS[k].parse(v) for k, v in one.items()}
    with pytest.raises(ValueError, match="Global attention every n layers: never"):
        settings.config_from(values)
    assert settings.config_from(values | {"global_every": 0}).window == 4  # the fix it names works
    # the config's own limits, said with the sidebar's labels (values a link cannot carry, so checked directly)
    rotary = values | {"num_layers": 2, "d_model": 96, "num_heads": 32}
    err = ValueError("positional='rotary' turns pairs of dimensions, so d_head = d_model / num_heads must be even")
    text = settings.config_problem(rotary | {"d_model": 96, "num_heads": 32}, err)
    assert "each head's width d_model / num_heads must be even" in text and "Positional encoding: sinusoidal" in text
    window = settings.config_problem(values, ValueError("window=7 must be even: a token sees window/2 positions."))
    assert window.startswith("window=7 must be even") and "Attention window (tokens)" in window


def test_one_click_builds_the_modernbert_style_model_from_the_pretrained_one():
    at = start()
    assert at.radio(key="w:model").value == settings.PRETRAINED
    next(b for b in at.sidebar.button if b.label == "ModernBERT-style").click().run()
    assert_clean(at)
    cfg = frame_of(at).config
    assert at.radio(key="w:model").value == settings.CUSTOM
    assert cfg == settings.config_from(settings.defaults() | settings.PRESETS["ModernBERT-style"])
    assert (cfg.positional, cfg.ffn, cfg.bias, cfg.norm, cfg.final_norm, cfg.window, cfg.global_every) == (
        "rotary", "geglu", False, "pre", True, 8, 3)
    assert frame_of(at).trace is not None
    next(b for b in at.sidebar.button if b.label == "2017 Transformer").click().run()
    assert frame_of(at).config == encoder.EncoderConfig(seed=frame_of(at).config.seed)


# -------------------------------------------------------------------------------------------- the captions
@pytest.mark.parametrize("params", [SMALL, MODERN, SMALL | {"positional": "learned", "ffn": "swiglu"},
                                    SMALL | {"positional": "none", "window": "8"}], ids=["2017", "modern", "swiglu",
                                                                                         "none-window"])
def test_the_data_flow_page_explains_each_choice_in_one_true_sentence(params):
    at = start(params, "diagram")
    assert_clean(at)
    cfg = frame_of(at).config
    lines = captions.design_lines(cfg)
    shown = " ".join(c.value for c in at.caption)
    assert all(line in shown for line in lines) and len(lines) == 5
    positions, attention, ffn, bias, final = lines
    assert cfg.positional in positions.lower()
    windowed = [i for i in range(cfg.num_layers) if cfg.layer_window(i)]
    if windowed:
        assert f"layer{'s' if len(windowed) > 1 else ''} {', '.join(map(str, windowed))}" in attention
        assert f"sees the {cfg.window // 2} on either side" in attention
    else:
        assert attention == "Attention: global. Every token sees every token in every layer."
    assert ("GeGLU" in ffn) == (cfg.ffn == "geglu") and ("SwiGLU" in ffn) == (cfg.ffn == "swiglu")
    if not cfg.bias:  # the count of parameters the biases would add is the cost table's, not a guess
        saved = param_summary(cfg.replace(bias=True))["total"] - param_summary(cfg)["total"]
        assert f"{saved:,} parameters fewer" in bias and saved == sum(
            p.numel() for n, p in encoder.build_model(cfg.replace(bias=True)).named_parameters() if n.endswith("bias"))
    assert final.startswith("Final LayerNorm") == cfg.final_norm
    source = at.get("graphviz_chart")[0].proto.spec  # the diagram of the same config, with its positional node
    assert '"positions"' in source or "positions [" in source


def test_the_attention_map_shows_the_window_band_and_says_why_it_is_zero():
    """The plotly maps (Knock out heads' intact and knocked-out pair here) grey the band outside the window; the
    Attention page's map says why its far keys are 0 under it."""
    params = MODERN | {"layer": "1", "text": "The animal didn't cross the street because it was too tired."}
    at = start(params, "knockout")
    assert_clean(at)
    trace = frame_of(at).trace
    fig = next(f for f in specs(at) if f["layout"]["title"]["text"].startswith("Attention, layer 1"))
    maps, bands = fig["data"][:2], fig["data"][2:]
    assert [(b["xaxis"], b["yaxis"]) for b in bands] == [(m["xaxis"], m["yaxis"]) for m in maps], "one band per map"
    for main, band in zip(maps, bands, strict=True):
        z, grey = numbers(main["z"]).astype(float), numbers(band["z"]).astype(float)
        i, j = np.indices(z.shape)
        outside = np.abs(i - j) > 2  # window 4: two keys on each side
        assert (z[outside] == 0).all() and (grey[outside] == 1).all() and np.isnan(grey[~outside]).all()
        assert np.allclose(z.sum(1), 1, atol=1e-5)
    home = start(params)
    assert_clean(home)
    note = " ".join(c.value for c in home.caption)
    assert "sliding window" in note and "exactly 0" in note and "−∞ before the softmax" in note
    assert "grey band" not in note  # the browser's map draws them as 0, not as a band
    global_layer = start(MODERN | {"layer": "0"}, "knockout")  # layer 0 attends globally: no band, no note
    fig = next(f for f in specs(global_layer) if f["layout"]["title"]["text"].startswith("Attention, layer 0"))
    assert len(fig["data"]) == 2 and "sliding window" not in " ".join(c.value for c in global_layer.caption)
    assert trace.config.layer_window(1) == 4 and trace.config.layer_window(0) == 0


def test_the_position_page_with_rotary_positions_says_what_the_check_shows():
    at = start(MODERN, "word-order")
    assert_clean(at)
    text = " ".join(c.value for c in at.caption)
    assert "Rotary positions (RoPE, θ = 160000) add nothing to the embeddings" in text
    assert "Every diagonal is constant" in text and "relative positions" in text
    assert "a shuffle changes the distances" in text and "attends globally" in text  # the window, too
    table = at.dataframe[0].value
    rows = dict(zip(table["model"], table["order-blind"], strict=True))
    assert rows == {"this model (positional = rotary)": "no",
                    "same weights, positional = none, global attention": "yes"}
    spread = float(re.search(r"measured spread ([0-9.e+-]+)\)", text).group(1))
    assert spread < 1e-5


def test_compare_two_models_each_map_on_its_own_tokens(tmp_path, monkeypatch, roberta_models):
    at = start({"model": "pretrained", "compare": "models", "model_b": "ckpt:tiny-roberta", "layer": "3", "head": "1",
                "layer_b": "2", "head_b": "3"}, "side-by-side")
    assert_clean(at)
    left, right = specs(at)[:2]
    assert left["layout"]["title"]["text"] == "all-MiniLM-L6-v2" and right["layout"]["title"]["text"] == "tiny-roberta"
    assert left["layout"]["title"]["subtitle"]["text"] == f"layer 3, head 1 · {frame_of(at).trace.seq_len} WordPiece tokens"
    assert right["layout"]["title"]["subtitle"]["text"].startswith("layer 2, head 3 · ")
    assert right["layout"]["title"]["subtitle"]["text"].endswith(" byte-level BPE tokens")
    ticks_left, ticks_right = (fig["layout"]["yaxis"]["ticktext"] for fig in (left, right))
    assert ticks_left[0] == "[CLS]" and ticks_right[0] == "&lt;s&gt;" and ticks_left != ticks_right
    assert any(t.startswith(SPACE_MARK) for t in ticks_right) and not any("Ġ" in t for t in ticks_right)
    a = frame_of(at).trace
    other = ui.get_trace("ckpt:tiny-roberta", frame_of(at).device, a.text, False)
    assert np.allclose(numbers(right["data"][0]["z"]), other.attention[2, 3].numpy(), atol=1e-6)
    note = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert f"{a.seq_len} tokens on the left, {other.seq_len}" in note and "not counterparts" in note
    assert at.query_params["model_b"] == "ckpt:tiny-roberta" and at.query_params["head_b"] == "3"


# -------------------------------------------------------------------------------- a RoBERTa from the folder
@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A models folder with a tiny RoBERTa-style checkpoint and a hostile one (an unknown family)."""
    root = tmp_path_factory.mktemp("models")
    folder = tiny.build("roberta", root / "tiny-roberta")
    hostile = root / "hostile"
    shutil.copytree(folder, hostile)
    config = json.loads((hostile / "config.json").read_text())
    (hostile / "config.json").write_text(json.dumps(config | {"model_type": "<b>evil</b>", "architectures": []}))
    return root


@pytest.fixture
def roberta_models(built, monkeypatch):
    monkeypatch.setenv(checkpoints.MODELS_ENV, str(built))
    return built


def test_the_sidebar_lists_each_folder_before_loading_and_refuses_the_hostile_one(roberta_models):
    CACHE.clear()
    at = start()
    assert_clean(at)
    radio = at.radio(key="w:model")
    assert radio.options[-1] == "Checkpoint: tiny-roberta" and "Checkpoint: hostile" not in radio.options
    entry = checkpoints.find("tiny-roberta")
    assert list(radio.proto.captions)[-1] == entry.summary and entry.summary.startswith("RoBERTa · 3 layers × 4 heads")
    assert not any(k[0] == "model" and k[1] == "ckpt:tiny-roberta" for k in CACHE.keys())  # listed, not loaded
    refused = " ".join(c.value for c in at.sidebar.caption)
    assert "hostile" in refused and "a family this loader does not map" in refused and "<b>" not in refused


def test_a_roberta_checkpoint_names_its_own_special_tokens_everywhere(roberta_models):
    params = {"model": "ckpt:tiny-roberta", "layer": "1", "head": "2", "hide_special": "true", "view": "rollout"}
    at = start(params)
    assert_clean(at)
    trace = frame_of(at).trace
    assert trace.special_tokens == ("<s>", "</s>")
    hide = at.toggle(key="w:hide_special")
    assert hide.label == ui.literal("Hide <s> / </s>") and hide.value is True
    fig = specs(at)[0]
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert "&lt;s&gt;" not in ticks and "&lt;/s&gt;" not in ticks and len(ticks) == trace.seq_len - 2
    assert "&lt;s&gt;/&lt;/s&gt; hidden" in fig["layout"]["title"]["text"]
    (header,) = component_headers(start(params | {"view": "head"}))  # the map: its labels and what Hide leaves out
    assert header["specials"] == [0, trace.seq_len - 1] and header["specialNames"] == ["<s>", "</s>"]
    assert header["tokens"] == list(trace.labels) and any(t.startswith(SPACE_MARK) for t in header["tokens"])
    shown = start(params | {"hide_special": "false"})
    ticks = specs(shown)[0]["layout"]["yaxis"]["ticktext"]
    assert ticks[0] == "&lt;s&gt;" and ticks[-1] == "&lt;/s&gt;" and any(t.startswith(SPACE_MARK) for t in ticks)
    emb = start({"model": "ckpt:tiny-roberta", "pool": "cls"}, "embeddings")
    assert_clean(emb)
    assert emb.segmented_control(key="w:pool").proto.options[1].content == ui.literal("<s> vector")
    assert any("first position (<s>)" in c.value.replace("\\", "") for c in emb.caption)
    words = start({"model": "ckpt:tiny-roberta"}, "wordpieces")
    assert any("byte-level BPE tokens" in s.value for s in words.subheader)
    assert list(words.dataframe[0].value.columns[:3]) == ["position", "reads", "token"]
    assert any("adds <s> at the start and </s> at the end" in c.value.replace("\\", "") for c in words.caption)


def test_the_budget_is_sized_at_the_longest_sentence_the_app_runs(monkeypatch):
    modern = encoder.EncoderConfig(d_model=768, num_heads=12, d_ff=1152, num_layers=22, max_len=8192, norm="pre",
                                   final_norm=True, positional="rotary", ffn="geglu", bias=False, window=128,
                                   global_every=3)
    assert estimate_bytes(modern) == estimate_bytes(modern, APP_MAX_TOKENS)
    assert estimate_bytes(modern)["total"] < estimate_bytes(modern, 8192)["total"] / 10
    monkeypatch.setenv(BUDGET_ENV, "100")
    with pytest.raises(ValueError, match=r"512 tokens, the longest this app runs \(the model reads up to 8192\)"):
        check_budget(modern)
    with pytest.raises(ValueError, match="128 tokens, the longest this model reads"):
        check_budget(modern.replace(max_len=128))
    trace = ui.traced(encoder.build_model(encoder.EncoderConfig(d_model=32, num_heads=2, d_ff=32, num_layers=1,
                                                                max_len=2048, vocab_size=30522)),
                      " ".join(["word"] * 700))
    assert trace.seq_len == APP_MAX_TOKENS and trace.truncated and trace.max_tokens == APP_MAX_TOKENS
    assert os.environ[BUDGET_ENV] == "100"
