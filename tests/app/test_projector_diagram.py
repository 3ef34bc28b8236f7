"""The layer diagrams on a projector: Data flow and Step through a layer in presentation mode, in Chromium.

At 1280x720 and 1024x768, for the pretrained model (Post-LN, statistics overlay on) and a custom Pre-LN model with a
final LayerNorm (the tallest drawing): the compact diagram is drawn, its box lies whole on screen below Streamlit's
header at first load, its smallest text is at least MIN_PRESENT_FONT (14 px) as drawn, and no label is cut.
st.graphviz_chart sets one CSS font size for all SVG text: the drawn size is that size times the SVG's scale on screen.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from devkit.server import launch, streamlit_server
from encoder.viz.style import MIN_PRESENT_FONT
from tests.app.test_browser import SERVER_ENV, App, ServerLog, assert_clean, describe, settle
from tests.app.test_projector import CUT_JS, FIT_JS, LOAD_MS, MAIN, VIEWPORTS
from ui import settings

DIAGRAM = '[data-testid="stMain"] [data-testid="stGraphVizChart"]'
MODELS = {
    "pretrained": ({}, ["Post-LN layer × 6", "Self-Attention, 12 heads", "W1 + GELU: 16×1536"]),
    "custom-pre-final": ({"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "256", "num_layers": "2",
                          "norm": "pre", "activation": "relu", "final_norm": "true"},
                         ["Pre-LN layer × 2", "Self-Attention, 4 heads", "W1 + RELU: 16×256", "Final LayerNorm"]),
    # every node of later encoders at once: the positional node, RoPE and the window in attention, GeGLU, no biases
    "modernbert-style": ({"model": "custom"} | {k: settings.SETTINGS[k].format(v)
                                                for k, v in settings.PRESETS["ModernBERT-style"].items()},
                         ["Pre-LN layer × 6, no biases", "Self-Attention, 4 heads", "RoPE on q, k · ",
                          "GeGLU W, V: 16×384", "Final LayerNorm", "Embeddings; RoPE in attention"]),
}
TEXT = "The animal didn't cross the street because it was too tired."  # 16 tokens with [CLS] and [SEP]

# Every text of the diagram as drawn: its CSS font size times the SVG's scale, and its box's height.
TEXTS_JS = """(sel) => [...document.querySelector(sel).querySelectorAll('svg text')]
  .filter(t => t.textContent.trim())
  .map(t => ({text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
              height: t.getBoundingClientRect().height}))"""

# Texts an edge runs through: the boxes of the edges' paths (a straight edge's box is its line) that cross a text's
# box by more than 2 px each way. Curved edges get wide boxes: only the cluster headings are checked against them.
STRUCK_JS = """(sel) => {
  const svg = document.querySelector(sel).querySelector('svg');
  const boxes = (q) => [...svg.querySelectorAll(q)].map(e => [e.textContent.trim(), e.getBoundingClientRect()]);
  const edges = boxes('g.edge path');
  return boxes('g.cluster > text').filter(([t]) => t).flatMap(([t, b]) => edges
    .filter(([, e]) => Math.min(b.right, e.right) - Math.max(b.left, e.left) > -2
                       && Math.min(b.bottom, e.bottom) - Math.max(b.top, e.top) > 2).map(() => t));
}"""


def open_diagram(page: Page, app: App, path: str, params: dict[str, str], present: bool = True) -> None:
    """Open a page (in presentation mode unless told) with these settings; return once its diagram is drawn and the
    app idle."""
    page.goto(app.link(f"/{path}", params | ({"present": "true"} if present else {})))
    try:
        settle(page, timeout=LOAD_MS)
        page.wait_for_function(f"() => document.querySelector('{DIAGRAM} svg text')", timeout=LOAD_MS, polling=200)
        settle(page, ms=400)
    except PlaywrightTimeout:
        raise AssertionError(f"/{path} never drew its diagram: {describe(page, app)}") from None


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[App, Browser]]:
    """One app server and one Chromium for the module."""
    with streamlit_server(env=SERVER_ENV) as (url, proc), sync_playwright() as pw:
        browser = launch(pw)
        yield App(url, ServerLog(proc.stdout)), browser
        browser.close()


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("path", ["diagram", "walkthrough"])
@pytest.mark.parametrize("size", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_the_diagram_is_whole_on_screen_with_readable_text(served, size, path, model):
    app, browser = served
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page, since = context.new_page(), len(app.log.lines)
    page.dialogs = []
    try:
        check_diagram(page, app, path, model, since)
    finally:
        context.close()


def check_diagram(page: Page, app: App, path: str, model: str, since: int) -> None:
    params, expected = MODELS[model]
    open_diagram(page, app, path, params | {"text": TEXT})
    assert_clean(page, app, since)
    where = f"/{path} ({model}) at {page.viewport_size}"
    texts = page.evaluate(TEXTS_JS, DIAGRAM)
    shown = {t["text"] for t in texts}  # the heading on Data flow goes on: ", statistics of layer 5"
    missing = [e for e in expected if not any(text.startswith(e) for text in shown)]
    assert not missing, f"{where}: not the compact diagram of this config, no {missing} in {sorted(shown)}"
    smallest = min(texts, key=lambda t: t["px"])
    assert smallest["px"] >= MIN_PRESENT_FONT, f"{where}: text drawn below {MIN_PRESENT_FONT} px: {smallest}"
    box = page.evaluate(FIT_JS, [DIAGRAM, False])
    assert box["top"] >= box["header"] - 1 and box["bottom"] <= box["vh"] + 1, f"{where}: diagram off screen: {box}"
    assert box["left"] >= 0 and box["right"] <= box["vw"], f"{where}: diagram wider than the screen: {box}"
    struck = page.evaluate(STRUCK_JS, DIAGRAM)  # the edge from the embeddings ran through "Post-LN layer × 6"
    assert not struck, f"{where}: an edge runs through the heading {struck}"
    cut = page.evaluate(CUT_JS, [MAIN])  # Data flow's controls moved into the narrower right-hand column
    assert not cut, f"{where}: labels or buttons cut off: {cut}"


@pytest.mark.parametrize("model", [m for m, (params, _) in MODELS.items() if params.get("final_norm") != "true"])
def test_the_full_diagram_keeps_its_heading_clear_of_edges(served, model):
    """On a laptop (not presenting) Data flow draws the full diagram: its heading too stands where no edge runs.
    With a final LayerNorm an edge leaves the layer at the bottom too, and the heading stays on top (a known gap)."""
    app, browser = served
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page, since = context.new_page(), len(app.log.lines)
    page.dialogs = []
    try:
        open_diagram(page, app, "diagram", MODELS[model][0] | {"text": TEXT}, present=False)
        assert_clean(page, app, since)
        shown = {t["text"] for t in page.evaluate(TEXTS_JS, DIAGRAM)}
        assert any(t.startswith("Encoder layer × ") for t in shown), f"not the full diagram: {sorted(shown)}"
        struck = page.evaluate(STRUCK_JS, DIAGRAM)  # the edge "into layer 0" ran through the centred heading
        assert not struck, f"/diagram ({model}) at 1440x900: an edge runs through the heading {struck}"
    finally:
        context.close()
