"""Issue 20 in Chromium: a RoBERTa-style checkpoint built at test time in the operator's models folder, next to a
hostile one. The sidebar lists both before anything loads (family, size and parameters; the hostile folder refused
with its sentence, not selectable); loaded, its maps show <s> and </s> and readable byte-level tokens, and
"Hide <s> / </s>" hides them. The ModernBERT-style preset in one click, its knobs and their URL round trip, and
Compare with two models side by side.

One server for the module (devkit.server), each test new tabs (fresh sessions); helpers from tests/app/walk.py.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.server import streamlit_server
from encoder.tokenizer import SPACE_MARK, encode, readable
from tests import checkpoints as tiny
from tests.app import test_walk
from tests.app.walk import LOAD_S, SERVER_ENV, ServerLog, Tab, describe
from ui import checkpoints, settings

pytestmark = pytest.mark.browser

SENTENCE = "The animal didn't cross the street because it was too tired."
TICKS_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(c => ({
  y: [...c.querySelectorAll('.ytick text')].map(t => t.textContent),  // the query axis: every token while they fit
  title: (c.querySelector('.gtitle') || {}).textContent || ''}))"""


@pytest.fixture(scope="module")
def models() -> Iterator[Path]:
    """The operator's folder: a tiny RoBERTa (byte-level BPE tokenizer.json) and a copy naming an unknown family."""
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"ee-families-{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)
    folder = tiny.build("roberta", root / "tiny-roberta")
    hostile = root / "hostile"
    shutil.copytree(folder, hostile)
    config = json.loads((hostile / "config.json").read_text())
    (hostile / "config.json").write_text(json.dumps(config | {"model_type": "<img src=x onerror=alert(1)>"}))
    with pytest.MonkeyPatch.context() as mp:  # this process reads the folder too (walk.model_specials)
        mp.setenv(checkpoints.MODELS_ENV, str(root))
        yield root
    shutil.rmtree(root, ignore_errors=True)


assert_consistent = test_walk.assert_consistent


@pytest.fixture(scope="module")
def walk_server(models) -> Iterator[tuple[str, ServerLog]]:
    """This module's server (tests/app/conftest.py's tabs use it), with the models folder."""
    with streamlit_server(env=SERVER_ENV | {checkpoints.MODELS_ENV: str(models)}) as (url, proc):
        yield url, ServerLog(proc.stdout)


def charts(tab: Tab, count: int = 1) -> list[dict]:
    """The plotly charts' x tick labels and titles, once `count` of them are drawn with their ticks."""
    tab.page.wait_for_function(f"() => ({TICKS_JS})().filter(c => c.y.length).length >= {count}", timeout=60_000)
    return tab.page.evaluate(TICKS_JS)


def sidebar_text(tab: Tab) -> str:
    tab.open_sidebar()
    return tab.page.locator('[data-testid="stSidebar"]').inner_text()


def test_the_sidebar_lists_the_folder_before_loading_and_refuses_the_hostile_one(tabs, models):
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/")
    assert_consistent(tab, since, "first load")
    entry = checkpoints.find("tiny-roberta")
    text = sidebar_text(tab)
    assert "Checkpoint: tiny-roberta" in text and entry.summary in text, text  # family, shape, parameters, size
    assert entry.summary.startswith(f"RoBERTa · 3 layers × 4 heads, d_model{checkpoints.NBSP}32 · ")
    assert "Checkpoint: hostile" not in text  # not selectable
    cannot = tab.page.locator('[data-testid="stSidebar"] [data-testid="stExpander"]').filter(has_text="cannot load")
    cannot.locator("summary").click()  # (the sidebar's other expander adds this view to a lesson)
    refused = cannot.inner_text()
    assert "hostile:" in refused and "a family this loader does not map" in refused
    assert "<img src=x onerror=alert(1)>" in refused  # the folder's text, shown as text
    assert tab.page.locator('[data-testid="stSidebar"] img[src="x"]').count() == 0 and not tab.dialogs
    # asked for by a link, the hostile folder falls back with the same sentence; nothing breaks
    fresh = tabs()
    fresh.goto("/", {"model": "ckpt:hostile"})
    alerts = " ".join(fresh.shown()["alerts"])
    assert "not available here" in alerts and "a family this loader does not map" in alerts
    assert_consistent(fresh, since, "a link to the hostile folder")


def test_the_roberta_maps_show_its_own_special_tokens_and_hide_them(tabs):
    """On the rollout view (plotly: its ticks are read here; the map's own header is checked in test_heatmap)."""
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/", {"text": SENTENCE, "layer": "1", "view": "rollout"})
    tab.pick_radio("w-model", "Checkpoint: tiny-roberta")
    assert_consistent(tab, since, "model -> tiny-roberta")
    (chart,) = charts(tab)
    assert chart["y"][0] == "<s>" and chart["y"][-1] == "</s>", chart
    assert any(t.startswith(SPACE_MARK) for t in chart["y"]) and not any("Ġ" in t for t in chart["y"]), chart
    hide = next(w for w in tab.widgets() if w.setting == "hide_special")
    assert hide.label == "Hide <s> / </s>" and hide.value == "False"
    tab.click_toggle("w-hide_special")
    assert_consistent(tab, since, "hide <s> / </s>")
    (hidden,) = charts(tab)
    tokens = encode(SENTENCE, 512, checkpoints.checkpoint_dir("tiny-roberta")).tokens
    labels = readable(tokens, 512, checkpoints.checkpoint_dir("tiny-roberta"))
    assert hidden["y"] == labels[1:-1], hidden  # every other token, as the tokenizer cut it and as it reads
    assert "<s>/</s> hidden" in hidden["title"]
    assert tab.url_values()["hide_special"] is True and tab.url_values()["model"] == "ckpt:tiny-roberta"
    fresh = tabs()  # the link reopens the same view
    fresh.page.goto(tab.page.url)
    fresh.settle(timeout=LOAD_S)
    assert charts(fresh)[0]["y"] == hidden["y"]


def test_the_modernbert_preset_its_knobs_and_their_link(tabs):
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/", {"text": SENTENCE, "layer": "1"})
    tab.open_sidebar()
    preset = tab.page.locator('[data-testid="stSidebar"]').get_by_role("button", name="ModernBERT-style", exact=True)
    tab.settle(lambda: preset.click(), timeout=LOAD_S)
    assert_consistent(tab, since, "press ModernBERT-style")
    values = tab.url_values()
    assert {k: values[k] for k in settings.PRESETS["ModernBERT-style"]} == settings.PRESETS["ModernBERT-style"]
    drawn = {w.setting for w in tab.widgets() if w.sidebar}
    assert {"rope_theta", "rope_theta_local", "global_every", "ffn", "bias", "window"} <= drawn
    assert "activation" not in drawn  # GeGLU brings its own
    text = tab.page.locator('[data-testid="stMain"]').inner_text()
    assert "Layer 1 attends in a sliding window" in text, describe(tab)  # why the map's far keys are 0
    # each new knob once, as a person would, the URL following
    tab.pick_segment("w-ffn", "SwiGLU")
    tab.click_toggle("w-bias")
    tab.slide("w-window", 1)  # 8 -> 16
    tab.pick_select("w-rope_theta", settings.THETA_LABELS[10000.0])
    tab.slide("w-global_every", -2)  # every 3rd layer -> never
    assert_consistent(tab, since, "ffn, bias, window, theta, global every")
    values = tab.url_values()
    assert (values["ffn"], values["bias"], values["window"], values["rope_theta"], values["global_every"]) == (
        "swiglu", True, 16, 10000.0, 0)
    tab.pick_select("w-positional", settings.POSITIONAL_LABELS["learned"])
    assert_consistent(tab, since, "positional -> learned")
    assert "rope_theta" not in {w.setting for w in tab.widgets()}  # theta only with rotary
    seen, fresh = tab.signature(), tabs()
    fresh.page.goto(tab.page.url)
    fresh.settle(timeout=LOAD_S)
    deadline = time.monotonic() + 10  # a widget may be redrawn once more just after the page settled
    while fresh.signature() != seen and time.monotonic() < deadline:
        time.sleep(0.25)
    assert fresh.signature() == seen


def test_compare_puts_the_pretrained_model_beside_the_roberta(tabs):
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/side-by-side", {"text": SENTENCE, "compare": "models", "model_b": "ckpt:tiny-roberta"})
    assert_consistent(tab, since, "Compare two models")
    left, right = charts(tab, 2)[:2]
    assert left["y"][0] == "[CLS]" and right["y"][0] == "<s>" and left["y"] != right["y"]
    assert left["title"].startswith("all-MiniLM-L6-v2") and right["title"].startswith("tiny-roberta")
    tab.pick_select("w-model_b", settings.CUSTOM_LABEL)
    assert_consistent(tab, since, "second model -> custom")
    assert tab.url_values()["model_b"] == settings.CUSTOM
    assert charts(tab, 2)[1]["title"].startswith("Custom model")
