"""Hostile sentences (issue 6): every one gives a valid trace or a clear message, every page renders, DOT parses."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

import encoder
from devkit.apptest import text_box
from devkit.hostile_inputs import EMPTY_IDS, HOSTILE, IDS, TEXTS
from encoder.viz import attention, diagram
from tests.app.test_app import PAGES, assert_clean, clear_caches, frame_of, start
from ui import settings

SMALL = encoder.EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2)


@pytest.fixture(scope="module")
def models():
    return [encoder.load_pretrained(), encoder.build_model(SMALL)]


@pytest.mark.parametrize("text", TEXTS, ids=IDS)
def test_encoder_gives_a_valid_trace_or_a_clear_message(models, text):
    for model in models:
        if not text.strip():
            with pytest.raises(ValueError, match="Type a sentence"):
                encoder.run(model, text)
            continue
        trace = encoder.run(model, text)
        assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
        assert len(trace.tokens) <= model.cfg.max_len
        assert torch.isfinite(trace.hidden_states).all()
        torch.testing.assert_close(trace.attention.sum(-1), torch.ones(trace.attention.shape[:-1]))


@pytest.mark.parametrize("text", TEXTS, ids=IDS)
def test_user_text_never_becomes_markup_in_figures_or_dot(models, text):
    if not text.strip():
        return
    trace = encoder.run(models[0], text[:2000])
    spec = attention.attention_heatmap(trace, 0, 0).to_json()
    for tag in ("<script", "<b>", "<img", "<style"):
        assert tag not in spec.lower()
    dot = diagram.layer_diagram(trace.config, stats=trace.stats(), title=text).source
    done = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("name", "text"), HOSTILE, ids=IDS)
def test_every_page_renders_the_text_literally(name, text):
    clear_caches()
    at = start({"model": "custom", "d_model": "32", "num_heads": "4", "d_ff": "64", "num_layers": "2"})
    typed = settings.cut_utf16(text, settings.MAX_TEXT_CHARS)  # the box's maxlength stops a user there
    text_box(at, "text").input(typed).run()
    assert_clean(at)
    shown = text_box(at, "text").value
    assert shown == settings.cut_utf16(text, settings.MAX_TEXT_CHARS)  # the box holds the raw text, never rendered
    for page in PAGES:
        at.switch_page(page).run()
        assert_clean(at)
        assert not at.error, (page, [e.value for e in at.error])
        for el in at.get("plotly_chart"):
            assert "<script" not in json.loads(el.proto.spec).__repr__().lower()
    if name in EMPTY_IDS:
        assert frame_of(at).trace is None
