"""Fixtures shared by the browser tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from devkit.server import launch


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Debian Chromium per test module (launch() says to install it when /usr/bin/chromium is missing)."""
    with sync_playwright() as pw:
        browser = launch(pw)
        yield browser
        browser.close()
