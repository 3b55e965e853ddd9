"""Browser-test steps more than one test takes."""

from __future__ import annotations

from playwright.sync_api import Page, expect


def reload_until_open(page: Page, ready: str, waiting: str | None = None) -> None:
    """A question just added is shown while its key is proved (a second or two) and opens after:
    reload until `ready` is on the page; meanwhile `waiting`, when given, must be."""
    for _ in range(60):
        if page.get_by_text(ready).count():
            return
        if waiting is not None:
            expect(page.locator(".notice", has_text=waiting)).to_be_visible()
        page.wait_for_timeout(500)
        page.reload()
    expect(page.get_by_text(ready).first).to_be_visible()
