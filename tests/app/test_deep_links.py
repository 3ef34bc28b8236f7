"""Saved links on a freshly started server: every page's deep link, with a query string, as the very first request.

A server's first script run is routed by Streamlit's legacy router, by the file names in pages/, before app.py has
built the navigation (ui/pages.py). For every page, and for /heatmaps (the default page's own path), a fresh server
gets that page's link first, in Chromium: the right page draws inside the frame, its settings come from the URL, no
"Page not found" appears, nothing is fetched from outside the machine, and the sidebar never lists anything but the
pages' titles, not even for a moment. One browser for the module (conftest.py); the server is restarted between
pages.
"""

from __future__ import annotations

import urllib.parse

import pytest
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from devkit.client import LOOPBACK
from devkit.server import close_tab, streamlit_server
from tests.app.test_browser import (
    CONTENT,
    EXCEPTION,
    LOAD_MS,
    SERVER_ENV,
    SMALL,
    App,
    ServerLog,
    assert_clean,
    describe,
    new_page,
)
from ui import pages, settings

# From before the first byte of the page: every label the sidebar's navigation ever shows, and whether the text
# "Page not found" (Streamlit's dialog) ever appears.
WATCH_JS = """
window.__navLabels = new Set(); window.__notFound = false;
new MutationObserver(() => {
  for (const a of document.querySelectorAll('[data-testid="stSidebarNav"] a'))
    window.__navLabels.add(a.innerText.trim().split('\\n').pop());
  if (document.body?.innerText.includes('Page not found')) window.__notFound = true;
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
CURRENT_JS = """() => [...document.querySelectorAll('[data-testid="stSidebarNavLink"]')]
  .filter(a => a.getAttribute('aria-current') === 'page').map(a => a.innerText.trim().split('\\n').pop())"""
PARAMS = SMALL | {"norm": "pre"}  # a small custom Pre-LN model: the sidebar shows whether the URL was read
LINKS = [(entry.url, entry) for entry in pages.PAGES] + [(f"/{e.path}", e) for e in pages.PAGES if e.default]


@pytest.fixture
def first_visit(browser):
    """A fresh server and a fresh tab whose first request will be the link the test opens."""
    with streamlit_server(env=SERVER_ENV) as (url, proc):
        page = new_page(browser)
        page.add_init_script(WATCH_JS)
        page.outside = []  # every request that leaves this machine
        page.on("request", lambda r: None if local(r.url) else page.outside.append(r.url))
        yield page, App(url, ServerLog(proc.stdout))
        close_tab(page)


def local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("blob", "data", "about") or parts.hostname in LOOPBACK


def settled(page: Page, app: App, content: str, count: int, timeout: float = LOAD_MS) -> None:
    """Wait until the page's main content is drawn and the app is idle for a second."""
    try:
        page.wait_for_function(
            """([sel, n, exc]) => document.querySelectorAll(sel).length >= n || document.querySelector(exc)""",
            arg=[content, count, EXCEPTION], timeout=timeout, polling=200)
        page.wait_for_function(
            """() => { const idle = document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]');
                       if (!idle) { window.__idleSince = undefined; return false; }
                       window.__idleSince ??= performance.now(); return performance.now() - window.__idleSince > 1000; }""",
            timeout=timeout, polling=100)
    except PlaywrightTimeout:
        raise AssertionError(f"{page.url}: the page's content ({content}) never appeared: {describe(page, app)}") from None


@pytest.mark.browser
@pytest.mark.parametrize(("link", "entry"), LINKS, ids=[link for link, _ in LINKS])
def test_a_saved_link_is_the_first_request_of_a_fresh_server(first_visit, link, entry):
    page, app = first_visit
    page.goto(app.link(link, PARAMS))
    content, count = CONTENT[entry.path]
    settled(page, app, content, count, 2 * LOAD_MS if entry.path == "warmup" else LOAD_MS)  # it computes on open
    assert_clean(page, app)
    assert not page.outside, f"requests left the machine: {page.outside}"
    assert not page.evaluate("window.__notFound"), f"'Page not found' appeared on {link}: {describe(page, app)}"
    assert page.locator('[data-testid="stMain"] h1').inner_text() == "Encoder Explorer", "the frame was not drawn"
    assert page.url.startswith(app.link(link)) and all(f"{k}={v}" in page.url for k, v in PARAMS.items()), page.url
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.get_by_role("radio", name=settings.CUSTOM_LABEL).is_checked(), "the model did not come from the URL"
    assert sidebar.get_by_role("radio", name="Pre-LN").is_checked(), "the norm placement did not come from the URL"
    seen = set(page.evaluate("[...window.__navLabels]"))
    titles = {e.title for e in pages.PAGES}
    assert seen and seen <= titles, f"the sidebar showed {sorted(seen - titles)}, which are not page titles"
    if link == entry.url:  # the sidebar marks the page; the default page's own path is a hidden twin of "/"
        more = page.locator('[data-testid="stSidebarNavViewButton"]')
        if not page.evaluate(CURRENT_JS) and more.count():
            more.click()  # a long navigation shows its first pages and a "View more" button
        assert page.evaluate(CURRENT_JS) == [entry.title]
