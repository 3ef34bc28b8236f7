"""Inside a head's step charts drawn in the browser (ui/panels.py, .js; issue 23): the payload holds the figure's
numbers and text as they are, the registered JavaScript reads it back exactly, and in Chromium every panel's cells
are the colours of the head's numbers, the hover reads them out as the figure's hover templates print them, a
settled pick redraws them, hostile tokens stay text, and the PNG is the chart at 3x."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page

from devkit.hostile_inputs import BY_ID
from devkit.server import close_tab, new_tab
from encoder import EncoderConfig, build_model, run
from encoder.viz import heads, style
from encoder.viz.text import printable
from tests.app import test_browser, test_headview
from tests.app.test_browser import CHANGE_MS, assert_clean, settle
from tests.js.test_components import node
from ui import components, panels, settings

app = test_browser.app  # the browser tests' server fixture; `browser` comes from conftest.py
HERE = Path(__file__).parent
KINDS = ("scores", "values", "output")
HOSTILE = "<b>x</b> & [a](javascript:alert(1)) \u202eevil {{x}}"


def decoded(chart: bytes) -> tuple[dict, list[np.ndarray]]:
    """The header and each panel's values, read as the browser reads them."""
    n = struct.unpack("<I", chart[:4])[0]
    header = json.loads(chart[4:4 + n])
    body = -(-(4 + n) // 8) * 8
    values = []
    for p in header["panels"]:
        count = p["shape"][0] * p["shape"][1]
        dtype = np.dtype("<f4" if p["dtype"] == "f4" else "<f8")
        values.append(None if "product" in p else
                      np.frombuffer(chart, dtype, count, body + p["at"]).reshape(p["shape"]).astype(np.float64))
    for i, p in enumerate(header["panels"]):
        if "product" in p:  # rows scaled by a column, as ui/panels.js computes them
            values[i] = values[p["product"][0]] * values[p["product"][1]]
    return header, values


def expected(steps: heads.HeadSteps, kind: str, w_o=None) -> list[np.ndarray]:
    """Each panel's numbers from the head's steps, in the figure's order."""
    col = lambda a: a[:, None]  # noqa: E731
    if kind == "scores":
        scaled = np.where(steps.outside, np.nan, steps.scaled)
        return [steps.q[None], steps.k, col(steps.scores), col(scaled), col(steps.weights)]
    if kind == "values":
        return [steps.z_sum[None], col(steps.weights), steps.v, steps.mixed]
    h, dk = steps.head, steps.d_k
    share = w_o.detach().double().numpy()[:, h * dk:(h + 1) * dk] @ steps.z
    return [steps.concat[None], share[None], steps.attn[None]]


def figure(steps: heads.HeadSteps, kind: str, num_heads: int, w_o=None, presentation: bool = False):
    if kind == "output":
        return heads.output_figure(steps, num_heads, w_o, presentation=presentation)
    return getattr(heads, f"{kind}_figure")(steps, presentation=presentation)


@pytest.fixture(scope="module")
def small():
    model = build_model(EncoderConfig(d_model=48, num_heads=4, d_ff=96, num_layers=3, max_len=64, seed=5, window=4))
    return model, run(model, f"The animal {HOSTILE} didn't cross.")


# ------------------------------------------------------------------------------------------------ no browser
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("present", [False, True])
def test_the_payload_holds_the_figures_numbers_exactly_and_its_text_as_text(small, kind, present):
    model, trace = small
    steps = heads.head_steps(trace, 0, 2, 4)  # layer 0: a sliding window, so some keys are outside it
    w_o = model.layers[0].attn.out.weight
    fig = figure(steps, kind, trace.num_heads, w_o, present)
    header, values = decoded(panels.chart(fig, "bert_L0/H2 q4_" + kind))
    assert header["name"] == "bert_L0-H2-q4_" + kind  # a file name of letters, digits, - and _ only
    for got, want in zip(values, expected(steps, kind, w_o), strict=True):
        np.testing.assert_array_equal(got, want)  # NaN where the figure has an empty cell
    # a_ij v_j travels as the weights and V (the browser multiplies them again); nothing else is a product
    assert [p.get("product") for p in header["panels"]] == ([None, None, None, [1, 2]] if kind == "values"
                                                            else [None] * len(header["panels"]))
    for p, trace_ in zip(header["panels"], fig.plain()[0], strict=True):
        exact32 = np.array_equal(np.asarray(trace_["z"], np.float64).astype(np.float32), np.asarray(trace_["z"]),
                                 equal_nan=True)
        assert p["dtype"] == ("f4" if exact32 else "f8")
        assert (p["zmin"], p["zmax"]) == (trace_["zmin"], trace_["zmax"])
        assert p["scale"][0][1:] == list(style.plotly.colors.unlabel_rgb(style.colorscale(
            "Blues" if trace_["zmin"] == 0 else "RdBu_r")[0][1]))
    rows = [f"{printable(t, 16)} ({j})" for j, t in enumerate(trace.labels)]
    if kind != "output":
        assert [p["rows"] for p in header["panels"] if p["ticks"]] == [rows]  # the tokens as they are, no entities
    text = json.dumps(header, ensure_ascii=False)
    assert "&lt;" not in text and "&amp;" not in text and "<br>" not in text
    assert header["minPx"] == fig.plain()[1]["meta"]["min_px"] and header["height"] == fig.plain()[1]["height"]


def test_the_registered_javascript_reads_the_payload_back_exactly(tmp_path, small):
    """ui/panels.py's bytes decoded by the module the app registers: every value equal, NaN where it was NaN."""
    model, trace = small
    steps = heads.head_steps(trace, 0, 1, 6)
    charts = [panels.chart(figure(steps, kind, trace.num_heads, model.layers[0].attn.out.weight), kind)
              for kind in KINDS]
    module = tmp_path / "panels.mjs"
    module.write_text(components.joined("panels", "js"), encoding="utf-8")
    files = []
    for n, chart in enumerate(charts):
        files.append(tmp_path / f"{n}.bin")
        files[-1].write_bytes(chart)
    script = ("import { readFileSync } from 'node:fs'; import { pathToFileURL } from 'node:url';"
              "const [m, ...files] = process.argv.slice(1); const pn = await import(pathToFileURL(m).href);"
              "process.stdout.write(JSON.stringify(files.map(f => pn.decodePanels(new Uint8Array(readFileSync(f)))"
              ".values.map(v => [...v].map(x => Number.isNaN(x) ? null : x)))));")
    done = subprocess.run([node(), "--input-type=module", "-e", script, str(module), *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for got, chart in zip(json.loads(done.stdout), charts, strict=True):
        for shown, want in zip(got, decoded(chart)[1], strict=True):
            np.testing.assert_array_equal(np.array(shown, dtype=np.float64), want.ravel())


# ------------------------------------------------------------------------------------------------ Chromium
model, page = test_headview.model, test_headview.page  # the pretrained model; a fresh tab (its requests watched)


CHART_JS = """(kind) => {
  const r = [...document.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
    .map(e => e.shadowRoot?.querySelector('.pn')).find(r => r && (r.dataset.name || '').endsWith('_' + kind));
  if (!r || !r.dataset.draws) return null;
  return {name: r.dataset.name, draws: +r.dataset.draws, boxes: JSON.parse(r.dataset.boxes), drawn: r.drawn,
          label: r.querySelector('canvas').getAttribute('aria-label'),
          elements: [...new Set([...r.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))],
          tip: r.querySelector('.pn-tip').hidden ? null : r.querySelector('.pn-tip').textContent};
}"""
PIXEL_JS = """([kind, x, y]) => {
  const r = [...document.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
    .map(e => e.shadowRoot?.querySelector('.pn')).find(r => r && (r.dataset.name || '').endsWith('_' + kind));
  const c = r.querySelector('canvas'), k = c.width / c.clientWidth;
  return [...c.getContext('2d').getImageData(Math.floor(x * k), Math.floor(y * k), 1, 1).data];
}"""


def chart(page: Page, kind: str, ok=lambda c: True) -> dict:
    page.wait_for_function(f"() => {{ const c = ({CHART_JS})({kind!r}); return !!c; }}", timeout=CHANGE_MS)
    deadline = CHANGE_MS
    while deadline > 0:
        shown = page.evaluate(CHART_JS, kind)
        if shown and ok(shown):
            return shown
        page.wait_for_timeout(50)  # a polling interval, not a synchronisation sleep
        deadline -= 50
    raise AssertionError(f"the {kind} chart never reached the expected state: {page.evaluate(CHART_JS, kind)}")


def colour(scale: list[list], zmin: float, zmax: float, v: float) -> np.ndarray:
    """The colour plotly's scale gives v, linear in RGB between its stops (the component's 4096 steps)."""
    t = round(min(1.0, max(0.0, (v - zmin) / max(zmax - zmin, 1e-30))) * 4095) / 4095
    stops = np.array([s[0] for s in scale])
    rgb = np.array([s[1:] for s in scale], dtype=np.float64)
    return np.array([np.interp(t, stops, rgb[:, c]) for c in range(3)])


def cells(shape: tuple[int, int], n: int = 7) -> list[tuple[int, int]]:
    rows, cols = shape
    pick = np.random.default_rng(rows * 31 + cols)
    corners = {(0, 0), (rows - 1, cols - 1), (rows - 1, 0), (0, cols - 1)}
    return sorted(corners | {(int(pick.integers(rows)), int(pick.integers(cols))) for _ in range(n)})


def hover_text(template: str, row: str, col: int, v: float) -> str:
    out = template.replace("%{y}", row).replace("%{x}", str(col))
    for digits in "2346":
        out = out.replace(f"%{{z:.{digits}f}}", format(v, f".{digits}f"))
    return out


def check_chart(page: Page, kind: str, steps: heads.HeadSteps, trace, w_o, name_part: str) -> None:
    """Every sampled cell of every panel has its number's colour, and the hover reads out the number."""
    shown = chart(page, kind, lambda c: name_part in c["name"])
    fig = figure(steps, kind, trace.num_heads, w_o)
    header, _ = decoded(panels.chart(fig, kind))
    canvas = page.locator(f".pn[data-name='{shown['name']}'] canvas")
    canvas.scroll_into_view_if_needed()
    origin = canvas.bounding_box()
    for p, box, want in zip(header["panels"], shown["boxes"], expected(steps, kind, w_o), strict=True):
        left, top, right, bottom = box
        rows, cols = p["shape"]
        w, h = (right - left) / cols, (bottom - top) / rows
        for r, c in cells((rows, cols)):
            x, y = left + c * w + min(2.0, w / 3), top + r * h + min(2.0, h / 3)  # a corner, clear of its number
            px = np.array(page.evaluate(PIXEL_JS, [kind, x, y])[:3])
            v = float(want[r, c])
            rgb = np.array([255.0] * 3) if np.isnan(v) else colour(p["scale"], p["zmin"], p["zmax"], v)
            assert np.abs(px - rgb).max() <= 3, f"{kind} panel {p['hover']!r} cell {r},{c} = {v}: {px} not {rgb}"
        r, c = rows // 2, cols // 2
        v = float(want[r, c])
        page.mouse.move(origin["x"] + left + (c + 0.5) * w, origin["y"] + top + (r + 0.5) * h)
        tip = chart(page, kind, lambda s: s["tip"] is not None)["tip"]
        if np.isnan(v):
            assert "outside the window" in tip
        else:
            assert tip == hover_text(p["hover"], p["rows"][r], c, v), (tip, v)
    page.mouse.move(origin["x"] - 5, origin["y"] - 5)


@pytest.mark.parametrize("n_tokens", [16, 123])
def test_each_panel_is_the_heads_numbers_in_colour_and_on_hover(page, app, model, n_tokens):
    text = settings.DEFAULT_SENTENCE if n_tokens == 16 else " ".join(["the animal was tired"] * 30 + ["now"])
    trace = run(model, text)
    assert trace.seq_len == n_tokens
    page.goto(app.link("/inside-a-head", {"text": text, "layer": "2", "head": "7", "query": "3"}))
    settle(page)
    w_o = model.layers[2].attn.out.weight
    for kind in KINDS:
        check_chart(page, kind, heads.head_steps(trace, 2, 7, 3), trace, w_o, "L2_H7_q3")
    # A settled pick in the head view (another head) redraws the charts from the new head's numbers.
    draws = chart(page, "scores")["draws"]
    page.locator('.hv button[data-head="4"]').click()
    chart(page, "scores", lambda c: "L2_H4_q3" in c["name"] and c["draws"] > draws)
    for kind in KINDS:
        check_chart(page, kind, heads.head_steps(trace, 2, 4, 3), trace, w_o, "L2_H4_q3")
    assert_clean(page, app)


def test_hostile_tokens_stay_text_and_the_png_is_the_chart_at_3x(page, app, model):
    text = " ".join(BY_ID[name] for name in ("script_tag", "html_entities", "markdown_js_link", "bidi_override"))
    trace = run(model, text)
    page.goto(app.link("/inside-a-head", {"text": text, "present": "true", "layer": "0", "head": "0", "query": "0"}))
    settle(page)
    shown = chart(page, "scores")
    rows = [d["text"] for d in shown["drawn"] if d["kind"] == "row"]
    assert rows and set(rows) <= {f"{printable(t, 16)} ({j})" for j, t in enumerate(trace.labels)}
    assert set(shown["elements"]) <= {"div", "span", "button", "canvas", "a"}, shown["elements"]
    title = [d["text"] for d in shown["drawn"] if d["kind"] in ("title", "subtitle")]
    assert shown["label"] == " ".join(title) and "&lt;" not in shown["label"]  # a screen reader hears the title as text
    header, values = decoded(panels.chart(heads.scores_figure(heads.head_steps(trace, 0, 0, 0), presentation=True),
                                          "x"))
    left, top, right, bottom = shown["boxes"][1]  # K: hover a row whose label holds markup-like text
    r = next(j for j, t in enumerate(trace.labels) if "<" in t)
    canvas = page.locator(f".pn[data-name='{shown['name']}'] canvas")
    canvas.scroll_into_view_if_needed()
    origin = canvas.bounding_box()
    page.mouse.move(origin["x"] + left + 1, origin["y"] + top + (r + 0.5) * (bottom - top) / trace.seq_len)
    tip = chart(page, "scores", lambda s: s["tip"] is not None)["tip"]
    assert tip == hover_text(header["panels"][1]["hover"], header["panels"][1]["rows"][r], 0, float(values[1][r, 0]))
    with page.expect_download() as png:
        page.locator(f".pn[data-name='{shown['name']}'] button", has_text="PNG").click()
    data = Path(png.value.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and png.value.suggested_filename == shown["name"] + ".png"
    width, height = struct.unpack(">II", data[16:24])
    size = canvas.evaluate("c => [c.clientWidth, c.clientHeight]")
    assert (width, height) == (3 * size[0], 3 * size[1])
    assert not page.dialogs and not page.outside, page.outside  # nothing fetched from outside this machine
    assert_clean(page, app)


def test_a_tap_on_a_phone_reads_a_cell_out(browser, app, model):
    """On a 420 px touch screen (the chart scrolls sideways below its least width) a tap on a cell shows its number."""
    page = new_tab(browser, {"width": 420, "height": 900}, has_touch=True, is_mobile=True)
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(app.link("/inside-a-head", {"layer": "1", "head": "2", "query": "4"}))
        settle(page)
        trace = run(model, settings.DEFAULT_SENTENCE)
        steps = heads.head_steps(trace, 1, 2, 4)
        shown = chart(page, "scores", lambda c: "L1_H2_q4" in c["name"])
        header, values = decoded(panels.chart(heads.scores_figure(steps), "x"))
        left, top, right, bottom = shown["boxes"][4]  # softmax: row 6's weight
        canvas = page.locator(f".pn[data-name='{shown['name']}'] canvas")
        canvas.scroll_into_view_if_needed()
        canvas.tap(position={"x": (left + right) / 2, "y": top + 6.5 * (bottom - top) / trace.seq_len})
        tip = chart(page, "scores", lambda s: s["tip"] is not None)["tip"]
        assert tip == hover_text(header["panels"][4]["hover"], header["panels"][4]["rows"][6], 0, steps.weights[6])
        assert_clean(page, app)
    finally:
        close_tab(page)
