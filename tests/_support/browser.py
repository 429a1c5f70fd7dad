"""Headless Chromium for the browser tests, launched one way everywhere.

Playwright drives Debian's Chromium (``/usr/bin/chromium``: Playwright cannot download its
own browser here) with one set of flags: no sandbox or GPU (a container), and nothing that
reaches the network on its own (QUIC, background updates, sync). The ``browser`` fixture in
``conftest.py`` and the JupyterLab review (``lab_review``) both launch through `chromium`.
What is missing (Chromium, Playwright, JupyterLab) fails the test under ``CI=true`` and skips
it elsewhere, so that a CI machine without a browser cannot pass by skipping::

    with chromium() as browser:
        page = browser.new_page()
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def unavailable(message: str) -> NoReturn:
    """Fail the test under ``CI=true`` (a browser test must not pass by skipping there);
    skip it elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def chromium(scrollbars: bool = False) -> Iterator[Any]:
    """A headless Chromium (Playwright's sync ``Browser``), closed on leaving; with
    ``scrollbars``, scrollbars are drawn (Playwright's headless hides them), for
    screenshots of what a person sees."""
    if not Path(CHROMIUM).exists():
        unavailable(f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            ignore_default_args=["--hide-scrollbars"] if scrollbars else None,
        )
        try:
            yield browser
        finally:
            browser.close()
