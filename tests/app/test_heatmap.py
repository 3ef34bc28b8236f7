"""The one-head map past 128 tokens (issue 15, ui/heatmap.py + heatmap.js) in Chromium.

Switching heads costs no script run until the clicking stops, then one; the hover is within half an 8-bit step of
the trace until the chosen head's float32 weights arrive, then exact; tick labels never overprint and are at least
14 px on a projector, the colour bar is no taller than the map, and the map fits 1280x720 / 1024x768 in
presentation mode; tokens stay literal text; the PNG export is a file named like the plotly chart's; the options
the canvas does not draw (head average, hidden [CLS]/[SEP]) keep the plotly chart; nothing leaves this machine.
"""

from __future__ import annotations

import base64
import io
import itertools
import time

import numpy as np
import plotly.colors
import pytest
from PIL import Image
from playwright.sync_api import Page

from devkit.hostile_inputs import BY_ID, MARKUP_IDS
from devkit.server import COUNT_RUNS
from encoder import load_pretrained, run
from encoder.viz import attention, export, style
from tests.app import test_browser, test_headview
from tests.app.test_browser import CHANGE_MS, LOAD_MS, App, assert_clean, settle
from ui import payload

app = test_browser.app  # the browser tests' server fixture; `browser` comes from conftest.py
page = test_headview.page  # a fresh page that notes every request leaving this machine (page.outside)
pytestmark = pytest.mark.browser
TEXT = test_browser.EXACT_TEXT  # varied words, 512 tokens
HALF_STEP = 0.5 / payload.LEVELS_8 + 1e-7  # an 8-bit weight is within half a step of the trace (+ float32 noise)

HM = """(() => document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm'))"""
STATE_JS = f"""() => {{
  const r = {HM}();
  if (!r || !r.dataset.draws) return null;
  const box = (e) => {{ const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }};
  const ticks = (cls) => [...r.querySelectorAll('.hm-tick.' + cls)];
  return {{...r.dataset, url: location.search, runs: window.__runs ?? null,
          map: box(r.querySelector('canvas.hm-map')), bar: box(r.querySelector('canvas.hm-cbar')),
          y: ticks('hm-y').map(box), x: ticks('hm-x').map(box),
          yText: ticks('hm-y').map(e => e.textContent), xText: ticks('hm-x').map(e => e.textContent),
          fonts: [...r.querySelectorAll('.hm-tick, .hm-axis')].map(e => parseFloat(getComputedStyle(e).fontSize)),
          elements: [...new Set([...r.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))],
          read: r.querySelector('.hm-read').textContent, view: [innerWidth, innerHeight]}};
}}"""
# Hover cells by mouse events on the map, in one task (so nothing can arrive between them): the readouts. Mouse
# events land on whole pixels, and a cell is ~1.25 px wide: the pixel nearest the cell's centre that lies in it.
HOVER_JS = f"""(cells) => {{
  const r = {HM}();
  const c = r.querySelector('canvas.hm-map'), read = r.querySelector('.hm-read');
  const box = c.getBoundingClientRect(), T = +r.dataset.t;
  const at = (lo, size, i) => [0, -1, 1].map(d => Math.round(lo + (i + 0.5) * size / T) + d)
    .find(p => Math.floor((p - lo) / size * T) === i);
  return cells.map(([q, k]) => {{
    c.dispatchEvent(new MouseEvent('mousemove', {{bubbles: true, clientX: at(box.left, box.width, k),
                                                 clientY: at(box.top, box.height, q)}}));
    return {{...read.dataset, text: read.textContent}};
  }});
}}"""
CLICK_JS = f"""(sel) => {{ {HM}().querySelector(sel).click(); return performance.now(); }}"""


@pytest.fixture(scope="module")
def trace():
    t = run(load_pretrained(), TEXT)
    assert t.seq_len == 512
    return t


def state(page: Page) -> dict | None:
    return page.evaluate(STATE_JS)


def wait_state(page: Page, ok, timeout: float = CHANGE_MS) -> dict:
    """Poll the map's state until ok(state) holds; the last state in the failure message."""
    end = time.monotonic() + timeout / 1000
    while (s := state(page)) is None or not ok(s):
        assert time.monotonic() < end, f"the map never reached the expected state; last: {str(s)[:1500]}"
        page.wait_for_timeout(50)  # a polling interval, not a synchronisation sleep
    return s


def open_map(page: Page, app: App, params: dict) -> dict:
    page.goto(app.link("/", params))
    settle(page)
    return wait_state(page, lambda s: s["exact"] == "1" and s.get("held") == "0,1,2,3,4,5", LOAD_MS)


def check_reads(reads: list[dict], want, cells, tol: float, exact: str) -> None:
    for r, (q, k) in zip(reads, cells, strict=True):
        assert (r["q"], r["k"], r["exact"]) == (str(q), str(k), exact), r
        assert abs(float(r["weight"]) - float(want[q, k])) <= tol, f"cell {q},{k}: shown {r['weight']}, trace {want[q, k]}"
        assert ("± 0.002" in r["text"]) == (exact == "0"), r["text"]  # the 8-bit readout says its precision


def test_head_switches_run_no_script_until_settled_and_the_hover_becomes_exact(page, app, trace):
    layer = 4
    open_map(page, app, {"text": TEXT, "layer": str(layer), "head": "7"})
    page.evaluate(COUNT_RUNS)
    cells = [(1, int(trace.attention[layer, 2, 1].argmax())), (256, 3), (510, 511), (0, 0)]
    for head in (9, 0):  # browsing heads: each drawn at once, from the 8-bit weights the browser holds
        page.locator(f'.hm button[data-head="{head}"]').click()
        wait_state(page, lambda s, h=head: s["title"] == f"Attention, layer {layer}, head {h}")
    clicked = page.evaluate(CLICK_JS, '.hm button[data-head="2"]')
    reads = page.evaluate(HOVER_JS, cells)
    s = state(page)
    assert s["title"] == f"Attention, layer {layer}, head 2" and s["exact"] == "0" and s["runs"] == 0, s
    check_reads(reads, trace.attention[layer, 2], cells, HALF_STEP, "0")
    # Once the clicking stops the pick reaches the app in one run, which brings head 2's float32 weights.
    s = wait_state(page, lambda s: s["exact"] == "1" and "head=2" in s["url"] and s["runs"] >= 1)
    settle(page)
    starts = page.evaluate("() => window.__runStarts")
    assert len(starts) == 1 and starts[0] - clicked >= 700, f"runs at {starts}, last click at {clicked}"
    assert f"layer={layer}" in s["url"]
    reads = page.evaluate(HOVER_JS, cells)
    check_reads(reads, trace.attention[layer, 2], cells, 1e-6, "1")
    page.locator('.hm button[data-layer="1"]').click()  # a layer switch draws at once too, 8-bit until settled
    s = wait_state(page, lambda s: s["title"] == "Attention, layer 1, head 2")
    assert s["exact"] == "0" and page.evaluate("() => window.__runs") == 1
    check_reads(page.evaluate(HOVER_JS, cells), trace.attention[1, 2], cells, HALF_STEP, "0")
    assert_clean(page, app)
    assert not page.outside, page.outside


@pytest.mark.parametrize(("width", "height", "present"), [(1280, 720, True), (1024, 768, True), (1440, 900, False),
                                                         (420, 900, False)])
def test_labels_never_overprint_and_the_map_fits_the_screen(page, app, width, height, present):
    page.set_viewport_size({"width": width, "height": height})
    s = open_map(page, app, {"text": TEXT, "present": str(present).lower()})
    size = min(s["fonts"])
    assert size >= (style.MIN_PRESENT_FONT if present else 11), s["fonts"]
    # Along the axis, in order: y labels' centres; x labels' right ends (each turned -45° about its end at the tick).
    for axis, (lo, hi) in (("y", (1, 3)), ("x", (2, 2))):
        centres = [(b[lo] + b[hi]) / 2 for b in s[axis]]
        gaps = [b - a for a, b in itertools.pairwise(centres)]
        assert len(centres) >= 4 and min(gaps) * (0.7 if axis == "x" else 1) >= size, (axis, gaps, size)
    assert s["yText"] == s["xText"] and s["yText"][0] == "[CLS]"
    mx0, my0, mx1, my1 = s["map"]
    bx0, by0, bx1, by1 = s["bar"]
    assert by0 >= my0 - 0.5 and by1 <= my1 + 0.5, "the colour bar is taller than the map"
    assert mx1 - mx0 == pytest.approx(my1 - my0, abs=1), "the map is not square"
    boxes = [*s["y"], *s["x"], s["bar"]]
    assert min(b[0] for b in boxes) >= 0 and max(b[2] for b in boxes) <= width, "a label is cut off at the side"
    if present:  # the whole map and its labels on screen below the header, as the plotly chart was
        assert max(b[3] for b in boxes) <= height and my0 >= 60, s["map"]
    page.screenshot(path=str(test_browser.ARTIFACTS / f"heatmap_512_{width}x{height}{'_present' if present else ''}.png"))
    assert_clean(page, app)


def test_hostile_tokens_stay_literal_text(page, app):
    text = " ".join(BY_ID[name] for name in sorted(MARKUP_IDS)) + " " + TEXT
    trace = run(load_pretrained(), text)
    assert trace.seq_len > payload.FULL_UP_TO
    s = open_map(page, app, {"text": text})
    assert set(s["elements"]) <= {"div", "span", "button", "canvas"}, f"markup made from a token: {s['elements']}"
    assert s["yText"] == test_browser.heatmap_labels(text)[::int(s["step"])]  # printable tokens, as plotly's ticks
    cells = [(q, q) for q in range(1, 40)]
    for r, (q, _) in zip(page.evaluate(HOVER_JS, cells), cells, strict=True):
        assert r["text"].startswith(f"“{trace.tokens[q]}” ({q}) → “{trace.tokens[q]}” ({q}): "), r["text"]
    assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript\" i]').length") == 0
    assert_clean(page, app)  # includes: no dialog opened
    assert not page.outside, page.outside


def test_png_export_is_named_like_the_chart_and_other_options_keep_plotly(page, app, trace):
    open_map(page, app, {"text": TEXT, "layer": "2", "head": "5", "present": "true"})
    with page.expect_download() as png:
        page.locator(".hm button", has_text="PNG").click()
    assert open(png.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    tag = export.model_tag(trace.config, "pretrained")
    assert png.value.suggested_filename == export.export_name(trace, "attention", "L2", "H5", model=tag) + ".png"
    for option in ({"avg": "true"}, {"hide_special": "true"}):  # drawn by plotly, as up to 128 tokens
        page.goto(app.link("/", {"text": TEXT} | option))
        settle(page)
        page.wait_for_selector(f"{test_browser.CHART} .heatmaplayer image", timeout=LOAD_MS)
        assert state(page) is None, option
    assert_clean(page, app)
    assert not page.outside, page.outside


MAP_PNG_JS = f"""() => {{
  const r = {HM}();
  return {{png: r.querySelector('canvas.hm-map').toDataURL('image/png'), bar: r.querySelector('.hm-ctitle').textContent,
          ticks: [...r.querySelectorAll('.hm-tick.hm-c')].map(e => e.textContent)}};
}}"""


@pytest.mark.parametrize("scale", ["row", "auto"])
def test_colour_scales_are_drawn_in_the_browser(page, app, trace, scale):
    """Per row: every row's largest weight gets the darkest colour; auto: the map's largest weight does, and the
    colour bar runs to it. Both as the plotly chart's colour_scale computes them."""
    open_map(page, app, {"text": TEXT, "layer": "0", "head": "0", "scale": scale})
    got = page.evaluate(MAP_PNG_JS)
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(got["png"].split(",", 1)[1]))).convert("RGB"), int)
    darkest = np.array(top_colour())
    w = trace.attention[0, 0].numpy()
    _, _, top, bar = attention.colour_scale(w, scale)
    assert got["bar"] == bar
    hits = (np.abs(pixels - darkest).max(-1) <= 1)
    if scale == "row":
        assert hits.any(axis=1).all(), "a row of the map has no cell at the top of the scale"
    else:
        assert hits.any() and got["ticks"][-1] == f"{top:.{3 if top < 0.1 else 2}f}", got["ticks"]
    assert_clean(page, app)


def top_colour() -> tuple[int, int, int]:
    """The colour at the top of the attention scale (weight = the scale's maximum)."""
    return plotly.colors.unlabel_rgb(plotly.colors.get_colorscale(style.ATTENTION_SCALE)[-1][1])
