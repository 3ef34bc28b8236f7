"""Fixtures shared by the browser tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from devkit.server import launch, streamlit_server
from tests.app.walk import SERVER_ENV, ServerLog, Tabs


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Debian Chromium per test module (launch() says to install it when /usr/bin/chromium is missing)."""
    with sync_playwright() as pw:
        browser = launch(pw)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def walk_server() -> Iterator[tuple[str, ServerLog]]:
    """A fresh app server for one module of tests that drive it through tests/app/walk.py."""
    with streamlit_server(env=SERVER_ENV) as (url, proc):
        yield url, ServerLog(proc.stdout)


@pytest.fixture
def tabs(browser, walk_server) -> Iterator[Tabs]:
    """A factory of tabs on the module's server, each a new tab (a fresh session: new_tab)."""
    made = Tabs(browser, *walk_server)
    yield made
    made.close()
