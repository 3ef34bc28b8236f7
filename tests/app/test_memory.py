"""Memory stays bounded whatever users open: the largest allowed model, many long sentences, many tabs, Compare.

A real server (`streamlit run app.py`) with a small operator budget so the test is quick; Chromium opens each view by
URL in a fresh tab and closes it again. The server's resident memory must stay under what it had after start-up,
plus the cache's byte budget, plus a stated margin for the work of one request (the forward pass's scratch space,
the chart being serialised, the allocator's slack).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from devkit.server import ServerLog, launch, streamlit_server, wait_ready
from encoder import EncoderConfig
from ui import settings
from ui.caches import CACHE_FACTOR
from ui.resources import estimate_bytes

pytestmark = pytest.mark.browser

BUDGET_MB = 512  # ENCODER_EXPLORER_MEMORY_MB for this server: per model plus one trace; the cache holds twice that
MARGIN_MB = 600  # one request's scratch space, serialised charts, and freed memory the allocator has not returned
TABS = 10  # distinct long sentences, each in its own tab
MiB = 2**20


def largest_config() -> dict[str, str]:
    """The deepest d_model-1024 config the budget allows at 512 tokens: the worst a student may ask for."""
    best = None
    for layers in range(1, settings.MAX_LAYERS + 1):
        cfg = EncoderConfig(d_model=1024, num_heads=16, d_ff=512, num_layers=layers)
        if estimate_bytes(cfg)["total"] <= BUDGET_MB * MiB:
            best = layers
    assert best is not None
    return {"model": "custom", "d_model": "1024", "num_heads": "16", "d_ff": "512", "num_layers": str(best)}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def long_sentence(i: int) -> str:
    """About 600 tokens, different for every i, so each tab needs its own 512-token trace."""
    return " ".join(f"w{i}x{j}" for j in range(300))


def test_memory_stays_under_the_budget_with_many_tabs_of_the_largest_model():
    cfg = largest_config()
    with streamlit_server(env={"ENCODER_EXPLORER_MEMORY_MB": str(BUDGET_MB)}) as (url, proc):
        log = ServerLog(proc.stdout)
        with sync_playwright() as pw:
            browser = launch(pw)

            def visit(path: str, params: dict[str, str]) -> None:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.goto(f"{url}{path}?{urllib.parse.urlencode(params)}")
                wait_ready(page, 180_000)
                # a chart, or past 128 tokens the one-head view's canvas map (ui/heatmap.py), or the exception
                page.wait_for_selector('[data-testid="stPlotlyChart"], [data-testid="stException"], '
                                       '[data-testid="stBidiComponentIsolated"]', timeout=180_000)
                assert not page.query_selector('[data-testid="stException"]'), log.errors()
                context.close()

            visit("/", {"text": "Warm up."})  # imports and the small default model: the baseline
            base = rss_mb(proc.pid)
            peak, seen = base, []
            for i in range(TABS):
                visit("/heatmaps", cfg | {"text": long_sentence(i)})
                seen.append(round(rss_mb(proc.pid)))
                peak = max(peak, seen[-1])
            for i in range(3):
                visit("/side-by-side", cfg | {"text": long_sentence(100 + i)})
                seen.append(round(rss_mb(proc.pid)))
                peak = max(peak, seen[-1])
            browser.close()
    bound = base + CACHE_FACTOR * BUDGET_MB + MARGIN_MB
    print(f"server RSS: start {base:.0f} MB, after each tab {seen} MB, bound {bound:.0f} MB")
    assert not log.errors(), log.errors()
    assert peak <= bound, f"RSS after each tab {seen} MB; start {base:.0f} MB; bound {bound:.0f} MB"
