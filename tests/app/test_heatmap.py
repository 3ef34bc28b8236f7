"""The attention map (issues 15, 19, 23; ui/heatmap.py + heatmap.js) in Chromium, at 12, 123 and 512 tokens.

Every switch (head, layer, head average, hidden special tokens, measure) is drawn at once from what the browser
holds, with no script run: every pixel is the colour of the value the browser holds (uint16 up to 128 tokens, 8-bit
past that), and the hover is within half a step of the trace. Once the clicking stops, one run brings the map's
exact decimals and nothing the browser already holds; then every pixel is the colour of the model's value and the
hover prints it to four decimals, and the URL holds the choice. Also: labels never overprint and every token of the
default sentence is labelled on a projector, tokens stay literal text, the PNG export is named like the plotly
charts', the colour scales, the all-heads grid and the model view (a click opens that head), attention flow's one
row, a measure that refuses the sentence says why; nothing leaves this machine.
"""

from __future__ import annotations

import base64
import io
import itertools
import re
import time
import urllib.parse

import numpy as np
import plotly.colors
import pytest
import torch
from PIL import Image
from playwright.sync_api import Page

from devkit.hostile_inputs import BY_ID, MARKUP_IDS
from devkit.server import COUNT_RUNS
from encoder import load_pretrained, run
from encoder.analysis.measures import MEASURES
from encoder.viz import attention, export, style
from tests.app import test_browser, test_headview
from tests.app.test_browser import CHANGE_MS, LOAD_MS, App, assert_clean, cell_colours, settle, worst_cell_error
from ui import heatmap, payload, settings

app = test_browser.app  # the browser tests' server fixture; `browser` comes from conftest.py
page = test_headview.page  # a fresh page that notes every request leaving this machine (page.outside)
pytestmark = pytest.mark.browser
TEXTS = {12: "The cat sat on the mat and purred.", 123: None, 512: test_browser.EXACT_TEXT}  # 123: built below

HM = """(() => document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm'))"""
STATE_JS = f"""() => {{
  const r = {HM}();
  if (!r || !r.dataset.draws) return null;
  const box = (e) => {{ const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }};
  const ticks = (cls) => [...r.querySelectorAll('.hm-tick.' + cls)].filter(e => e.checkVisibility());
  return {{...r.dataset, url: location.search, runs: window.__runs ?? null, loading: r.classList.contains('loading'),
          map: box(r.querySelector('canvas.hm-map')), bar: box(r.querySelector('canvas.hm-cbar')),
          maps: [...r.querySelectorAll('canvas.hm-map')].filter(e => e.checkVisibility()).map(box),
          wide: r.querySelector('.hm-stage').classList.contains('hm-wide'),
          y: ticks('hm-y').map(box), x: ticks('hm-x').map(box),
          yText: ticks('hm-y').map(e => e.textContent), xText: ticks('hm-x').map(e => e.textContent),
          fonts: ticks('hm-tick').concat([...r.querySelectorAll('.hm-axis')].filter(e => e.checkVisibility()))
                 .map(e => parseFloat(getComputedStyle(e).fontSize)),
          elements: [...new Set([...r.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))],
          read: r.querySelector('.hm-read').textContent, reason: r.querySelector('.hm-reason').textContent,
          note: r.querySelector('.hm-note').textContent,
          headsDisabled: [...r.querySelectorAll('button[data-head]')].every(b => b.disabled)}};
}}"""
# The map canvases' pixels as PNG data URLs (the backing stores: one block of pixels per cell), left to right.
PIXELS_JS = f"""() => [...{HM}().querySelectorAll('canvas.hm-map')].filter(c => c.checkVisibility())
  .map(c => c.toDataURL('image/png'))"""
# Whether each map on screen has a backing store of its size on screen (at the screen's pixel ratio).
MAPS_FIT_JS = f"""() => [...{HM}().querySelectorAll('canvas.hm-map')].filter(c => c.checkVisibility()).map(c => {{
  const b = c.getBoundingClientRect();
  return c.width === Math.round(b.width * devicePixelRatio) && c.height === Math.round(b.height * devicePixelRatio);
}})"""
# Hover cells by mouse events on the (last) map, in one task (so nothing can arrive between them): the readouts.
# Mouse events land on whole pixels: the pixel nearest the cell's centre that lies in it.
HOVER_JS = f"""(cells) => {{
  const r = {HM}();
  const maps = [...r.querySelectorAll('canvas.hm-map')].filter(c => c.checkVisibility());
  const c = maps[maps.length - 1], read = r.querySelector('.hm-read');
  const box = c.getBoundingClientRect(), K = cells.K;
  const at = (lo, size, i) => [0, -1, 1].map(d => Math.round(lo + (i + 0.5) * size / K) + d)
    .find(p => Math.floor((p - lo) / size * K) === i);
  return cells.at.map(([q, k]) => {{
    c.dispatchEvent(new MouseEvent('mousemove', {{bubbles: true, clientX: at(box.left, box.width, k),
                                                 clientY: at(box.top, box.height, q)}}));
    return {{...read.dataset, text: read.textContent}};
  }});
}}"""
# Click a button of the map (by selector) or choose a measure, and in the same task (so nothing can arrive in
# between) read what the browser drew at once: its state, the maps' pixels and the hover's readouts of some cells.
ACT_JS = f"""([sel, measure, cells]) => {{
  const r = {HM}();
  if (measure !== null) {{
    const s = r.querySelector('select.hm-select');
    s.value = measure;
    s.dispatchEvent(new Event('change', {{bubbles: true}}));
  }} else r.querySelector(sel).click();
  const t = performance.now();
  return {{t, state: {{...r.dataset, runs: window.__runs}}, pngs: ({PIXELS_JS})(), reads: ({HOVER_JS})(cells)}};
}}"""


# --------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def model():
    return load_pretrained()


@pytest.fixture(scope="module")
def texts(model) -> dict[int, str]:
    from benchmarks.headview_bench import text_of  # the benchmark's sentence of an exact length
    return {n: TEXTS[n] or text_of(model, n) for n in TEXTS}


def state(page: Page) -> dict | None:
    return page.evaluate(STATE_JS)


def wait_state(page: Page, ok, timeout: float = CHANGE_MS) -> dict:
    """Poll the map's state until ok(state) holds; the last state in the failure message."""
    end = time.monotonic() + timeout / 1000
    while (s := state(page)) is None or not ok(s):
        assert time.monotonic() < end, f"the map never reached the expected state; last: {str(s)[:2000]}"
        page.wait_for_timeout(50)  # a polling interval, not a synchronisation sleep
    return s


def open_map(page: Page, app: App, params: dict, path: str = "/") -> dict:
    page.goto(app.link(path, params))
    settle(page)
    return wait_state(page, lambda s: s.get("exact") == "1" or (s.get("thumbs") and not s["loading"]), LOAD_MS)


def pixels(pngs: list[str]) -> list[np.ndarray]:
    """The maps' pixels from their PNG data URLs."""
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).convert("RGB"), dtype=np.float64)
            for u in pngs]


def url_params(s: dict) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(s["url"].lstrip("?")).items()}


# ------------------------------------------------------------------------------------------------ what is shown
def held(maps: torch.Tensor, top: list[float], T: int) -> np.ndarray:
    """What the browser holds of a measure's (L, H, T, T) maps: uint16 or 8-bit steps of each layer's top."""
    levels = payload.LEVELS if T <= payload.FULL_UP_TO else payload.LEVELS_8
    tops = torch.tensor(top).view(-1, 1, 1, 1)
    steps = payload.quantise(maps / tops, levels).astype(np.float32)
    return steps * (tops.numpy().astype(np.float32) / np.float32(levels))


def browser_plane(values: np.ndarray, sel: dict, keep: list[int], rows1: bool) -> np.ndarray:
    """ui/heatmap.js's map from held values (L, H, T, T): the head or the head mean, cut, rows renormalised."""
    heads = values[sel["layer"]]
    w = heads.mean(0, dtype=np.float32) if sel["avg"] or heads.shape[0] == 1 else heads[sel["head"]]
    if len(keep) < w.shape[-1]:
        w = w[np.ix_(keep, keep)]
        if rows1:
            w = w / np.maximum(w.sum(-1, keepdims=True), 1e-30)
    return w


def colours(values: np.ndarray, scale: str = "fixed", fixed: float = 1.0) -> np.ndarray:
    """The colour of every cell on the attention scale, as ui/heatmap.js's colour scales put it."""
    if scale == "row":
        values = values / np.maximum(values.max(-1, keepdims=True), 1e-30)
    elif scale == "auto":
        values = values / (values.max() or 1.0)
    else:
        values = values / fixed
    return cell_colours(values)


def assert_pixels(source: Page | list[str], want: list[np.ndarray], what: str) -> None:
    """Every pixel of each map (on the page now, or as PNG data URLs read earlier) within a colour level of the
    colour of its cell's value (or a neighbour's, where a pixel straddles two cells)."""
    got = pixels(source.evaluate(PIXELS_JS) if isinstance(source, Page) else source)
    assert len(got) == len(want), (what, len(got))
    for shown, expected in zip(got, want, strict=True):
        assert min(shown.shape[:2]) >= 160, f"{what}: the map is only {shown.shape[:2]} pixels"
        worst = worst_cell_error(shown, expected)
        assert worst <= 1, f"{what}: a pixel is {worst:.1f} colour levels away from its cell's value's colour"


def check_reads(reads: list[dict], values: np.ndarray, keep: list[int], cells, tol: float, exact: bool) -> None:
    for r, (q, k) in zip(reads, cells, strict=True):
        assert (r["q"], r["k"], r["exact"]) == (str(keep[q]), str(keep[k]), "1" if exact else "0"), r
        assert abs(float(r["weight"]) - float(values[q, k])) <= tol, f"cell {q},{k}: shown {r['weight']}, model {values[q, k]}"
        if exact:  # the four decimals the model's value rounds to, digit for digit
            assert r["text"].endswith(f": {float(values[q, k]):.4f}") and r["digits"] == f"{float(values[q, k]):.4f}", r
        else:
            assert ("± 0.002" in r["text"]) == (len(values) > payload.FULL_UP_TO or tol > 1e-3), r["text"]


# --------------------------------------------------------------------------------- switches, pixel by pixel
SWITCHES = [  # (what is clicked: a button's selector or a measure, the choice after it, the URL's say)
    ('button[data-head="2"]', {"head": 2}, {"head": "2"}),
    ('button[data-layer="1"]', {"layer": 1}, {"layer": "1"}),
    ('button[data-avg]', {"avg": True}, {"avg": "true"}),
    ('button[data-flag="hide_special"]', {"hide_special": True}, {"hide_special": "true"}),
    ("value", {"measure": "value"}, {"measure": "value"}),
    ('button[data-avg]', {"avg": False}, {}),
    ('button[data-flag="hide_special"]', {"hide_special": False}, {}),  # then back: the kept cut planes
    ('button[data-flag="hide_special"]', {"hide_special": True}, {"hide_special": "true"}),
    ("alti", {"measure": "alti"}, {"measure": "alti"}),
]


@pytest.mark.parametrize("n", list(TEXTS), ids=[f"{n}-tokens" for n in TEXTS])
def test_switches_draw_the_held_values_at_once_then_the_exact_ones(page, app, model, texts, n):
    text = texts[n]
    trace = run(model, text)
    assert trace.seq_len == n
    sel = dict(layer=4, head=7, avg=False, query=0, hide_special=False, measure="raw", view="head", beside=False)
    s = open_map(page, app, {"text": text, "layer": "4", "head": "7"})
    held_all = ",".join(map(str, range(trace.num_layers)))
    assert s["held"] == f"raw:{held_all}" and s["title"] == "Attention, layer 4, head 7", s
    maps = {"raw": (trace.attention, [1.0] * trace.num_layers)}
    keep = heatmap.kept(trace, False)
    exact = heatmap.plane(trace.attention, sel, keep, True).numpy()
    assert_pixels(page, [colours(exact)], "first load")
    page.evaluate(COUNT_RUNS)
    half = 0.5 / (payload.LEVELS if n <= payload.FULL_UP_TO else payload.LEVELS_8) + 1e-7
    runs = 0
    for step, (act, change, says) in enumerate(SWITCHES):
        if act == "alti" and n == 512:
            continue  # ALTI at 512 tokens takes seconds on 2 cores; 12 and 123 tokens cover it
        sel |= change
        m = MEASURES[sel["measure"]]
        if sel["measure"] not in maps:
            maps[sel["measure"]] = _maps(model, trace, sel["measure"])
        values, top = maps[sel["measure"]]
        keep = heatmap.kept(trace, sel["hide_special"])
        cells = [(1, min(3, len(keep) - 1)), (len(keep) - 2, 0), (len(keep) // 2, len(keep) // 2), (0, len(keep) - 1)]
        hover = {"K": len(keep), "at": cells}
        now = page.evaluate(ACT_JS, [act, None, hover] if act.startswith("button") else [None, act, hover])
        new_measure = act in ("value", "alti")
        if not new_measure:  # drawn at once from what the browser holds, with no script run
            assert now["state"]["exact"] == "0" and now["state"]["runs"] == runs, (act, now["state"])
            shown = browser_plane(held(values, top, n), sel, keep, m.rows_sum_to_one)
            assert_pixels(now["pngs"], [colours(shown, fixed=max(1.0, *top) if not m.rows_sum_to_one else 1.0)],
                          f"{act} at once")
            check_reads(now["reads"], shown, keep, cells, half + 1e-6, False)
        # Once the clicking stops, one run: the exact map and nothing the browser holds (a new measure: its maps).
        s = wait_state(page, lambda s, d=says, r=runs: s["exact"] == "1" and not s["loading"] and s["runs"] > r
                       and all(url_params(s).get(k) == v for k, v in d.items()))
        settle(page)
        s = state(page)
        runs += 1
        assert s["runs"] == runs, (act, s)
        if not new_measure:
            assert s["received"] == "exact", s["received"]  # a settled pick sends only what the browser lacks
            if step == 0:
                start = page.evaluate("() => window.__runStarts")[-1]
                assert start - now["t"] >= 700, f"the pick went {start - now['t']:.0f} ms after the click"
        else:
            assert s["received"].startswith(f"{sel['measure']}:") and s["received"].endswith("exact"), s["received"]
        assert s["headsDisabled"] == (not m.per_head), s
        if not m.per_head:
            assert "no per-head form" in s["reason"], s["reason"]
        exact = heatmap.plane(values, sel, keep, m.rows_sum_to_one).numpy()
        fixed = 1.0 if m.rows_sum_to_one else max(top)
        assert_pixels(page, [colours(exact, fixed=fixed)], f"{act} once settled")
        check_reads(page.evaluate(HOVER_JS, {"K": len(keep), "at": cells}), exact, keep, cells, 5e-5 + 1e-9, True)
        assert f"Layer {sel['layer']}, mean over heads and rows: raw attention puts" in s["note"], s["note"]
        assert m.describe in s["note"]
    assert_clean(page, app)
    assert not page.outside, page.outside


def _maps(model, trace, key: str) -> tuple[torch.Tensor, list[float]]:
    """A measure's maps as the app ships them: (L, H, T, T) and each layer's top value."""
    m = MEASURES[key].compute(model, trace)
    full = m.heads if m.heads is not None else m.layers.unsqueeze(1)
    return full, full.flatten(1).amax(1).clamp(min=1.0).tolist()


# ------------------------------------------------------------------------------------------------ the payload
def test_beside_raw_shares_one_colour_scale_and_settled_runs_send_only_what_is_lacking(page, app, model, texts):
    text = texts[123]
    trace = run(model, text)
    s = open_map(page, app, {"text": text, "measure": "value", "beside": "true", "layer": "2", "head": "3",
                             "scale": "auto"})
    assert s["received"].startswith("value:2.") and " raw:2." in s["received"] and s["received"].endswith("exact"), s
    values, _ = _maps(model, trace, "value")
    sel = dict(layer=2, head=3, avg=False, hide_special=False)
    keep = list(range(trace.seq_len))
    raw = heatmap.plane(trace.attention, sel, keep, True).numpy()
    exact = heatmap.plane(values, sel, keep, True).numpy()
    top = max(raw.max(), exact.max())  # one scale for both maps
    raw_shown = browser_plane(held(trace.attention, [1.0] * 6, 123), sel, keep, True)
    assert_pixels(page, [cell_colours(raw_shown / top), cell_colours(exact / top)], "raw beside value-weighted")
    page.evaluate(COUNT_RUNS)
    payloads = int(s["payloads"])
    page.locator('.hm button[data-head="5"]').click()
    s = wait_state(page, lambda s: s["exact"] == "1" and "head=5" in s["url"] and int(s["payloads"]) > payloads)
    assert s["received"] == "exact" and s["runs"] == 1, (s["received"], s["runs"])
    page.locator('.hm button[data-flag="beside"]').click()
    s = wait_state(page, lambda s: "beside" not in url_params(s) and int(s["payloads"]) > payloads + 1)
    assert s["received"] == "" and s["runs"] == 2, s["received"]  # the exact map is the same one: nothing to send
    # One map and two keep a left canvas each (Beside raw swaps them): each drawn whole, at the size it is shown.
    sel = dict(sel, head=5)
    exact = heatmap.plane(values, sel, keep, True).numpy()
    assert_pixels(page, [cell_colours(exact / exact.max())], "value-weighted alone, after Beside raw")
    assert page.evaluate(MAPS_FIT_JS) == [True]
    page.locator('.hm button[data-flag="beside"]').click()
    wait_state(page, lambda s: url_params(s).get("beside") == "true")
    raw = heatmap.plane(trace.attention, sel, keep, True).numpy()
    top = max(raw.max(), exact.max())
    raw_shown = browser_plane(held(trace.attention, [1.0] * 6, 123), sel, keep, True)
    assert_pixels(page, [cell_colours(raw_shown / top), cell_colours(exact / top)], "raw beside value-weighted again")
    assert page.evaluate(MAPS_FIT_JS) == [True, True]
    assert_clean(page, app)


def test_a_fresh_tab_on_the_same_session_state_asks_for_what_it_lacks(page, app, texts):
    """Leaving the page and coming back mounts a new map, which holds nothing: it gets everything again."""
    open_map(page, app, {"text": texts[12]})
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Activations").click()
    settle(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Attention").click()
    s = wait_state(page, lambda s: s.get("exact") == "1" and s["held"] == "raw:0,1,2,3,4,5", LOAD_MS)
    assert s["title"] == f"Attention, layer {settings.SETTINGS['layer'].default}, head {settings.SETTINGS['head'].default}"
    assert_clean(page, app)


# -------------------------------------------------------------------------------------------- flow and refusals
def test_attention_flow_shows_its_one_row_and_a_click_computes_another(page, app, model, texts):
    text = texts[12]
    trace = run(model, text)
    s = open_map(page, app, {"text": text, "measure": "flow", "query": "3", "layer": "5"})
    assert s["title"] == f"Attention flow into “{trace.tokens[3]}” (3), through layer 5", s["title"]
    assert "one output token at a time" in s["reason"] and s["headsDisabled"]
    flow = MEASURES["flow"].compute(model, trace, token=3).layers[5].numpy()
    want = colours(flow)
    want[np.arange(len(flow)) != 3] = (233, 236, 239)  # rows not computed: grey, never a colour of the scale
    assert_pixels(page, [want], "flow into token 3")
    reads = page.evaluate(HOVER_JS, {"K": trace.seq_len, "at": [(3, 2), (5, 2)]})
    assert reads[0]["text"].endswith(f": {flow[3, 2]:.4f}") and "not computed" in reads[1]["text"], reads
    box = page.locator(".hm canvas.hm-map").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + (7.5 / trace.seq_len) * box["height"])
    s = wait_state(page, lambda s: url_params(s).get("query") == "7" and s["exact"] == "1" and not s["loading"], LOAD_MS)
    assert s["title"].startswith(f"Attention flow into “{trace.tokens[7]}” (7)"), s["title"]
    assert_clean(page, app)


def test_a_measure_that_refuses_the_sentence_says_why(page, app, texts):
    page.goto(app.link("/", {"text": texts[512], "measure": "flow"}))
    settle(page)
    s = wait_state(page, lambda s: "offered up to 128 tokens" in s["reason"], LOAD_MS)
    assert s["loading"] is False and "this sentence has 512" in s["reason"], s["reason"]
    assert_clean(page, app)


@pytest.mark.parametrize("view", ["head", "layer"])
def test_a_measure_chosen_in_the_browser_that_refuses_the_trace_says_why_and_stops_loading(page, app, texts, view):
    """With dropout on, the decompositions refuse the trace. Chosen on the map (nothing held for it yet: the map
    dims while it asks), the app's refusal is the sentence above the map, and the map stops loading; raw attention
    chosen again is drawn at once. (A random walk in CI once waited 60 s on such a map.)"""
    open_map(page, app, {"text": texts[12], "train": "true", "view": view})
    for key in ("decompx_layer", "value"):
        page.locator(".hm select.hm-select").select_option(key)
        s = wait_state(page, lambda s, key=key: s["measure"] == key and "dropout (training mode) off" in s["reason"]
                       and url_params(s).get("measure") == key, LOAD_MS)
        settle(page)
        s = state(page)
        assert s["loading"] is False and "Loading" not in s["reason"], s
    page.locator(".hm select.hm-select").select_option("raw")
    s = wait_state(page, lambda s: s["measure"] == "raw" and not s["loading"] and s["reason"] == "", LOAD_MS)
    assert_clean(page, app)


# ------------------------------------------------------------------------------------------------ labels, fit
@pytest.mark.parametrize(("n", "width", "height", "present", "beside"), [
    (16, 1280, 720, True, False), (16, 1024, 768, True, False), (16, 1280, 720, True, True),
    (16, 1024, 768, True, True), (512, 1280, 720, True, False), (512, 1024, 768, True, False),
    (512, 1440, 900, False, False), (512, 420, 900, False, False), (16, 420, 900, False, True)])
def test_labels_never_overprint_and_the_map_fits_the_screen(page, app, n, width, height, present, beside):
    page.set_viewport_size({"width": width, "height": height})
    text = settings.DEFAULT_SENTENCE if n == 16 else test_browser.EXACT_TEXT
    extra = {"measure": "value", "beside": "true"} if beside else {}
    s = open_map(page, app, {"text": text, "present": str(present).lower(), **extra})
    maps = 2 if beside else 1
    size = min(s["fonts"])
    assert size >= (style.MIN_PRESENT_FONT if present else 11), s["fonts"]
    # On a projector every token of the default sentence names its row and its column; two maps side by side do
    # where the x labels turned upright fit (not at 1024 px, beside the controls).
    if n == 16 and present and (not beside or width >= 1280):
        assert s["yText"] == test_browser.heatmap_labels(text) and s["xText"] == s["yText"] * maps, s["xText"]
    assert s["xText"] == s["yText"] * maps and s["yText"][0] == "[CLS]"
    # Along each axis, in order: y labels' centres; x labels' right ends (each turned -45° about its end at the
    # tick), or their middles where they stand upright; upright ones never lean into the next map.
    upright = s["upright"] == "1"
    assert upright == (beside and width == 1280), s["upright"]  # where turning them names every token
    per_map = len(s["x"]) // maps
    xs = [s["x"][m * per_map:(m + 1) * per_map] for m in range(maps)]
    for axis, boxes, (lo, hi), lean in [("y", s["y"], (1, 3), 1), *[
            ("x", b, (0, 2) if upright else (2, 2), 1 if upright else 0.7) for b in xs]]:
        centres = [(b[lo] + b[hi]) / 2 for b in boxes]
        gaps = [b - a for a, b in itertools.pairwise(centres)]
        assert len(centres) >= 4 and min(gaps) * lean >= size, (axis, gaps, size)
    if upright:  # each label stands under its column: the first map's last one left of the second map
        assert xs[0][-1][2] <= s["maps"][1][0], (xs[0][-1], s["maps"])
    mx0, my0, mx1, my1 = s["map"]
    bx0, by0, bx1, by1 = s["bar"]
    assert by0 >= my0 - 0.5 and by1 <= my1 + 0.5, "the colour bar is taller than the map"
    assert mx1 - mx0 == pytest.approx(my1 - my0, abs=1), "the map is not square"
    boxes = [*s["y"], *s["x"], s["bar"]]
    # Two maps wider than a phone scroll sideways (the second map and the colour bar were cut off, out of reach):
    # the left edge shows first, the right edge once scrolled to.
    assert s["wide"] == (beside and width == 420), s["wide"]
    assert min(b[0] for b in boxes) >= 0, "a label is cut off at the left"
    if s["wide"]:
        page.evaluate(f"() => {{ const st = {HM}().querySelector('.hm-stage'); st.scrollLeft = st.scrollWidth; }}")
        s = state(page)
        boxes = [*s["y"], *s["x"], s["bar"]]
    assert max(b[2] for b in boxes) <= width, "a label or the colour bar is cut off at the right"
    if present:  # the whole map and its labels on screen below the header, as the plotly chart was
        assert max(b[3] for b in boxes) <= height and my0 >= 60, s["map"]
    name = f"heatmap_{n}_{width}x{height}{'_present' if present else ''}{'_beside' if beside else ''}.png"
    page.screenshot(path=str(test_browser.ARTIFACTS / name))
    assert_clean(page, app)


def test_hostile_tokens_stay_literal_text(page, app):
    text = " ".join(BY_ID[name] for name in sorted(MARKUP_IDS)) + " " + test_browser.EXACT_TEXT
    trace = run(load_pretrained(), text)
    assert trace.seq_len > payload.FULL_UP_TO
    s = open_map(page, app, {"text": text})
    assert set(s["elements"]) <= {"div", "span", "button", "canvas", "label", "select", "option"}, s["elements"]
    assert s["yText"] == test_browser.heatmap_labels(text)[::int(s["step"])]  # printable tokens, as plotly's ticks
    cells = [(q, q) for q in range(1, 40)]
    for r, (q, _) in zip(page.evaluate(HOVER_JS, {"K": trace.seq_len, "at": cells}), cells, strict=True):
        assert r["text"].startswith(f"“{trace.tokens[q]}” ({q}) → “{trace.tokens[q]}” ({q}): "), r["text"]
    for view in ("layer", "model"):  # the thumbnails' hover quotes tokens as text too
        page.goto(app.link("/", {"text": " ".join(BY_ID[name] for name in sorted(MARKUP_IDS)), "view": view}))
        settle(page)
        s = wait_state(page, lambda s: s.get("thumbs") and not s["loading"], LOAD_MS)
        assert set(s["elements"]) <= {"div", "span", "button", "canvas", "label", "select", "option"}, s["elements"]
    assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript\" i]').length") == 0
    assert_clean(page, app)  # includes: no dialog opened
    assert not page.outside, page.outside


# ------------------------------------------------------------------------------------------ exports, views
@pytest.mark.parametrize(("params", "parts"), [
    ({"layer": "2", "head": "5", "present": "true"}, ("attention", "L2", "H5")),
    ({"layer": "2", "avg": "true", "measure": "value"}, ("value", "L2", "avg")),
    ({"layer": "2", "view": "layer", "measure": "block"}, ("block", "all-heads", "L2")),
    ({"view": "model"}, ("attention", "model-view")),
])
def test_png_export_is_named_like_the_charts(page, app, model, texts, params, parts):
    text = texts[12]
    open_map(page, app, {"text": text} | params)
    with page.expect_download() as png:
        page.locator(".hm button", has_text="PNG").click()
    data = open(png.value.path(), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(io.BytesIO(data)).width >= 3 * 300, "exported at 3x"
    trace = run(model, text)
    tag = export.model_tag(trace.config, "pretrained")
    assert png.value.suggested_filename == export.export_name(trace, *parts, model=tag) + ".png"
    assert_clean(page, app)
    assert not page.outside, page.outside


THUMB_JS = f"""([i]) => {{
  const r = {HM}();
  const c = r.querySelector('canvas.hm-thumbs'), box = c.getBoundingClientRect();
  const labels = [...r.querySelectorAll('.hm-thumbtitle')];
  return {{box: [box.left, box.top, box.width, box.height], n: +r.dataset.thumbs,
          label: labels[i] ? labels[i].getBoundingClientRect().toJSON() : null}};
}}"""


@pytest.mark.parametrize(("view", "layer", "head"), [("model", 2, 5), ("layer", 4, 7)])
def test_a_thumbnail_click_opens_that_head(page, app, view, layer, head):
    s = open_map(page, app, {"view": view, "layer": str(layer if view == "layer" else 0)})
    assert s["thumbs"] == ("72" if view == "model" else "12")
    page.evaluate(COUNT_RUNS)
    got = page.evaluate(THUMB_JS, [head])
    label = got["label"]  # the head's title above its thumbnail (the model view: above its column)
    below = layer * got["box"][3] / 6 if view == "model" else 0  # the model view: down to the layer's row
    page.mouse.click(label["x"] + label["width"] / 2, label["bottom"] + 20 + below)
    s = wait_state(page, lambda s: s["view"] == "head" and s.get("exact") == "1")
    assert s["title"] == f"Attention, layer {layer}, head {head}", s["title"]
    settle(page)
    params = url_params(state(page))
    assert params.get("layer") == str(layer) and params.get("head") == str(head) and "view" not in params
    assert_clean(page, app)


MAP_PNG_JS = f"""() => {{
  const r = {HM}();
  return {{png: r.querySelector('canvas.hm-map').toDataURL('image/png'), bar: r.querySelector('.hm-ctitle').textContent,
          ticks: [...r.querySelectorAll('.hm-fig .hm-tick.hm-c')].map(e => e.textContent)}};
}}"""


@pytest.mark.parametrize("scale", ["row", "auto"])
def test_colour_scales_are_drawn_in_the_browser(page, app, scale):
    """Per row: every row's largest weight gets the darkest colour; auto: the map's largest weight does, and the
    colour bar runs to it. Both as the plotly chart's colour_scale computes them."""
    trace = run(load_pretrained(), test_browser.EXACT_TEXT)
    open_map(page, app, {"text": test_browser.EXACT_TEXT, "layer": "0", "head": "0", "scale": scale})
    got = page.evaluate(MAP_PNG_JS)
    pixels_ = np.asarray(Image.open(io.BytesIO(base64.b64decode(got["png"].split(",", 1)[1]))).convert("RGB"), int)
    darkest = np.array(top_colour())
    w = trace.attention[0, 0].numpy()
    _, _, top, bar = attention.colour_scale(w, scale)
    assert got["bar"] == bar
    hits = (np.abs(pixels_ - darkest).max(-1) <= 1)
    if scale == "row":
        assert hits.any(axis=1).all(), "a row of the map has no cell at the top of the scale"
    else:
        assert hits.any() and got["ticks"][-1] == f"{top:.{3 if top < 0.1 else 2}f}", got["ticks"]
    assert_clean(page, app)


def top_colour() -> tuple[int, int, int]:
    """The colour at the top of the attention scale (weight = the scale's maximum)."""
    return plotly.colors.unlabel_rgb(plotly.colors.get_colorscale(style.ATTENTION_SCALE)[-1][1])


@pytest.mark.parametrize("size", [(1024, 768), (420, 900)], ids=["sidebar-1024", "phone-420"])
def test_the_readout_moves_no_cell_from_under_the_pointer(page, app, model, size):
    """Beside raw, a hovered pair's readout ("raw attention … · value-weighted …") wraps below the title where "Hover
    a cell" did not: the map slid down a line as the first hover landed, and the cell under the pointer changed. The
    readout keeps the room of the longest it can show, so the map stays put and the cell read is the cell pointed at."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_map(page, app, {"measure": "value", "beside": "true"})
    K = run(model, settings.DEFAULT_SENTENCE).seq_len
    canvas = page.locator(".hm canvas.hm-map").last
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    for q, k in [(0, 0), (K - 1, K // 2), (K // 2, K - 1), (4, 4)]:
        page.mouse.move(box["x"] + (k + 0.5) * box["width"] / K, box["y"] + (q + 0.5) * box["height"] / K)
        s = wait_state(page, lambda s, q=q, k=k: re.match(rf"“.*” \({q}\) → “.*” \({k}\): raw attention .* · "
                                                           r"value-weighted ", s["read"]) is not None)
        assert canvas.bounding_box() == box, s["read"]
    assert_clean(page, app)
