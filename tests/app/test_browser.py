"""The app in a real browser: `streamlit run app.py` driven by Playwright in Debian's Chromium.

One server and one browser for the whole module (each test gets a new tab: a fresh session, nothing kept in the browser).
Checks what AppTest cannot see: the heatmap and the Graphviz diagram are really drawn, typing and clicking redraw
them, the sidebar navigation and deep links work, and hostile URLs and sentences never break the page or
turn into markup. Screenshots go to artifacts/ (git-ignored).
"""

from __future__ import annotations

import base64
import io
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.colors
import pytest
from PIL import Image
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

import encoder
import ui
from devkit.hostile_inputs import BY_ID, EMPTY_IDS, MARKUP_IDS
from devkit.server import READY, ROOT, RUN_LOG_INIT, ServerLog, close_tab, new_tab, streamlit_server
from encoder import TAPS
from encoder.config import EncoderConfig
from encoder.tokenizer import encode
from encoder.viz import style
from encoder.viz.diagram import layer_diagram
from encoder.viz.text import printable
from ui import pages, settings

ARTIFACTS = ROOT / "artifacts"
# Plain-text tracebacks in the server log, so a failure message can quote them; no hot reload: a source file
# saved while the suite runs must not be re-imported under running sessions (half-imported modules raise).
SERVER_ENV = {"STREAMLIT_LOGGER_ENABLE_RICH": "false", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
SMALL = {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "128", "num_layers": "2"}
LOAD_MS = 120_000  # first build of a model, or a page that computes on open (2-core CI)
CHANGE_MS = 60_000  # one interaction

CHART = '[data-testid="stPlotlyChart"]'
GRAPHVIZ = '[data-testid="stGraphVizChart"]'
EXCEPTION = '[data-testid="stException"]'
ALERT = '[data-testid="stAlert"]'

# True once the script has been idle for `ms` milliseconds in a row with the frame drawn: a rerun that has not
# started yet, or one that is between two deltas, does not count as settled.
SETTLE_JS = """([ready, ms]) => {
  const ok = document.querySelector(ready) && document.querySelector('[data-testid="stMain"] h1');
  const now = performance.now();
  if (!ok) { window.__settledSince = undefined; return false; }
  if (window.__settledSince === undefined) window.__settledSince = now;
  return now - window.__settledSince >= ms;
}"""

# The one attention map on the page: the Attention page's map (ui/heatmap.js) once its exact values are drawn (its
# y tick labels, title, title and subtitle, and its pixels), or elsewhere the one plotly heatmap, once the old chart
# is gone.
MAP = '[data-testid="stBidiComponentIsolated"]'  # the attention map (a st.components.v2 component, like the head view)
HEATMAP_JS = """() => {
  const hm = document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm');
  if (hm && hm.dataset.exact === '1') {
    return {ticks: [...hm.querySelectorAll('.hm-tick.hm-y')].map(t => t.textContent), title: hm.dataset.title,
            text: hm.querySelector('.hm-title').textContent + ' ' + hm.querySelector('.hm-sub').textContent,
            image: hm.querySelector('canvas.hm-map').toDataURL('image/png')};
  }
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
  if (charts.length !== 1 || !charts[0].querySelector('svg.main-svg .heatmaplayer image')) return null;
  const c = charts[0];
  return {ticks: [...c.querySelectorAll('.ytick text')].map(t => t.textContent),
          title: c.querySelector('.gtitle')?.textContent ?? '',
          text: c.querySelector('.infolayer')?.textContent ?? '',
          image: c.querySelector('.heatmaplayer image').getAttribute('href')};
}"""
WAIT_HEATMAP_JS = f"""([ready, ticks, labels, title]) => {{
  if (document.querySelector('[data-testid="stException"]')) return true;  // fail now, not at the timeout
  const h = ({HEATMAP_JS})();
  if (!h || !document.querySelector(ready) || !h.title.includes(title)) return false;
  if (ticks !== null) return JSON.stringify(h.ticks) === JSON.stringify(ticks);
  // figures.py labels every k-th token when not all fit without overprinting: exactly that sample, for some k
  const shown = JSON.stringify(h.ticks);
  return h.ticks.length > 1 && labels.some((_, k) => shown === JSON.stringify(labels.filter((_, i) => i % (k + 1) === 0)));
}}"""

# What user text must never turn into: Markdown- or HTML-made elements where Streamlit renders Markdown (`within`:
# the alerts for URL text, the whole main area for sentences), embedded content anywhere in the main area, scripts
# anywhere, javascript: links anywhere.
MARKUP_JS = """(within) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const md = `${within} [data-testid="stMarkdownContainer"] :is(b, strong, em, i, u, s, del, a, img, h1, h2, h3, h4, `
           + 'h5, h6, ul, ol, blockquote, code, pre, table, hr)';
  // the components' own modules (ui/components.py) come and go with their components: not counted
  const ours = 'script[type="module"][src*="/_stcore/bidi-components/encoder_explorer."]';
  return {scripts: document.querySelectorAll(`script:not(${ours})`).length,
          created: [...main.querySelectorAll(`${md}, img, iframe, object, embed, video, audio, form`)]
                   .map(e => `${e.tagName}:${e.textContent.slice(0, 80)}`),
          jsLinks: document.querySelectorAll('a[href^="javascript" i]').length};
}"""


# --------------------------------------------------------------------------------------------------- fixtures
@dataclass
class App:
    url: str
    log: ServerLog

    def link(self, path: str = "/", params: dict | Sequence[tuple[str, str]] | None = None) -> str:
        query = urllib.parse.urlencode(params or {}, quote_via=urllib.parse.quote)
        return f"{self.url}{path}" + (f"?{query}" if query else "")


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    with streamlit_server(env=SERVER_ENV) as (url, proc):
        yield App(url, ServerLog(proc.stdout))



def new_page(browser) -> Page:
    """A new tab (new_tab: a fresh session and nothing kept in the browser); close it with close_tab."""
    page = new_tab(browser, {"width": 1440, "height": 1300})
    page.add_init_script(RUN_LOG_INIT)  # window.__runs once a test calls COUNT_RUNS
    page.dialogs = []  # any alert() means user text ran as script
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    return page


@pytest.fixture
def page(browser) -> Iterator[Page]:
    page = new_page(browser)
    yield page
    close_tab(page)


# ---------------------------------------------------------------------------------------------------- helpers
def settle(page: Page, ms: int = 600, timeout: float = LOAD_MS) -> None:
    """Wait until the app is idle and stays idle for `ms` (after a load, a click or typing)."""
    page.evaluate("window.__settledSince = undefined")
    page.wait_for_function(SETTLE_JS, arg=[READY, ms], timeout=timeout, polling=100)


def open_app(page: Page, app: App, path: str = "/", params=None) -> None:
    page.goto(app.link(path, params))
    settle(page)


def describe(page: Page, app: App, since: int = 0) -> str:
    """What the page shows, for failure messages."""
    state = page.evaluate(f"""() => ({{
      url: location.href.slice(0, 300),
      scriptState: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
      alerts: [...document.querySelectorAll('{ALERT}')].map(e => e.innerText.slice(0, 300)),
      exceptions: [...document.querySelectorAll('{EXCEPTION}')].map(e => e.innerText.slice(0, 300)),
      charts: document.querySelectorAll('{CHART}').length,
      heatmap: ({HEATMAP_JS})(),
    }})""")
    if state["heatmap"]:
        state["heatmap"].pop("image")
        state["heatmap"]["text"] = state["heatmap"]["text"][:300]
    errors = app.log.errors(since)
    return f"{state}" + (f"\n--- server log ---\n{errors}" if errors else "")


def assert_clean(page: Page, app: App, since: int = 0) -> None:
    """No exception element on the page and no uncaught exception in the server log."""
    shown = page.locator(EXCEPTION).count()
    logged = app.log.errors(since)
    assert not shown and not logged, f"exception on {page.url[:200]}: {describe(page, app, since)}"
    assert not page.dialogs, f"a dialog opened (user text ran as script): {page.dialogs}"


def heatmap_labels(text: str) -> list[str]:
    """The tick labels the heatmap should show for `text`: its WordPiece tokens, made printable."""
    return [printable(t, 16) for t in encode(text, EncoderConfig().max_len).tokens]


def wait_heatmap(page: Page, app: App, labels: list[str], title: str = "", timeout: float = CHANGE_MS) -> dict:
    """Wait until the single heatmap shows exactly `labels` (long inputs: a sample of them) and `title`."""
    exact = labels if len(labels) <= 16 else None  # up to 16 tokens every one is labelled, even on a projector
    try:
        page.wait_for_function(WAIT_HEATMAP_JS, arg=[READY, exact, labels, title], timeout=timeout, polling=100)
    except PlaywrightTimeout:
        raise AssertionError(f"the heatmap never showed {labels[:20]} / {title!r}: {describe(page, app)}") from None
    assert not page.locator(EXCEPTION).count(), f"exception instead of the heatmap: {describe(page, app)}"
    return page.evaluate(HEATMAP_JS)


def type_sentence(page: Page, text: str) -> None:
    """Fill the Sentence box and commit it the way a user does (Ctrl+Enter; leaving the box works too)."""
    box = page.get_by_label("Sentence")
    box.fill(text)
    box.press("Control+Enter")


def graph_edges(page: Page) -> set[str]:
    return set(page.locator(f"{GRAPHVIZ} svg g.edge > title").all_text_contents())


def graph_nodes(page: Page) -> set[str]:
    return set(page.locator(f"{GRAPHVIZ} svg g.node > title").all_text_contents())


def dot_edges(cfg: EncoderConfig) -> set[str]:
    """The edges of the diagram the app should draw for `cfg`, read from its DOT source."""
    return {f"{a}->{b}" for a, b in re.findall(r"^\s*(\w+) -> (\w+)", layer_diagram(cfg).source, re.M)}


def query(page: Page) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query, keep_blank_values=True)


def wait_graph(page: Page, app: App, timeout: float = CHANGE_MS) -> None:
    try:
        page.wait_for_function(f"""() => {{
          if (document.querySelector('{EXCEPTION}')) return true;
          const titles = [...document.querySelectorAll('{GRAPHVIZ} svg g.node > title')].map(t => t.textContent);
          return {list(TAPS)}.every(tap => titles.includes(tap));
        }}""", timeout=timeout, polling=200)
    except PlaywrightTimeout:
        raise AssertionError(f"the data-flow diagram was not drawn with every tap: {describe(page, app)}") from None
    assert not page.locator(EXCEPTION).count(), f"exception instead of the diagram: {describe(page, app)}"


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.browser
def test_deep_link_opens_the_diagram_inside_the_frame(page, app):
    """First in the module on purpose: a server's very first run is where a deep link used to find no page."""
    since = len(app.log.lines)
    params = SMALL | {"norm": "pre"}
    open_app(page, app, "/diagram", params)
    wait_graph(page, app, timeout=LOAD_MS)
    assert not page.get_by_text("Page not found").count(), describe(page, app, since)
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.locator('[data-testid="stSidebarNav"]').is_visible(), "the deep link lost the frame's navigation"
    assert sidebar.get_by_role("radio", name=settings.CUSTOM_LABEL).is_checked()
    assert sidebar.get_by_role("radio", name="Pre-LN").is_checked()
    knobs = sidebar.inner_text()
    for label, value in (("d_model (width)", "64"), ("Heads (num_heads)", "4"), ("d_ff (FFN width", "128")):
        assert re.search(rf"{re.escape(label)}.*\n+{value}\n", knobs), f"sidebar should show {label} = {value}: {knobs[:600]}"
    pre = EncoderConfig(d_model=64, num_heads=4, d_ff=128, num_layers=2, norm="pre")
    post = EncoderConfig(d_model=64, num_heads=4, d_ff=128, num_layers=2, norm="post")
    assert dot_edges(pre) != dot_edges(post)
    assert graph_edges(page) == dot_edges(pre), "the browser should draw the Pre-LN diagram of this config"
    assert graph_nodes(page) >= set(TAPS)
    assert re.search(r"\((seq|\d+), 64\)", page.locator(GRAPHVIZ).inner_text()), "edge shapes should carry d_model"
    assert_clean(page, app, since)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser_diagram_pre_ln.png"))


@pytest.mark.browser
def test_home_page_draws_the_heatmap(page, app):
    since = len(app.log.lines)
    open_app(page, app)
    layer, head = settings.SETTINGS["layer"].default, settings.SETTINGS["head"].default
    heat = wait_heatmap(page, app, heatmap_labels(settings.DEFAULT_SENTENCE), f"Attention, layer {layer}, head {head}",
                        timeout=LOAD_MS)
    assert heat["image"].startswith("data:image/png;base64,") and len(heat["image"]) > 1000, "heatmap cells not drawn"
    assert page.locator(".hm canvas.hm-map").first.bounding_box()["width"] > 400
    assert page.get_by_role("radio", name=settings.PRETRAINED_LABEL).is_checked()
    assert page.get_by_label("Sentence").input_value() == settings.DEFAULT_SENTENCE
    assert_clean(page, app, since)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser_home.png"))
    page.locator(MAP).screenshot(path=str(ARTIFACTS / "browser_heatmap.png"))


@pytest.mark.browser
def test_typing_a_sentence_redraws_the_heatmap(page, app):
    since = len(app.log.lines)
    open_app(page, app)
    before = wait_heatmap(page, app, heatmap_labels(settings.DEFAULT_SENTENCE), timeout=LOAD_MS)
    sentence = "The quick brown fox jumps over the lazy dog."
    type_sentence(page, sentence)
    after = wait_heatmap(page, app, heatmap_labels(sentence))
    assert after["ticks"][1:4] == ["the", "quick", "brown"] and after["image"] != before["image"]
    assert "quick brown fox" in after["text"], "the chart's subtitle should quote the new sentence"
    settle(page)
    assert query(page).get("text") == [sentence], "the sentence should be written into the URL"
    assert_clean(page, app, since)


@pytest.mark.browser
def test_choosing_a_head_redraws_the_heatmap(page, app):
    since = len(app.log.lines)
    open_app(page, app)
    labels = heatmap_labels(settings.DEFAULT_SENTENCE)
    layer, head = settings.SETTINGS["layer"].default, settings.SETTINGS["head"].default
    other = (head + 4) % 12  # the pretrained model has 12 heads
    before = wait_heatmap(page, app, labels, f"layer {layer}, head {head}", timeout=LOAD_MS)
    page.locator(f'.hm button[data-head="{other}"]').click()  # the map's own Head buttons
    after = wait_heatmap(page, app, labels, f"layer {layer}, head {other}")
    assert after["image"] != before["image"], f"head {other} should draw different weights from head {head}"
    settle(page)
    assert query(page).get("head") == [str(other)]
    assert_clean(page, app, since)


# Where each attention heatmap's plot area sits and where its labels end up, in the chart's own pixels.
MARGINS_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
  .filter(gd => /^Attention, layer/.test(gd.querySelector('.gtitle')?.textContent ?? '')).map(gd => {
  const svg = gd.querySelector('svg.main-svg').getBoundingClientRect();
  const boxes = [...gd.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .colorbar text')]
    .map(t => t.getBoundingClientRect()).filter(b => b.width > 0);
  return {given: gd.layout.margin, used: gd._fullLayout._size, width: svg.width, height: svg.height,
          left: Math.min(...boxes.map(b => b.left - svg.left)), right: Math.max(...boxes.map(b => b.right - svg.left)),
          bottom: Math.max(...boxes.map(b => b.bottom - svg.top))};
})"""


MAPS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
  .filter(gd => /^Attention, layer/.test(gd.querySelector('.gtitle')?.textContent ?? ''))
  .some(gd => gd.querySelectorAll('.heatmaplayer image').length === 2)"""


@pytest.mark.browser
@pytest.mark.parametrize(("text", "present"), [
    (settings.DEFAULT_SENTENCE, False),
    ("Antidisestablishmentarianism internationalization supercalifragilistic", True),
    ("日本語のテキストを解析する 你好世界 😀🎉 مرحبا بالعالم", False),
], ids=["default", "long-words-projector", "wide-characters"])
def test_heatmap_margins_fit_its_labels_in_one_pass(page, app, text, present):
    """encoder/viz/attention.py sizes a plotly heatmap's margins for its token labels itself (Knock out heads draws
    a pair, the intact and the knocked-out model's, in one chart). If they fit, plotly never widens them, which would
    redraw the whole chart; either way no label may be cut off. (The Attention page's map is ui/heatmap.js:
    tests/app/test_heatmap.py.)"""
    since = len(app.log.lines)
    open_app(page, app, "/knockout", params={"text": text, "present": str(present).lower(), "ablate": "3.1"})
    # Both maps drawn: the page has other charts, and one map may be drawn a moment before the other.
    page.wait_for_function(MAPS_DRAWN_JS, timeout=LOAD_MS)
    maps = page.evaluate(MARGINS_JS)
    assert len(maps) == 1, maps
    for m in maps:
        assert all(m["used"][side] == m["given"][side] for side in "lbr"), f"plotly had to widen the margins: {m}"
        assert m["left"] >= 0 and m["right"] <= m["width"] and m["bottom"] <= m["height"], f"a label is cut off: {m}"
    assert_clean(page, app, since)


# The one-head view is a canvas (ui/heatmap.js): its pixels (one block per cell, as the backing
# store holds them), whether it scales without smoothing, and the weights it hovers with.
EXACT_JS = """() => {
  const r = document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm');
  const c = r?.querySelector('canvas.hm-map');
  if (!c || r.dataset.exact !== '1') return null;
  const box = c.getBoundingClientRect();
  return {png: c.toDataURL('image/png'), smoothing: c.getContext('2d').imageSmoothingEnabled,
          title: r.dataset.title, box: {x: box.x, y: box.y, width: box.width, height: box.height}};
}"""
READ_JS = """() => {
  const r = document.querySelector('[data-testid="stBidiComponentIsolated"]').shadowRoot.querySelector('.hm-read');
  return {...r.dataset, text: r.textContent};
}"""
# Varied words, so neighbouring cells differ and a smoothed picture shows (600 words: truncated to 512 tokens).
EXACT_TEXT = " ".join((("the teacher reads the long story to the class and every child hears each word with great "
                        "care while the rain falls on the old school roof").split() * 30)[:600])


def cell_colours(weights: np.ndarray) -> np.ndarray:
    """(T, T, 3) RGB of each weight on the attention colour scale, as attention.attention_heatmap's stops give it."""
    stops = [(at, plotly.colors.unlabel_rgb(rgb)) for at, rgb in plotly.colors.get_colorscale(style.ATTENTION_SCALE)]
    return np.stack([np.interp(weights, [at for at, _ in stops], [rgb[k] for _, rgb in stops]) for k in range(3)],
                    axis=-1)


def worst_cell_error(pixels: np.ndarray, colours: np.ndarray) -> float:
    """Largest colour distance (levels) of a pixel to the nearest of the cells it may show: its own (by position)
    or one either side (a pixel straddling two cells shows one of them, never a blend, when scaled without
    smoothing)."""
    h, w = pixels.shape[:2]
    n = colours.shape[0]
    sy = np.minimum(((np.arange(h) + 0.5) * n / h).astype(int), n - 1)
    sx = np.minimum(((np.arange(w) + 0.5) * n / w).astype(int), n - 1)
    best = np.full((h, w), np.inf)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            near = colours[np.clip(sy + dy, 0, n - 1)][:, np.clip(sx + dx, 0, n - 1)]
            best = np.minimum(best, np.abs(pixels - near).max(-1))
    return float(best.max())


PAIR_BOX_JS = """b => ({box: b.clientWidth, scroll: b.scrollWidth,
                        chart: b.querySelector('svg.main-svg').getBoundingClientRect().width,
                        page: document.documentElement.scrollWidth, window: window.innerWidth})"""


@pytest.mark.browser
@pytest.mark.parametrize("width", [420, 1440])
@pytest.mark.parametrize(("path", "params", "key"), [("/side-by-side", {}, "placement-pair"),
                                                     ("/knockout", {"ablate": "3.1"}, "knockout-pair")],
                         ids=["compare", "knockout"])
def test_a_pair_of_maps_scrolls_sideways_on_a_phone_instead_of_squeezing(page, app, path, params, key, width):
    """Two maps in one chart keep ui.PAIR_MIN_PX on a phone (their box scrolls sideways, the page does not); on a wide
    screen the chart takes the box's width and nothing scrolls."""
    page.set_viewport_size({"width": width, "height": 900})
    open_app(page, app, path, params)
    page.wait_for_selector(f".st-key-{key} svg.main-svg", timeout=LOAD_MS)
    # Plotly may first draw at the column's width and redraw once the box's min-width applies (seen once at 420 px:
    # a 388 px chart read right after the first drawing): read the sizes once the chart has its width.
    narrow = width < ui.PAIR_MIN_PX
    try:  # arg: the least chart width on a phone, 0 where the chart takes the box's width
        page.wait_for_function(f"""([key, least]) => {{ const s = ({PAIR_BOX_JS})(document.querySelector(`.st-key-${{key}}`));
            return least ? s.chart >= least - 1 : Math.abs(s.chart - s.box) <= 1; }}""",
                               arg=[key, ui.PAIR_MIN_PX if narrow else 0], timeout=5_000, polling=100)
    except PlaywrightTimeout:
        pass  # the asserts below say what it stayed at
    sizes = page.locator(f".st-key-{key}").evaluate(PAIR_BOX_JS)
    assert sizes["page"] <= sizes["window"], sizes
    if narrow:
        assert sizes["chart"] >= ui.PAIR_MIN_PX - 1 and sizes["scroll"] > sizes["box"], sizes
    else:
        assert sizes["box"] > ui.PAIR_MIN_PX and abs(sizes["chart"] - sizes["box"]) <= 1, sizes
        assert sizes["scroll"] <= sizes["box"], sizes
    assert_clean(page, app)


@pytest.mark.browser
def test_512_token_heatmap_is_exact_in_the_browser(page, app):
    """Issue 15: the one-head view at 512 tokens stays exact although it is drawn in the browser. Every pixel of
    the map is the colour of the model's weight of the cell under it (within a colour level), scaled without
    smoothing, and once the chosen head's float32 weights are in, the hover shows the model's weight itself."""
    since = len(app.log.lines)
    layer, head = 4, 7
    trace = encoder.run(encoder.load_pretrained(), EXACT_TEXT)
    assert trace.seq_len == 512
    weights = trace.attention[layer, head].numpy()  # (T, T)
    open_app(page, app, params={"text": EXACT_TEXT, "layer": str(layer), "head": str(head)})
    held = page.wait_for_function(EXACT_JS, timeout=LOAD_MS, polling=100).json_value()
    assert held["title"] == f"Attention, layer {layer}, head {head}" and held["smoothing"] is False, held["title"]
    png = Image.open(io.BytesIO(base64.b64decode(held["png"].split(",", 1)[1]))).convert("RGB")
    pixels = np.asarray(png, dtype=np.float64)
    assert min(pixels.shape[:2]) >= 300, f"the map is only {pixels.shape[:2]} pixels"
    worst = worst_cell_error(pixels, cell_colours(weights))
    assert worst <= 1, f"a pixel is {worst:.1f} colour levels away from its cell's weight's colour"

    box = held["box"]
    for q in (1, 256, 510):  # the strongest key of a few queries, hovered in the cell
        k = int(weights[q].argmax())
        page.mouse.move(box["x"] + (k + 0.5) * box["width"] / 512, box["y"] + (q + 0.5) * box["height"] / 512)
        shown = page.evaluate(READ_JS)
        q2, k2 = int(shown["q"]), int(shown["k"])  # a mouse position is a whole pixel: maybe a neighbour cell
        assert abs(q2 - q) <= 1 and abs(k2 - k) <= 1 and shown["exact"] == "1", shown
        # The exact map travels as the four decimals the hover prints (0.17 MB, not 1 MB of float32): those are the
        # model's, digit for digit, and the value read is within half a unit of the last one.
        assert shown["digits"] == f"{weights[q2, k2]:.4f}" and abs(float(shown["weight"]) - weights[q2, k2]) <= 5e-5
        assert shown["text"] == f"“{trace.tokens[q2]}” ({q2}) → “{trace.tokens[k2]}” ({k2}): {weights[q2, k2]:.4f}"
    assert_clean(page, app, since)


# What each page's main content is, by URL path: (selector, how many). The teaching pages (issue 4) may still show
# their "being built" notice; once built they must show the content.
PLACEHOLDER = "This teaching view is being built."
CONTENT = {
    "heatmaps": ('[data-testid="stBidiComponentIsolated"]', 1),
    "inside-a-head": ('[data-testid="stBidiComponentIsolated"]', 1),
    "statistics": (f"{CHART} svg.main-svg", 3),
    "diagram": (f"{GRAPHVIZ} svg g.node", len(TAPS)),
    "wordpieces": ('[data-testid="stDataFrame"]', 1),
    "side-by-side": (f"{CHART} svg.main-svg", 1),
    "walkthrough": (f"{GRAPHVIZ} svg g.node", len(TAPS)),
    "warmup": (f"{CHART} svg.main-svg, [data-testid='stMain'] [data-testid='stButton']", 1),
    "word-order": (f"{CHART} svg.main-svg", 1),
    "check": ("[data-testid='stMain'] [data-testid='stRadio']", 1),
    "embeddings": (f"{CHART} svg.main-svg", 2),
    "trajectories": (f"{CHART} svg.main-svg", 1),
    "knockout": (f"{CHART} svg.main-svg", 2),
    "why-similar": (f"{CHART} svg.main-svg", 3),  # the coloured tokens, a bar chart per sentence
    "lessons": ("[data-testid='stMain'] [data-testid='stSelectbox']", 1),  # the Lesson box (Play beside it)
}
# Every page of the registry, clicked in the sidebar in its order; the default page last, to leave another one.
PAGES = [(entry.title, entry.url, *CONTENT[entry.path])
         for entry in sorted(pages.PAGES, key=lambda entry: entry.default) if entry.path in CONTENT]


def test_every_registered_page_is_opened_from_the_sidebar():
    assert set(CONTENT) == set(pages.BY_PATH), "CONTENT needs the main content of every page in ui/pages.PAGES"


NAV_SENTENCE = "Hello world, the encoder reads every word."


@pytest.fixture(scope="module")
def nav_page(browser, app) -> Iterator[Page]:
    page = new_page(browser)
    open_app(page, app, "/", SMALL | {"norm": "pre", "text": NAV_SENTENCE})
    wait_heatmap(page, app, heatmap_labels(NAV_SENTENCE), timeout=LOAD_MS)
    yield page
    close_tab(page)


@pytest.mark.browser
@pytest.mark.parametrize(("title", "path", "content", "count"), PAGES, ids=[p[1] for p in PAGES])
def test_every_page_opens_from_the_sidebar(nav_page, app, title, path, content, count):
    page, since = nav_page, len(app.log.lines)
    link = page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title)
    more = page.locator('[data-testid="stSidebarNavViewButton"]')
    if not link.is_visible() and more.count():
        more.click()  # a long navigation shows its first pages and a "View more" button
    link.click()
    page.wait_for_url(re.compile(rf"^{re.escape(app.url + path)}(\?|$)"), timeout=CHANGE_MS)
    # Training stability trains three small models on its first open (under 60 s on 2 idle cores).
    timeout = 2 * LOAD_MS if path == "/warmup" else LOAD_MS
    try:
        page.wait_for_function(
            """([sel, n, exc, placeholder]) => document.querySelectorAll(sel).length >= n
               || document.querySelector(exc) || document.body.innerText.includes(placeholder)""",
            arg=[content, count, EXCEPTION, PLACEHOLDER], timeout=timeout, polling=200)
        settle(page, timeout=timeout)
    except PlaywrightTimeout:
        raise AssertionError(f"{title}: its main content ({content}) never appeared: {describe(page, app, since)}") from None
    assert_clean(page, app, since)
    if not page.locator(content).count() >= count:
        assert page.get_by_text(PLACEHOLDER).count(), describe(page, app, since)
        print(f"\n{title}: still the placeholder notice")
    params = query(page)
    assert params.get("model") == ["custom"] and params.get("norm") == ["pre"], "the settings must survive navigation"
    if path == "/diagram":
        assert graph_nodes(page) >= set(TAPS)
        cfg = settings.config_from(settings.defaults() | {k: int(v) for k, v in SMALL.items() if k != "model"}
                                   | {"norm": "pre"})
        assert graph_edges(page) == dot_edges(cfg)
    if path == "/":
        wait_heatmap(page, app, heatmap_labels(NAV_SENTENCE))


@pytest.mark.browser
@pytest.mark.parametrize("path", ["/dataflow", "/attention", "/no-such-page"])
def test_raw_page_file_urls_show_no_exception(page, app, path):
    """Streamlit's legacy pages/ router must never run a page without its frame."""
    since = len(app.log.lines)
    open_app(page, app, path, SMALL)
    assert page.locator('[data-testid="stSidebarNav"]').is_visible(), describe(page, app, since)
    assert_clean(page, app, since)


# Hostile links (issue 6, point 2): (id, path, query as (key, value) pairs, warnings that must name the problem,
# what the main area shows afterwards: "heatmap", "graph" or an error message).
HUGE = "9" * 40
HOSTILE_URLS = [
    ("wrong_types", "/", [("model", "custom"), ("d_model", "abc"), ("num_layers", "two"), ("final_norm", "maybe"),
                          ("train", "2")], ["d_model='abc'", "num_layers='two'", "final_norm='maybe'", "train='2'"], "heatmap"),
    ("huge_numbers", "/", [*SMALL.items(), ("seed", "1e400"), ("layer", HUGE), ("head", "-1"), ("dropout", "1e308"),
                           ("num_layers", HUGE)], ["seed=", "layer=", "head='-1'", "dropout=", "num_layers="], "heatmap"),
    ("unknown_enums", "/", [("model", "gpt-5"), ("norm", "sideways"), ("activation", "swish"), ("positional", "alibi"),
                            ("view", "3d"), ("tap", "everything"), ("device", "tpu")],
     ["'gpt-5'", "norm='sideways'", "activation='swish'", "positional='alibi'", "view='3d'", "device='tpu'"],
     "heatmap"),
    ("repeated_keys", "/", [*SMALL.items(), ("model", "custom"), ("text", "first words"), ("text", "second words")],
     ["'model' 2 times", "'text' 2 times"], "heatmap"),
    ("empty_values", "/", [("model", ""), ("d_model", ""), ("head", ""), ("present", "")],
     ["model=''", "d_model=''", "head=''", "present=''"], "heatmap"),
    ("unavailable_device", "/", [*SMALL.items(), ("device", "cuda")], ["cuda"], "heatmap"),
    ("oversized_text", "/", [*SMALL.items(), ("text", "word " * 5000)], [f"{settings.MAX_TEXT_CHARS:,}"], "heatmap"),
    ("impossible_config", "/", [*SMALL.items(), ("num_heads", "3")], [], "not divisible"),
    ("diagram_bad_layers", "/diagram", [*SMALL.items(), ("num_layers", "0"), ("layer", "7")], ["num_layers='0'"], "graph"),
    ("markup_in_keys_and_values", "/", [*SMALL.items(), ("norm", "**x**"), ("[a](javascript:alert(1))", "1"),
                                        ("<script>alert(1)</script>", "1"), ("activation", "<b>bold</b>")],
     ["'**x**'", "'[a](javascript:alert(1))'", "'<script>alert(1)</script>'", "'<b>bold</b>'"], "heatmap"),
]


@pytest.mark.browser
@pytest.mark.parametrize(("path", "params", "warnings", "shows"), [c[1:] for c in HOSTILE_URLS],
                         ids=[c[0] for c in HOSTILE_URLS])
def test_hostile_url_warns_and_the_app_still_works(page, app, path, params, warnings, shows):
    since = len(app.log.lines)
    open_app(page, app, path, params)
    before = page.evaluate(MARKUP_JS, ALERT)
    alerts = "\n".join(page.locator(ALERT).all_inner_texts())
    for warning in warnings:
        assert warning in alerts, f"no warning naming {warning!r}; alerts shown: {alerts[:1500]}"
    assert not before["created"] and not before["jsLinks"], f"URL text became markup: {before['created']}"
    assert_clean(page, app, since)
    if shows == "graph":
        wait_graph(page, app)
        return
    if shows != "heatmap":
        assert shows in alerts and not page.locator(CHART).count(), describe(page, app, since)
        return
    texts = [value for key, value in params if key == "text"] or [settings.DEFAULT_SENTENCE]
    text = settings.cut_utf16(texts[-1], settings.MAX_TEXT_CHARS)  # the last one wins, cut like the app cuts it
    wait_heatmap(page, app, heatmap_labels(text), timeout=LOAD_MS)
    expect(page.get_by_label("Sentence")).to_have_value(text)
    type_sentence(page, "Still working after a bad link.")
    wait_heatmap(page, app, heatmap_labels("Still working after a bad link."))
    assert_clean(page, app, since)
    assert page.evaluate(MARKUP_JS, ALERT)["scripts"] == before["scripts"]


URL_SENTENCES = ["empty", "whitespace", "paragraph_20k", "script_tag", "bold_tag", "img_onerror", "markdown_bold",
                 "markdown_js_link", "mixed_direction", "bidi_override", "nul", "c0_controls", "emoji_zwj", "cjk",
                 "combining_marks", "dot_trailing_backslash", "dot_syntax"]
SCREENSHOTS = {"bold_tag", "script_tag", "mixed_direction", "bidi_override"}
TYPED_SENTENCES = ["script_tag", "bold_tag", "markdown_js_link", "bidi_override", "nul", "paragraph_20k", "whitespace"]


def check_sentence_shown_literally(page: Page, app: App, name: str, since: int, baseline: dict) -> None:
    text = settings.cut_utf16(BY_ID[name], settings.MAX_TEXT_CHARS)  # longer text is cut, with a message, to the app's cap
    if name in EMPTY_IDS:
        try:  # the friendly prompt, and the previous sentence's heatmap gone
            page.wait_for_function(
                """([ready, chart]) => document.querySelector(ready) && !document.querySelector(chart)
                   && document.querySelector('[data-testid="stMain"]').innerText.includes('Type a sentence above')""",
                arg=[READY, f"{CHART}, {MAP}"], timeout=CHANGE_MS, polling=100)
        except PlaywrightTimeout:
            raise AssertionError(f"no prompt (or a heatmap) for a blank sentence: {describe(page, app, since)}") from None
    else:
        heat = wait_heatmap(page, app, heatmap_labels(text), timeout=LOAD_MS)
        if name in MARKUP_IDS:
            assert text in heat["text"], f"the chart should quote {text!r} literally, not as markup: {heat['text'][:300]}"
    marks = page.evaluate(MARKUP_JS, '[data-testid="stMain"]')
    assert marks["created"] == baseline["created"] and not marks["jsLinks"], f"user text became markup: {marks['created']}"
    assert marks["scripts"] == baseline["scripts"], "user text added a <script> element"
    # the box holds the sentence as typed (a page load's time: on a busy machine a blank sentence's run may redraw)
    expect(page.get_by_label("Sentence")).to_have_value(text, timeout=LOAD_MS)
    assert_clean(page, app, since)


@pytest.fixture(scope="module")
def markup_baseline(browser, app) -> dict:
    page = new_page(browser)
    open_app(page, app, "/", SMALL | {"text": "A plain sentence."})
    wait_heatmap(page, app, heatmap_labels("A plain sentence."), timeout=LOAD_MS)
    baseline = page.evaluate(MARKUP_JS, '[data-testid="stMain"]')  # the page's own title and heading anchor
    close_tab(page)
    return baseline


@pytest.mark.browser
@pytest.mark.parametrize("name", URL_SENTENCES)
def test_hostile_sentence_in_the_url_is_shown_literally(page, app, markup_baseline, name):
    since = len(app.log.lines)
    open_app(page, app, "/", SMALL | {"text": BY_ID[name]})
    check_sentence_shown_literally(page, app, name, since, markup_baseline)
    if name in SCREENSHOTS:
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator(MAP).screenshot(path=str(ARTIFACTS / f"browser_hostile_{name}.png"))
    if name.startswith("dot_"):
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Data flow").click()
        wait_graph(page, app)
        assert_clean(page, app, since)


@pytest.fixture(scope="module")
def typing_page(browser, app) -> Iterator[Page]:
    page = new_page(browser)
    open_app(page, app, "/", SMALL | {"norm": "pre", "text": "Start here."})
    wait_heatmap(page, app, heatmap_labels("Start here."), timeout=LOAD_MS)
    yield page
    close_tab(page)


@pytest.mark.browser
@pytest.mark.parametrize("name", TYPED_SENTENCES)
def test_hostile_sentence_typed_into_the_box_is_shown_literally(typing_page, app, markup_baseline, name):
    page, since = typing_page, len(app.log.lines)
    type_sentence(page, settings.cut_utf16(BY_ID[name], settings.MAX_TEXT_CHARS))  # the box's maxlength stops a user at the cap
    check_sentence_shown_literally(page, app, name, since, markup_baseline)
