"""Presentation mode on a classroom projector: every page at 1280x720 and 1024x768 in Chromium.

For each page: the sidebar is folded away and the way out of presentation mode stays on screen; the page's main
figure (its first chart or diagram) lies whole on screen below Streamlit's header at first load, without a scroll
(on the few pages in SCROLLED: once scrolled to its top), and fits its width; no widget label or button text is
cut off (scrollWidth > clientWidth); every colour bar is no taller than the heatmaps it belongs to; chart tick
labels are at least 14 px; no two numbers printed in heatmap cells overlap and no chart title runs past its chart;
and no stray "None" is printed. Without presentation mode, with the sidebar open, labels, buttons and cell numbers
are whole at 1024x768, 1440x900 and 1920x1080, and chart titles at 1440x900 and 1920x1080.

Lessons (issue 21): every slide of every built-in lesson, played with a clicker's key, keeps its main figure whole
under the lesson bar (which sits in Streamlit's header band) and the slide's title, with the talking points folded
(as a slide opens); unfolded, they are whole and at least 14 px, above the figure.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from devkit.server import READY, close_tab, new_tab, streamlit_server
from encoder.viz.style import FONT, MIN_PRESENT_FONT
from encoder.viz.text import prose_px
from tests.app.test_browser import SERVER_ENV, App, ServerLog, assert_clean, describe, settle
from tests.app.walk import PATH_ALIASES, url_settings
from ui import lessons, pages, player

VIEWPORTS = [(1280, 720), (1024, 768)]
WIDE = [(1024, 768), (1440, 900), (1920, 1080)]  # laptop and desktop screens, not presenting
LOAD_MS = 180_000  # a page that computes on open (Training stability's gradients) on a busy 2-core machine


PATHS = ["" if entry.default else entry.path for entry in pages.PAGES]  # URL paths; the default page is ""
MAIN = '[data-testid="stMain"]'
# The head view (Inside a head) is a custom component: Streamlit 1.67 wraps it in stBidiComponentIsolated.
# The lesson player's helpers (the key listener, the file opener, the link box) are components too, but no figure.
FIGURE = (f'{MAIN} :is([data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"], '
          '[data-testid="stBidiComponentIsolated"]:not(:is(.st-key-lesson-file, .st-key-lesson-keys, .st-key-lesson-link) *))')
NO_FIGURE = ("check", "lessons")  # the quiz has questions, the Lessons page a list of slides
# A page is drawn once the script is idle and every chart it started has its SVG.
DRAWN_JS = """([ready]) => document.querySelector(ready)
  && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('svg.main-svg'))
  && [...document.querySelectorAll('[data-testid="stGraphVizChart"]')].every(c => c.querySelector('svg'))"""

# Pages whose own controls and tables above the main figure still push it below a 720 px screen at first load: for
# these the figure has to fit once scrolled to its top. Every other page shows its main figure whole without a scroll.
SCROLLED: set[str] = set()

# The main figure's box, the header's and the viewport's; with scroll=true, after scrolling its top below the header.
FIT_JS = """([sel, scroll]) => {
  const fig = document.querySelector(sel);
  if (!fig) return null;
  const main = document.querySelector('[data-testid="stMain"]');
  const header = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
  if (scroll) main.scrollTop += fig.getBoundingClientRect().top - header;
  const b = fig.getBoundingClientRect();
  return {top: b.top, bottom: b.bottom, left: b.left, right: b.right, height: b.height, header,
          vw: window.innerWidth, vh: window.innerHeight};
}"""

# Text elements of widget labels and buttons under `root` whose text does not fit (Streamlit cuts it with an ellipsis).
CUT_JS = """([root]) => [...document.querySelectorAll(
    `${root} [data-testid="stWidgetLabel"] *, ${root} button *, ${root} [data-testid="stMetricLabel"] *`)]
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1 && e.textContent.trim())
  .map(e => `${e.textContent.trim().slice(0, 60)} (${e.scrollWidth} > ${e.clientWidth} px)`)"""

# Per chart: the tallest colour bar and the vertical extent of its heatmaps; the smallest tick label; how many pairs
# of numbers printed in heatmap cells overlap (cells narrower than their text); whether the title runs past the chart
# (right or top edge) or over its legend; which texts placed on the chart (annotations: a pair's map titles, the
# grid's head names) overprint each other; which level x tick labels do (checked where texts sit side by side; a
# slanted label's box is wider than its text).
CHARTS_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')].map(c => {
  const maps = [...c.querySelectorAll('.heatmaplayer image')].map(i => i.getBoundingClientRect());
  const bars = [...c.querySelectorAll('.colorbar .cbfills')].map(f => f.getBoundingClientRect().height);
  const sizes = sel => [...c.querySelectorAll(sel)].map(t => parseFloat(getComputedStyle(t).fontSize)).filter(x => x);
  const ticks = sizes('.xtick text, .ytick text');
  const keys = sizes('.legendtext, .colorbar text');  // legend entries and colour bar labels
  const title = c.querySelector('.gtitle'), svg = c.querySelector('svg.main-svg')?.getBoundingClientRect();
  const sub = c.querySelector('.gtitle-subtitle')?.getBoundingClientRect();
  const tb = c.querySelector('.gtitle')?.getBoundingClientRect();
  const t = tb && sub && sub.width ? {left: Math.min(tb.left, sub.left), right: Math.max(tb.right, sub.right),
                                      top: Math.min(tb.top, sub.top), bottom: Math.max(tb.bottom, sub.bottom)} : tb;
  const legend = c.querySelector('.legend')?.getBoundingClientRect();
  // [text, box] of the elements matching sel (and keep) that are drawn; pairs of them closer side to side than gap
  // px (gap -1: overlapping by more than a pixel) that also overlap in height.
  const boxes = (sel, keep = () => true, root = c) => [...root.querySelectorAll(sel)].filter(keep)
    .map(e => [e.textContent, e.getBoundingClientRect()]).filter(([, b]) => b.width);
  const clashes = (items, gap) => items.flatMap(([ta, a], i) => items.slice(i + 1)
    .filter(([, b]) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > -gap
                       && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1)
    .map(([tb]) => `${ta} / ${tb}`));
  const overprinted = clashes(boxes('.heatmap-label text'), -1).length;
  const notes = boxes('g.annotation-text-g');
  // the chart's title and subtitle join the texts placed on it: plot titles must stand clear of them too
  const notesOverlap = clashes([...notes, ...boxes('.gtitle, .gtitle-subtitle')], -1);
  // Level x tick labels only (a slanted label's box is wider than its text); closer than 3 px reads as one word.
  const level = t => !/rotate\\(-?[1-9]/.test(t.getAttribute('transform') || '');
  const ticksOverlap = clashes(boxes('.xaxislayer-above text', level), 3);
  // a colour bar's title and numbers, each bar on its own (a title on top touched the bar's "1" below it)
  const barOverlap = [...c.querySelectorAll('.colorbar')].flatMap(bar => clashes(boxes('text', undefined, bar), -1));
  // plotly sizes its legend's scrollbar only when the entries do not fit the legend's room
  const legendScrolls = [...c.querySelectorAll('.legend rect.scrollbar')].some(r => r.getBoundingClientRect().height > 0);
  return {title: title?.textContent ?? '', notes: notes.length, notesOverlap, ticksOverlap, legendScrolls, barOverlap,
          mapHeight: maps.length ? Math.max(...maps.map(m => m.bottom)) - Math.min(...maps.map(m => m.top)) : null,
          bar: bars.length ? Math.max(...bars) : null, smallestTick: ticks.length ? Math.min(...ticks) : null,
          smallestKey: keys.length ? Math.min(...keys) : null,
          overprinted, titleCut: !!t && !!svg && (t.right > svg.right + 1 || t.top < svg.top - 1),
          titleOnLegend: !!t && !!legend && legend.width > 0
                         && Math.min(t.right, legend.right) - Math.max(t.left, legend.left) > 1
                         && Math.min(t.bottom, legend.bottom) - Math.max(t.top, legend.top) > 1};
})"""


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    with streamlit_server(env=SERVER_ENV) as (url, proc):
        yield App(url, ServerLog(proc.stdout))



def screen(browser: Browser, size: tuple[int, int]) -> Iterator[Page]:
    """A new tab of this viewport size (new_tab: a fresh session, nothing kept in the browser), closed afterwards."""
    page = new_tab(browser, {"width": size[0], "height": size[1]})
    page.dialogs = []
    yield page
    close_tab(page)


@pytest.fixture(scope="module", params=VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def projector(request, app, browser) -> Iterator[Page]:
    yield from screen(browser, request.param)


@pytest.fixture(scope="module", params=WIDE, ids=[f"{w}x{h}" for w, h in WIDE])
def wide(request, app, browser) -> Iterator[Page]:
    yield from screen(browser, request.param)


def open_page(page: Page, app: App, path: str, present: bool = True) -> None:
    """Open a page (in presentation mode unless told) and wait until every chart on it is drawn."""
    page.goto(app.link(f"/{path}", {"present": "true"} if present else None))
    try:
        settle(page, timeout=LOAD_MS)
        page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
        settle(page, ms=400)
    except PlaywrightTimeout:
        raise AssertionError(f"/{path} never finished drawing: {describe(page, app)}") from None


def wait_for_figure(page: Page, app: App, selector: str, where: str) -> None:
    """Wait until the page's main figure is mounted and drawn: a chart or component may mount after its script run
    has ended (on a busy machine its code loads late), so a settled run is not yet a drawn page."""
    try:
        page.locator(selector).first.wait_for(timeout=LOAD_MS)
        page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
    except PlaywrightTimeout:
        raise AssertionError(f"{where}: no chart or diagram on the page: {describe(page, app)}") from None


def test_presentation_mode_toggles_the_sidebar_and_stays_reachable(projector, app):
    """Switching presentation off from the page folds the sidebar back out; the toggle there then reads off."""
    page = projector
    open_page(page, app, "")
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.get_attribute("data-collapsed") == "true", "presentation mode should fold the sidebar away"
    leave = page.get_by_role("button", name="Leave presentation")
    assert leave.is_visible() and leave.bounding_box()["y"] + leave.bounding_box()["height"] <= page.viewport_size["height"]
    h1 = page.locator(f"{MAIN} h1").first
    label = page.locator(f'{MAIN} [data-testid="stWidgetLabel"]').first
    assert h1.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= 2 * label.evaluate(
        "e => parseFloat(getComputedStyle(e).fontSize)"), "the title must stay a title"
    leave.click()
    page.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"]')?.dataset.collapsed === 'false'",
                           timeout=60_000)
    settle(page)
    assert "present" not in page.url and sidebar.get_by_text("Presentation mode").is_visible()
    assert not page.get_by_role("button", name="Leave presentation").count()


@pytest.mark.parametrize("path", PATHS, ids=[p or "heatmaps" for p in PATHS])
def test_every_page_fits_the_projector(projector, app, path):
    page, since = projector, len(app.log.lines)
    open_page(page, app, path)
    assert_clean(page, app, since)
    where = f"/{path} at {page.viewport_size}"
    assert page.locator('[data-testid="stSidebar"]').get_attribute("data-collapsed") == "true", where
    stray = page.locator(f"{MAIN} [data-testid='stMarkdownContainer'] p").filter(has_text=re.compile(r"^None$"))
    assert not stray.count(), f"{where}: a stray 'None' is printed"
    for chart in assert_whole(page, where):
        if chart["bar"] is not None and chart["mapHeight"] is not None:
            assert chart["bar"] <= chart["mapHeight"] + 1, f"{where}: colour bar taller than its map: {chart}"
        if chart["smallestTick"] is not None:
            assert chart["smallestTick"] >= MIN_PRESENT_FONT, f"{where}: tick labels below 14 px: {chart}"
        if chart["smallestKey"] is not None:
            assert chart["smallestKey"] >= MIN_PRESENT_FONT, f"{where}: legend or colour bar text below 14 px: {chart}"
    if path not in NO_FIGURE:
        wait_for_figure(page, app, FIGURE, where)
    if not page.locator(FIGURE).count():
        assert path in NO_FIGURE, f"{where}: no chart or diagram on the page"
        return
    scroll = path in SCROLLED
    box = page.evaluate(FIT_JS, [FIGURE, scroll])
    assert box["height"] <= box["vh"] - box["header"], f"{where}: the main figure is taller than the screen: {box}"
    assert box["top"] >= box["header"] - 1 and box["bottom"] <= box["vh"] + 1, (
        f"{where}: figure off screen{' once scrolled to' if scroll else ' at first load'}: {box}")
    assert box["left"] >= 0 and box["right"] <= box["vw"], f"{where}: figure wider than the screen: {box}"


# Charts with texts placed side by side (a pair's two map titles, the deletion test's two plot titles) where they
# are narrowest: a phone (a pair keeps ui.PAIR_MIN_PX and scrolls sideways), a 1024 px projector with the sidebar
# unfolded again, a 1024 px laptop with the sidebar open, the deletion test on a 1280 x 720 projector (its plot
# titles below the subtitle). Per screen: (page, query, presenting).
PAIRS = {(420, 900): [("side-by-side", {}, False), ("knockout", {"ablate": "3.1"}, False)],
         (1024, 768): [("side-by-side", {}, True), ("knockout", {"ablate": "3.1"}, True), ("why-similar", {}, False)],
         (1280, 720): [("why-similar", {}, True)]}
CURVES = "Compute the deletion and insertion curves"


@pytest.mark.parametrize("size", list(PAIRS), ids=[f"{w}x{h}" for w, h in PAIRS])
def test_texts_side_by_side_on_a_chart_never_overprint_where_it_is_narrowest(browser, app, size):
    with contextmanager(screen)(browser, size) as page:
        for path, query, present in PAIRS[size]:
            since, where = len(app.log.lines), f"/{path} {query} at {size}{', presenting' * present}, sidebar open"
            page.goto(app.link(f"/{path}", query | ({"present": "true"} if present else {})))
            settle(page, timeout=LOAD_MS)
            unfold = page.locator('[data-testid="stExpandSidebarButton"]')
            if size[0] > 640 and unfold.is_visible():  # presenting folds it; the browser remembers it unfolded
                unfold.click()
            if size[0] > 640:
                expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "false")
            compute = page.locator(f'{MAIN} [data-testid="stButton"] button').filter(has_text=CURVES)
            if compute.count():  # computed once for the server when asked, then kept
                compute.first.click()
                page.wait_for_function(f"() => ({EVERY_CHART_JS})().some(c => c.title.startsWith('Which ranking'))",
                                       timeout=LOAD_MS, polling=200)
            wait_for_figure(page, app, f'{MAIN} [data-testid="stPlotlyChart"] svg.main-svg', where)
            settle(page, ms=400)
            charts = assert_whole(page, where)
            assert any(chart["notes"] >= 2 for chart in charts), f"{where}: no chart with two titles side by side: {charts}"
            for chart in charts:  # nor two plots' x tick labels where they meet
                assert not chart["ticksOverlap"], f"{where}: x tick labels overprint each other: {chart}"
                assert not chart["legendScrolls"], f"{where}: the legend scrolls (entries hidden): {chart}"
            assert_clean(page, app, since)


# Why similar's token strip: the width of its cells (the map's drawn width over the cells per line) and of every
# token printed in them.
STRIP_JS = """(perLine) => {
  const c = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .find(c => (c.querySelector('.gtitle')?.textContent ?? '').includes(' toward '));
  const map = c?.querySelector('.heatmaplayer image');
  if (!map) return null;
  return {cell: map.getBoundingClientRect().width / perLine, texts: [...c.querySelectorAll('.heatmaplayer text')]
    .filter(t => t.textContent).map(t => [t.textContent, t.getBoundingClientRect().width])};
}"""


def open_narrow(page: Page, app: App, path: str, size: tuple[int, int], present: bool | None = None) -> None:
    """Open `path` on a narrow column: above 640 px wide presenting with the sidebar unfolded again (~540 px at
    1024), else as a phone; present=False: not presenting (at 1024 px the sidebar is open from the start)."""
    present = size[0] > 640 if present is None else present
    page.goto(app.link(path, {"present": "true"} if present else None))
    settle(page, timeout=LOAD_MS)
    if present:
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "false")


@pytest.mark.parametrize("size", [(420, 900), (1024, 768)], ids=["420x900", "1024x768-presenting-sidebar"])
def test_every_token_of_the_attribution_strip_fits_its_cell(browser, app, size):
    """At 420 px "animal", "street" and "because" ran over their cells' edges into the next (1024 px presenting with
    the sidebar unfolded too): the strip now keeps the width its tokens need and scrolls sideways below it."""
    with contextmanager(screen)(browser, size) as page:
        since = len(app.log.lines)
        open_narrow(page, app, "/why-similar", size)
        page.wait_for_function(f"() => !!({STRIP_JS})(8)", timeout=LOAD_MS, polling=200)
        settle(page, ms=400)
        strip = page.evaluate(STRIP_JS, 8)
        assert len(strip["texts"]) == 32, strip  # two sentences of 16 tokens, each printed in its cell
        wide = [(t, round(w)) for t, w in strip["texts"] if w > strip["cell"] - 3]  # 3: the gap between cells
        assert not wide, f"tokens wider than their {strip['cell']:.0f} px cells at {size}: {wide}"
        assert_clean(page, app, since)


# Inside a head's three charts (ui/panels.js, drawn on canvas): where each text landed (its kind, text and box, a
# printed number with its cell's width), the canvas's box, and the box of the area it scrolls in.
HEAD_FIGURES_JS = """() => [...document.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
  .map(e => e.shadowRoot?.querySelector('.pn')).filter(r => r && r.dataset.draws).map(r => {
    const c = r.querySelector('canvas').getBoundingClientRect();
    return {name: r.dataset.name, drawn: r.drawn, size: [c.width, c.height]};
  })"""


@pytest.mark.parametrize("size", [(420, 900), (1024, 768)], ids=["420x900", "1024x768-presenting-sidebar"])
def test_inside_a_heads_numbers_fit_their_cells_and_no_title_is_cut(browser, app, size):
    """Presenting at 1024 px with the sidebar unfolded (a ~540 px column) the q·k column printed "31.229" in 46 px
    cells, its panel titles ran into one another ("q·k÷ √32softmax"), and Concat's title ran 40 px past the figure's
    left and right edges; at 420 px all three too. Each chart now keeps the width its numbers and titles need (and
    scrolls sideways below it), and wraps its title and subtitle to that width."""
    with contextmanager(screen)(browser, size) as page:
        since = len(app.log.lines)
        open_narrow(page, app, "/inside-a-head", size)
        page.wait_for_function(f"() => ({HEAD_FIGURES_JS})().length === 3", timeout=LOAD_MS, polling=200)
        settle(page, ms=400)
        figures = page.evaluate(HEAD_FIGURES_JS)
        printed = [d for f in figures for d in f["drawn"] if d["kind"] == "cell"]
        assert len(printed) == 3 * 16 + 16, figures  # q·k, ÷ √d_k and softmax of 16 tokens, then a_ij
        for f in figures:
            wide = [(d["text"], round(d["right"] - d["left"]), round(d["cell"])) for d in f["drawn"]
                    if d["kind"] == "cell" and d["right"] - d["left"] > d["cell"] - 4]
            assert not wide, f"{f['name']}: numbers wider than their cells at {size}: {wide}"
            notes = [d for d in f["drawn"] if d["kind"] == "note"]
            crossed = [(a["text"], b["text"]) for a, b in itertools.combinations(notes, 2)
                       if a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"]
                       and b["top"] < a["bottom"]]
            assert not crossed, f"{f['name']}: panel titles over one another at {size}: {crossed}"
            width, height = f["size"]
            out = [d["text"] for d in f["drawn"] if d["left"] < 0 or d["right"] > width or d["top"] < 0
                   or d["bottom"] > height]
            assert not out, f"{f['name']}: texts past the chart's edges at {size}: {out}"
            small = {(d["text"], d["px"]) for d in f["drawn"] if d["px"] < (MIN_PRESENT_FONT if size[0] > 640 else 13)}
            assert not small, f"{f['name']}: texts smaller than the back row reads at {size}: {sorted(small)[:5]}"
        assert_clean(page, app, since)


# Titles and subtitles as the figures write them: prose, symbols, capitals, digits, a user's sentence.
PROSE = ["Layer 3, head 1. Each key's score is q_i·k_j; dividing by √d_k keeps the softmax from saturating; the "
         "softmax turns the scores into weights that sum to 1.",
         "How “[CLS]” decides where to look", "Concatenate the heads, then W_O", "Post-LN vs Pre-LN: WHERE THE NORM SITS",
         "“The animal didn't cross the street because it was too tired.” · training mode: dropout on",
         "Mean |x| by layer (0–5) × 384 features — 12 heads, d_k = 32, 22.7 M parameters",
         "Wide words: 注意力机制 and ＭＭＭ count a full em"]
TEXT_WIDTHS_JS = """([texts, fonts]) => {
  const c = document.createElement('canvas').getContext('2d');
  return fonts.map(font => { c.font = '20px ' + font; return texts.map(t => c.measureText(t).width); });
}"""


def test_prose_widths_hold_in_the_figures_font_and_its_fallback(browser):
    """Titles and subtitles are broken into lines by prose_px's estimate. Drawn in Chromium, no line is wider than
    that estimate in the figures' font nor in DejaVu Sans (the fallback where Helvetica, Arial and Liberation Sans
    are all missing, 13 % wider), and the estimate leaves at most a quarter of the line empty in the figures' font:
    text_px's 0.62 em a character left 40 %, so a subtitle took four lines where three would do."""
    page = browser.new_page()
    try:
        ours, fallback = page.evaluate(TEXT_WIDTHS_JS, [PROSE, [FONT, "'DejaVu Sans'"]])
    finally:
        page.close()
    for text, a, b in zip(PROSE, ours, fallback, strict=True):
        estimate = prose_px(text, 20)
        assert a <= estimate and b <= estimate, f"{text!r}: {a:.0f} / {b:.0f} px drawn, {estimate:.0f} estimated"
        assert estimate <= 1.25 * a, f"{text!r}: {estimate:.0f} px estimated for {a:.0f} drawn in {FONT}"


# Chart titles, subtitles and axis titles that run past their chart's box, either side; null while a chart is not
# drawn at its container's width yet (plotly redraws after the sidebar unfolds).
TITLES_PAST_JS = """() => {
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  const boxes = charts.map(c => [c, c.getBoundingClientRect(), c.querySelector('svg.main-svg')?.getBoundingClientRect()]);
  if (!charts.length || boxes.some(([, r, svg]) => !svg || Math.abs(svg.width - r.width) > 1)) return null;
  return boxes.flatMap(([c, r]) => [...c.querySelectorAll('.gtitle, .gtitle-subtitle, .g-xtitle, .g-ytitle')]
    .map(t => [t.textContent.slice(0, 60), t.getBoundingClientRect()])
    .filter(([, b]) => b.width && (b.right > r.right + 1 || b.left < r.left - 1))
    .map(([t, b]) => `${t}: ${Math.round(r.left - b.left)} px past the left, ${Math.round(b.right - r.right)} the right`));
}"""


@pytest.mark.parametrize(("path", "present"), [("word-order", True), ("trajectories", True), ("why-similar", True),
                                               ("statistics", False)], ids=["word-order", "trajectories", "why-similar",
                                                                            "statistics-not-presenting"])
def test_chart_titles_stay_inside_their_charts_with_the_sidebar_open_at_1024(browser, app, path, present):
    """Presenting at 1024 px with the sidebar unfolded again, the shuffle chart's title ran 97 px past its chart's
    right edge, Why similar's bar charts' 34 px and "How similar 'it' is …" 11 px; statistics' x-axis title ran 11 px
    past at 1024 px not presenting. They are now wrapped (or shorter)."""
    with contextmanager(screen)(browser, (1024, 768)) as page:
        since = len(app.log.lines)
        open_narrow(page, app, f"/{path}", (1024, 768), present)
        page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
        settle(page, ms=400)
        page.wait_for_function(f"() => ({TITLES_PAST_JS})() !== null", timeout=LOAD_MS, polling=200)
        past = page.evaluate(TITLES_PAST_JS)
        assert past == [], f"/{path}: titles past their charts: {past}"
        assert_clean(page, app, since)


# Buttons with text (a segmented control's options too) that run past the main column's content box, either side.
PAST_EDGE_JS = """() => {
  const box = document.querySelector('[data-testid="stMainBlockContainer"]');
  const r = box.getBoundingClientRect(), css = getComputedStyle(box);
  const [left, right] = [r.left + parseFloat(css.paddingLeft), r.right - parseFloat(css.paddingRight)];
  return [...document.querySelectorAll('[data-testid="stMain"] button')].filter(b => b.innerText.trim())
    .map(b => [b.innerText.trim().slice(0, 40), b.getBoundingClientRect()]).filter(([, b]) => b.width)
    .filter(([, b]) => b.right > right + 1 || b.left < left - 1)
    .map(([t, b]) => `${t}: ${Math.round(b.left)}-${Math.round(b.right)} px, column ${Math.round(left)}-${Math.round(right)}`);
}"""


@pytest.mark.parametrize(("path", "query"), [("embeddings", {}), ("knockout", {"ablate": "3.1"})])
def test_the_pooling_stays_inside_the_column_presenting_with_the_sidebar_unfolded(browser, app, path, query):
    """Presenting at 1024 px with the sidebar unfolded again the main column is ~540 px: the pooling's "[CLS] vector"
    ran past its right edge on both pages (Sentence embeddings: beside the sentences' popover in two fifths of it;
    Knock out heads: in a quarter column beside the second sentence)."""
    with contextmanager(screen)(browser, (1024, 768)) as page:
        since = len(app.log.lines)
        page.goto(app.link(f"/{path}", query | {"present": "true"}))
        settle(page, timeout=LOAD_MS)
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "false")
        pool = page.locator(f'{MAIN} [data-testid="stButtonGroup"] button').filter(has_text="[CLS] vector")
        expect(pool).to_be_visible(timeout=LOAD_MS)
        settle(page, ms=400)
        assert not page.evaluate(PAST_EDGE_JS), f"/{path}: buttons past the column's edge"
        assert_clean(page, app, since)


# The attention map's controls (in its shadow root) and its map, against the main column's content box; the metrics'
# values cut with an ellipsis.
MAP_CONTROLS_JS = """() => {
  const box = document.querySelector('[data-testid="stMainBlockContainer"]');
  const r = box.getBoundingClientRect(), right = r.right - parseFloat(getComputedStyle(box).paddingRight);
  const hm = document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm');
  if (!hm || !hm.querySelector('canvas.hm-map')?.width) return null;
  const past = [...hm.querySelectorAll('button, select')].map(b => [b.textContent.trim(), b.getBoundingClientRect()])
    .filter(([, b]) => b.width && b.right > right + 1).map(([t, b]) => `${t}: ${Math.round(b.right)} > ${Math.round(right)}`);
  return {past, side: hm.querySelector('canvas.hm-map').getBoundingClientRect().width, beside: hm.classList.contains('beside')};
}"""
CUT_VALUES_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMetricValue"] *')]
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim())"""


def test_the_attention_map_and_the_cost_fit_a_projector_with_the_sidebar_unfolded(browser, app):
    """Presenting at 1024 px with the sidebar unfolded again (a ~540 px column): the attention map's controls stood
    beside a 160 px map and ran past the column's right edge, and Data flow cut "22.57 M" to "22…". The map now puts
    its controls above the picture where the column is narrow; the cost's numbers wrap, each whole."""
    with contextmanager(screen)(browser, (1024, 768)) as page:
        since = len(app.log.lines)
        for path in ("", "diagram"):
            page.goto(app.link(f"/{path}", {"present": "true"}))
            settle(page, timeout=LOAD_MS)
            unfold = page.locator('[data-testid="stExpandSidebarButton"]')
            if unfold.is_visible():  # the browser remembers it unfolded
                unfold.click()
            expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "false")
            settle(page, ms=400)
            if path == "diagram":
                expect(page.locator(f'{MAIN} [data-testid="stMetricValue"]')).to_have_count(3, timeout=LOAD_MS)
                assert not page.evaluate(CUT_VALUES_JS), "Data flow: metric values cut"
                assert not page.evaluate(PAST_EDGE_JS), "Data flow: buttons past the column's edge"
                continue
            page.wait_for_function(f"() => !!({MAP_CONTROLS_JS})()", timeout=LOAD_MS, polling=200)
            page.wait_for_function(f"() => ({MAP_CONTROLS_JS})().beside === false", timeout=LOAD_MS, polling=200)
            m = page.evaluate(MAP_CONTROLS_JS)
            assert not m["past"] and m["side"] >= 250, f"Attention: {m}"
        assert_clean(page, app, since)


def assert_whole(page: Page, where: str) -> list[dict]:
    """No widget label or button text is cut, no two heatmap cell numbers overprint, and no chart title runs past its
    chart; returns CHARTS_JS's measures of every chart."""
    cut = page.evaluate(CUT_JS, [MAIN])
    assert not cut, f"{where}: labels or buttons cut off: {cut}"
    charts = page.evaluate(CHARTS_JS)
    for chart in charts:
        assert not chart["overprinted"], f"{where}: numbers in heatmap cells overprint each other: {chart}"
        assert not chart["titleCut"], f"{where}: a chart title runs past its chart: {chart}"
        assert not chart["titleOnLegend"], f"{where}: a chart title is drawn over its legend: {chart}"
        assert not chart["notesOverlap"], f"{where}: texts placed on a chart overprint each other: {chart}"
        assert not chart["barOverlap"], f"{where}: a colour bar's texts overprint each other: {chart}"
    return charts


@pytest.mark.parametrize("path", PATHS, ids=[p or "heatmaps" for p in PATHS])
def test_labels_and_titles_are_whole_on_laptop_and_desktop_screens(wide, app, path):
    """Other widths give Streamlit's columns other widths than the projector's: nothing may be cut there either."""
    page, since = wide, len(app.log.lines)
    open_page(page, app, path, present=False)
    assert_clean(page, app, since)
    assert_whole(page, f"/{path} at {page.viewport_size}")


# Controls that presentation mode folds into a popover on a page: (path, query, the popover's button, a box inside).
FOLDED = [("embeddings", {}, re.compile(r"\d+ sentences · example sets"), "More sentences, one per line"),
          ("side-by-side", {"compare": "sentences"}, "Second sentence", "Second sentence")]


@pytest.mark.parametrize(("path", "query", "button", "box"), FOLDED, ids=[f[0] for f in FOLDED])
def test_controls_folded_into_a_popover_are_whole_when_opened(projector, app, path, query, button, box):
    page = projector
    page.goto(app.link(f"/{path}", {"present": "true"} | query))
    settle(page, timeout=LOAD_MS)
    where = f"/{path} {query} at {page.viewport_size}"
    wait_for_figure(page, app, FIGURE, where)
    assert_whole(page, where)  # a view no other test here draws (Compare's two sentences)
    page.locator(f'{MAIN} [data-testid="stPopover"] button').filter(has_text=button).click()
    expect(page.get_by_role("textbox", name=box, exact=True)).to_be_visible()  # mounted after the click
    cut = page.evaluate(CUT_JS, ["body"])  # the popover's body is drawn outside the main area
    assert not cut, f"/{path} at {page.viewport_size}, popover open: labels or buttons cut off: {cut}"


def test_the_folded_sentence_box_shows_user_text_as_typed(projector, app):
    """Presentation mode folds the sentence box into a popover labelled with the sentence's first words: Markdown
    and HTML in them stay text."""
    page, text = projector, "**a** _b_ <i>c</i> [d](e) and more words"
    page.goto(app.link("/", {"present": "true", "text": text}))
    settle(page, timeout=LOAD_MS)
    button = page.locator(f'{MAIN} [data-testid="stPopover"] button').first
    assert "**a** _b_ <i>c</i> [d](e) …" in button.inner_text()
    assert not button.locator("strong, em, i, a").count(), "user text in the label became markup"
    button.click()
    expect(page.get_by_label("Sentence")).to_have_value(text)  # the popover mounts its box after the click


# Token trajectories: each path's labels (annotations) and what the axes span against what the points span.
TRAJECTORY_CHART = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
  .find(g => (g.querySelector('.gtitle')?.textContent ?? '').startsWith('Token trajectories'))"""
# Plotly draws the title, then the points, then the annotations: the chart is read once its labels are there.
TRAJECTORY_DRAWN = f"""() => {{ const gd = ({TRAJECTORY_CHART})();
  return !!(gd && gd.calcdata && gd.querySelectorAll('.annotation-text-g').length); }}"""
TRAJECTORY_JS = f"""() => {{
  const gd = ({TRAJECTORY_CHART})();
  const span = (k) => {{ const v = gd.calcdata.flatMap(trace => trace.map(p => p[k])).filter(Number.isFinite);
                        return [Math.min(...v), Math.max(...v)]; }};  // every point plotly drew
  return {{labels: [...gd.querySelectorAll('.annotation-text-g')].map(a => {{
            const b = a.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, a.textContent]; }}),
          x: gd._fullLayout.xaxis.range, y: gd._fullLayout.yaxis.range, xs: span('x'), ys: span('y'),
          plot: [gd._fullLayout.xaxis._length, gd._fullLayout.yaxis._length],
          bottom: gd.getBoundingClientRect().bottom, vh: innerHeight,
          fonts: [...gd.querySelectorAll('.annotation-text')].map(t => parseFloat(getComputedStyle(t).fontSize))}};
}}"""


def test_trajectory_labels_never_overlap_and_the_axes_span_the_points(projector, app):
    """Issue 23: "emb" printed over "animal (L5)", and an x axis from -25 to 20 for points from -10 to 5. Then the
    plot was 280 x 230 px at 1280 x 720 (one unit as long on both axes in a 420 px figure below the sentence): the
    sentence is now the presentation bar's, and the figure, whole on the first screen, gives the plot 320 px or more."""
    page, since = projector, len(app.log.lines)
    open_page(page, app, "trajectories")
    wait_for_figure(page, app, FIGURE, "Token trajectories")  # a chart may mount after its run has ended
    try:
        page.wait_for_function(TRAJECTORY_DRAWN, timeout=LOAD_MS, polling=200)
    except PlaywrightTimeout:
        raise AssertionError(f"the Token trajectories chart was never drawn: {describe(page, app)}") from None
    t = page.evaluate(TRAJECTORY_JS)
    names = [b[4] for b in t["labels"]]
    assert {"it (L5)", "animal (L5)", "street (L5)"} <= set(names), names  # the highlighted paths are named
    assert "emb" in names, names  # and where one starts
    assert min(t["plot"]) >= 320 and t["bottom"] <= t["vh"] + 1, f"at {page.viewport_size}: plot {t['plot']} px, " \
        f"the figure's bottom at {t['bottom']} px"
    for a, b in itertools.combinations(t["labels"], 2):
        overlap = min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5
        assert not overlap, f"{a[4]!r} overprints {b[4]!r} at {page.viewport_size}: {a[:4]} {b[:4]}"
    for axis, values in (("x", "xs"), ("y", "ys")):
        (lo, hi), (vlo, vhi) = t[axis], t[values]
        assert lo <= vlo and hi >= vhi and hi - lo <= 1.2 * (vhi - vlo), f"{axis} spans {t[axis]}, points {t[values]}"
    assert min(t["fonts"]) >= MIN_PRESENT_FONT, t["fonts"]
    assert_clean(page, app, since)


@pytest.mark.parametrize("view", ["layer", "model"])
def test_the_attention_maps_grid_and_model_view_fit_the_projector(projector, app, view):
    """The model view was 610 px tall, its bottom at 856 px on a 720 px screen; now every thumbnail is on screen."""
    page, since = projector, len(app.log.lines)
    page.goto(app.link("/", {"present": "true", "view": view}))
    settle(page, timeout=LOAD_MS)
    page.wait_for_function("""() => { const r = document.querySelector('[data-testid="stBidiComponentIsolated"]')
      ?.shadowRoot?.querySelector('.hm'); return r && r.dataset.thumbs && !r.classList.contains('loading'); }""",
                           timeout=LOAD_MS)
    box = page.evaluate("""() => { const r = document.querySelector('[data-testid="stBidiComponentIsolated"]')
      .shadowRoot.querySelector('.hm');
      const b = r.querySelector('.hm-grid').getBoundingClientRect();
      const header = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
      const fonts = [...r.querySelectorAll('.hm-grid .hm-tick')].map(e => parseFloat(getComputedStyle(e).fontSize));
      return {top: b.top, bottom: b.bottom, left: b.left, right: b.right, header, thumbs: +r.dataset.thumbs, fonts,
              vw: innerWidth, vh: innerHeight}; }""")
    assert box["thumbs"] == (12 if view == "layer" else 72), box
    assert box["top"] >= box["header"] - 1 and box["bottom"] <= box["vh"] and box["right"] <= box["vw"], box
    assert min(box["fonts"]) >= MIN_PRESENT_FONT, box["fonts"]
    assert_clean(page, app, since)


# ------------------------------------------------------------------- the measures' figures (issues 19 and 27)
# Every chart of a page, each scrolled to the top of the screen in turn: its box, and the smallest text drawn in it
# (ticks, legend, titles, annotations, colour bar, cell labels).
EVERY_CHART_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const header = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
  return [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].map(c => {
    main.scrollTop += c.getBoundingClientRect().top - header;
    const b = c.getBoundingClientRect();
    const sizes = [...c.querySelectorAll('svg text')].filter(t => t.getBoundingClientRect().width > 0
      && t.textContent.trim()).map(t => parseFloat(getComputedStyle(t).fontSize));
    return {title: c.querySelector('.gtitle')?.textContent ?? '', top: b.top, bottom: b.bottom, left: b.left,
            right: b.right, header, vw: window.innerWidth, vh: window.innerHeight,
            smallest: sizes.length ? Math.min(...sizes) : null};
  });
}"""
# Every token map of a page (a plotly heatmap over the tokens), each scrolled to the top of the screen in turn (unless
# told to stay): its title, subtitle, box, query (y) labels, their sizes and vertical extents (top, bottom), and
# the key (x) labels plotly chose for the width it has.
TOKEN_MAPS_JS = """(stay) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const header = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
  return [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(c => c.querySelector('.heatmaplayer image'))
    .map(c => {
      if (!stay) main.scrollTop += c.getBoundingClientRect().top - header;
      const b = c.getBoundingClientRect();
      const texts = sel => [...c.querySelectorAll(sel)].filter(t => t.getBoundingClientRect().width > 0);
      const rows = texts('.yaxislayer-above .ytick text');
      return {title: c.querySelector('.gtitle')?.textContent ?? '', top: b.top, bottom: b.bottom, header,
              subtitle: c.querySelector('.gtitle-subtitle')?.textContent ?? '',
              vh: window.innerHeight, rows: rows.map(t => t.textContent),
              rowBoxes: rows.map(t => { const r = t.getBoundingClientRect(); return [r.top, r.bottom]; }),
              fonts: texts('.ytick text, .xtick text').map(t => parseFloat(getComputedStyle(t).fontSize)),
              keys: texts('.xaxislayer-above .xtick text').map(t => t.textContent),
              keys2: texts('.xaxislayer-above .x2tick text').map(t => t.textContent)};  // a pair's second map
    });
}"""
# The token maps below a page's first screen, by the start of their titles (the Compare page's pair is its main
# figure: whole on the first screen, and test_every_page_fits_the_projector checks it).
BELOW_FIRST_SCREEN = {"knockout": ("Attention, layer", "Knocked out minus intact"), "side-by-side": ("Post-LN − Pre-LN",),
                      "wordpieces": ("Token embeddings: cosine",)}
DEFAULT_LABELS = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "too",
                  "tired", ".", "[SEP]"]


@pytest.mark.parametrize("path", list(BELOW_FIRST_SCREEN))
def test_maps_below_the_first_screen_name_every_token_of_the_default_sentence(projector, app, path):
    """Issue 23: on a projector the pair of Knock out heads named every third row of the 16-token sentence, the
    difference maps and the embeddings' similarity every second. Now each names every row at 14 px or more and is
    whole once scrolled to; the key labels plotly keeps for the width are tokens (every k-th), never "the (7)"."""
    page, since = projector, len(app.log.lines)
    page.goto(app.link(f"/{path}", {"present": "true"} | ({"ablate": "3.1"} if path == "knockout" else {})))
    settle(page, timeout=LOAD_MS)
    page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
    titles = BELOW_FIRST_SCREEN[path]  # a chart may mount after its run has ended: wait for its heatmap
    page.wait_for_function("""(titles) => titles.every(t => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
      .some(c => (c.querySelector('.gtitle')?.textContent ?? '').startsWith(t) && c.querySelector('.heatmaplayer image')))""",
                           arg=list(titles), timeout=LOAD_MS, polling=200)
    maps = {m["title"]: m for m in page.evaluate(TOKEN_MAPS_JS)}
    for start in titles:
        where = f"/{path} {start!r} at {page.viewport_size}"
        (m,) = [m for title, m in maps.items() if title.startswith(start)] or [None]
        assert m is not None, f"{where}: not drawn; the maps are {list(maps)}"
        assert m["rows"] == DEFAULT_LABELS, f"{where}: rows named {m['rows']}"
        assert min(m["fonts"]) >= MIN_PRESENT_FONT, f"{where}: labels below 14 px: {m['fonts']}"
        assert m["top"] >= m["header"] - 1 and m["bottom"] <= m["vh"] + 1, f"{where}: not whole once scrolled: {m}"
        step = DEFAULT_LABELS.index(m["keys"][1]) if len(m["keys"]) > 1 else len(DEFAULT_LABELS)
        assert m["keys"] == DEFAULT_LABELS[::step], f"{where}: keys named {m['keys']}"
    assert_clean(page, app, since)


def open_compare(page: Page, app: App, query: dict, maps: int) -> list[dict]:
    """Open Compare presenting with `query`, wait for its first `maps` token maps, and measure them where they are
    at first load (TOKEN_MAPS_JS, no scrolling)."""
    page.goto(app.link("/side-by-side", {"present": "true"} | query))
    settle(page, timeout=LOAD_MS)
    page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
    page.wait_for_function("(n) => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .heatmaplayer image')"
                           ".length >= n", arg=maps, timeout=LOAD_MS, polling=200)
    return page.evaluate(TOKEN_MAPS_JS, True)


def test_the_compare_pair_names_every_row_whole_on_the_first_screen(projector, app):
    """Issue 23: Compare's pair, its page's main figure, named every third row of the 16-token sentence on a 720 px
    projector (420 px for the title, the sentence, two map titles and the key labels). It now leaves the sentence
    to the presentation bar and names every row at 14 px, no two labels touching, and stays whole at first load.
    At 1024 px it also named every other key; now its colour bar's margin is what the bar takes (155 px, was 184)
    and key labels turn upright where slanted ones would touch: every key of both maps is named."""
    page, since = projector, len(app.log.lines)
    m = open_compare(page, app, {}, 1)[0]
    where = f"/side-by-side at {page.viewport_size}"
    assert m["title"].startswith("Attention, layer"), f"{where}: the first map is {m['title']!r}"
    assert m["rows"] == DEFAULT_LABELS, f"{where}: rows named {m['rows']}"
    assert m["keys"] == m["keys2"] == DEFAULT_LABELS, f"{where}: keys named {m['keys']} and {m['keys2']}"
    assert min(m["fonts"]) >= MIN_PRESENT_FONT, f"{where}: labels below 14 px: {m['fonts']}"
    boxes = sorted(m["rowBoxes"])
    touching = [(a, b) for a, b in itertools.pairwise(boxes) if b[0] < a[1] - 0.5]
    assert not touching, f"{where}: row labels overprint: {touching}"
    assert m["top"] >= m["header"] - 1 and m["bottom"] <= m["vh"] + 1, f"{where}: not whole at first load: {m}"
    assert_clean(page, app, since)


def test_compares_two_models_are_whole_on_the_first_screen(projector, app):
    """Compare's two models: under the second model's choice and each model's Layer and Head, the two maps ran ~50
    px past the bottom of a 720 px projector. On a projector those controls' labels fold away (each map's title and
    subtitle just below name its model, layer and head), and both maps are whole at first load, each naming all 16
    rows of the default sentence."""
    page, since = projector, len(app.log.lines)
    maps = open_compare(page, app, {"compare": "models"}, 2)
    where = f"/side-by-side?compare=models at {page.viewport_size}"
    assert len(maps) == 2 and all(re.fullmatch(r"layer \d+, head \d+ · \d+ \S+ tokens", m["subtitle"]) for m in maps), (
        f"{where}: each map names its layer and head: {[m['subtitle'] for m in maps]}")
    # The second model's box, 120 px beside its Layer and Head, names it whole: presenting, in a word.
    box = page.evaluate("""() => { const i = document.querySelector('.st-key-w-model_b input');
      return i && {value: i.value, scroll: i.scrollWidth, width: i.clientWidth}; }""")
    assert box and box["value"] == "Custom" and box["scroll"] <= box["width"], f"{where}: the second model's box: {box}"
    for m in maps:
        assert m["top"] >= m["header"] - 1 and m["bottom"] <= m["vh"] + 1, f"{where}: not whole at first load: {m}"
        assert min(m["fonts"]) >= MIN_PRESENT_FONT, f"{where}: labels below 14 px: {m['fonts']}"
        # Every row named (they named every second): the scale beside the Compare choice and the second model's
        # choice beside its Layer and Head free the row this takes.
        assert m["rows"] == DEFAULT_LABELS, f"{where}: rows named {m['rows']}"
        boxes = sorted(m["rowBoxes"])
        touching = [(a, b) for a, b in itertools.pairwise(boxes) if b[0] < a[1] - 0.5]
        assert not touching, f"{where}: row labels overprint: {touching}"
    assert_clean(page, app, since)


MEASURE_VIEWS = [("why-similar", {}), ("why-similar", {"target": "token", "token": "9"}),
                 ("inside-a-head", {"measure": "value"}), ("inside-a-head", {"measure": "alti"})]


@pytest.mark.parametrize(("path", "params"), MEASURE_VIEWS, ids=["why-similar", "why-token", "head-value", "head-alti"])
def test_every_figure_of_the_measures_is_whole_on_the_projector(projector, app, path, params):
    page, since = projector, len(app.log.lines)
    page.goto(app.link(f"/{path}", {"present": "true"} | params))
    settle(page, timeout=LOAD_MS)
    page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
    where = f"/{path}?{params} at {page.viewport_size}"
    # The deletion test's chart and the ranking's too (each computed once for the server when asked, then kept).
    for label, title in (("Compute the deletion and insertion curves", "Which ranking predicts"),
                         ("Rank the measures", "Mean deletion AOPC")):
        button = page.locator(f'{MAIN} [data-testid="stButton"] button').filter(has_text=label)
        if path == "why-similar":  # after its attributions (slow on a slow machine): the button, or its chart kept
            page.wait_for_function(f"""() => [...document.querySelectorAll('{MAIN} [data-testid="stButton"] button')]
                .some(b => b.textContent.includes({label!r})) ||
                ({EVERY_CHART_JS})().some(c => c.title.startsWith({title!r}))""", timeout=LOAD_MS, polling=200)
        if button.count():
            button.first.click()  # a button with help= holds a second <button> for its tooltip
            # Its chart, then quiet: on a busy machine the run may start after a short settle would have ended.
            page.wait_for_function(f"() => ({EVERY_CHART_JS})().some(c => c.title.startsWith({title!r}))",
                                   timeout=LOAD_MS, polling=200)
            settle(page, timeout=LOAD_MS)
    if path == "why-similar":  # the tokens, the bars, the deletion test and the ranking, each drawn
        page.wait_for_function(f"() => document.querySelectorAll('{MAIN} [data-testid=\"stPlotlyChart\"] "
                               "svg.main-svg').length >= 4", timeout=LOAD_MS, polling=200)
        page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
    assert_clean(page, app, since)
    assert_whole(page, where)
    if path == "inside-a-head":  # the head view with the measure's lines, whole at first load
        wait_for_figure(page, app, FIGURE, where)
        page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollTop = 0")
        box = page.evaluate(FIT_JS, [FIGURE, False])
        assert box["top"] >= box["header"] - 1 and box["bottom"] <= box["vh"] + 1, f"{where}: {box}"
        return
    charts = page.evaluate(EVERY_CHART_JS)
    titles = [c["title"] for c in charts]
    assert len(charts) >= 4 and any(t.startswith("Mean deletion AOPC") for t in titles), titles
    for chart in charts:
        assert chart["bottom"] - chart["top"] <= chart["vh"] - chart["header"], f"{where}: taller than the screen: {chart}"
        assert chart["left"] >= 0 and chart["right"] <= chart["vw"], f"{where}: wider than the screen: {chart}"
        assert chart["smallest"] >= MIN_PRESENT_FONT, f"{where}: text below 14 px: {chart}"


# ------------------------------------------------------------------------------------------------ lessons
# The main figure of a slide: the first figure of the page, the lesson bar's own key component aside.
SLIDE_FIGURE = ", ".join(f"{MAIN} [data-testid='{kind}']:not(.st-key-lesson-bar *)"
                         for kind in ("stPlotlyChart", "stGraphVizChart", "stBidiComponentIsolated"))
BAR = ".st-key-lesson-bar"
# The bar's box, and the slide title's: the bar stays inside the header band, above the title.
BAR_JS = """() => {
  const bar = document.querySelector('.st-key-lesson-bar').getBoundingClientRect();
  const title = document.querySelector('.st-key-lesson-title h1').getBoundingClientRect();
  const header = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
  const sizes = [...document.querySelectorAll('.st-key-lesson-points-box [data-testid="stText"]')]
    .map(t => parseFloat(getComputedStyle(t).fontSize));
  return {bar: {top: bar.top, bottom: bar.bottom, left: bar.left, right: bar.right}, title: {top: title.top},
          header, vw: window.innerWidth, smallestPoint: sizes.length ? Math.min(...sizes) : null};
}"""


def slide_number(page: Page) -> int:
    return int(re.search(r"[?&]slide=(\d+)", page.url).group(1))


# Each built-in lesson on one of the two projector screens, in turn: every slide's page is also checked on both
# screens by test_every_page_fits_the_projector, and the lessons together cover both.
LESSON_SCREENS = [(name, VIEWPORTS[n % len(VIEWPORTS)]) for n, name in enumerate(lessons.builtin_names())]


@pytest.mark.parametrize(("name", "size"), LESSON_SCREENS, ids=[f"{w}x{h}-{n}" for n, (w, h) in LESSON_SCREENS])
def test_the_lesson_bar_leaves_every_built_in_slides_figure_whole(browser, app, name, size):
    with contextmanager(screen)(browser, size) as page:
        lesson_bar_whole(page, app, name)


def lesson_bar_whole(page: Page, app: App, name: str) -> None:
    """Play a built-in lesson with the keyboard: every slide shows its own page, settings and title, its figure
    drawn and whole under the lesson bar, and nothing breaks; the talking points never below 14 px."""
    since = len(app.log.lines)
    made = lessons.load_builtin(name)
    page.goto(app.link("/lessons", {"lesson": name, "present": "true"}))
    settle(page, timeout=LOAD_MS)
    page.get_by_role("button", name="Play", exact=True).click()
    for number, s in enumerate(made.slides, 1):
        where = f"{name}, slide {number} ({s.title!r}) at {page.viewport_size}"
        if number > 1:
            page.locator(".st-key-lesson-title h1").click()  # the page, not a button, has the focus
            page.keyboard.press("PageDown")
        try:
            page.wait_for_function(f"() => /[?&]slide={number}(&|$)/.test(location.search)", timeout=LOAD_MS)
            settle(page, timeout=LOAD_MS)
            page.wait_for_function(DRAWN_JS, arg=[READY], timeout=LOAD_MS, polling=200)
            settle(page, ms=400)
        except PlaywrightTimeout:
            raise AssertionError(f"{where}: never drawn: {describe(page, app)}") from None
        assert_clean(page, app, since)
        assert_whole(page, where)
        path = page.url.split("?")[0].removeprefix(app.url)
        assert PATH_ALIASES.get(path, path) == lessons.page_of(s).url, f"{where}: on {page.url[:80]}"
        assert player.view_of(url_settings(page.url)[0]) == player.view_of(player.slide_values(s)), where
        assert page.locator(".st-key-lesson-title h1").inner_text().strip() == lessons.display_text(s.title), where
        bar = page.evaluate(BAR_JS)
        assert bar["bar"]["top"] >= 0 and bar["bar"]["bottom"] <= bar["header"] + 1, f"{where}: bar {bar}"
        assert bar["bar"]["left"] >= 0 and bar["bar"]["right"] <= bar["vw"], f"{where}: bar {bar}"
        wait_for_figure(page, app, SLIDE_FIGURE, where)
        box = page.evaluate(FIT_JS, [SLIDE_FIGURE, False])
        assert box is not None, f"{where}: no figure"
        assert box["top"] >= box["header"] - 1 and box["bottom"] <= box["vh"] + 1, f"{where}: figure off screen: {box}"
        assert box["left"] >= 0 and box["right"] <= box["vw"], f"{where}: figure wider than the screen: {box}"
    assert slide_number(page) == len(made.slides)
    page.get_by_role("button", name=re.compile("^Talking points")).click()
    settle(page)
    bar = page.evaluate(BAR_JS)
    assert bar["smallestPoint"] >= MIN_PRESENT_FONT, f"{name}: talking points below 14 px: {bar}"
    assert not page.evaluate(CUT_JS, [MAIN]), f"{name}: labels or buttons cut with the talking points out"
