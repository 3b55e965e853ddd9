"""Browser tests: real Chromium (through Playwright) against a real `ampquiz serve` in a subprocess.

The server runs on a free port with its own temporary database and the small bank in
tests/browser/bank/; `restart()` stops it and starts a new one on the same database file.
Screenshots go to tests/output/ (git-ignored).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import REPO, Server

OUTPUT = REPO / "tests" / "output"
CHROMIUM = os.environ.get("AMPQUIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (`make browser` installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A fresh browser profile: a learner who has never been here."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
    context.set_default_timeout(30_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="session")
def shots() -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT
