"""Two instructors in real Chromium save one file: the second is shown what the first changed
(against what they opened), nothing of either is lost, and they merge and save again. A second
save once silently replaced the first, and both were told "Saved"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.server import BANK, Server

pytestmark = pytest.mark.browser


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    bank = tmp_path / "bank"
    shutil.copytree(BANK, bank)
    server = Server(tmp_path, bank=bank)
    server.start()
    try:
        yield server, bank
    finally:
        server.stop()


def signed_in(browser: Browser, server: Server, name: str, errors: list[str]) -> Page:
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.instructor_link(name))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Bank status")).to_be_visible()
    page.goto("/studio/edit/amp-demo.yaml")
    expect(page.locator("#problems")).not_to_contain_text("checking")
    return page


def test_the_second_save_is_shown_the_first_and_both_are_kept(
    browser: Browser, studio: tuple[Server, Path]
) -> None:
    server, bank = studio
    errors: list[str] = []
    ada, bob = signed_in(browser, server, "ada", errors), signed_in(browser, server, "bob", errors)
    opened = (bank / "amp-demo.yaml").read_text()

    bob_text = "# Bob's note\n" + opened
    bob.locator("#yaml").fill(bob_text)
    bob.get_by_role("button", name="Save").click()
    expect(bob.locator("#save-result")).to_contain_text("Saved amp-demo.yaml")
    assert (bank / "amp-demo.yaml").read_text() == bob_text

    ada_text = opened + "# Ada's note\n"
    ada.locator("#yaml").fill(ada_text)
    ada.get_by_role("button", name="Save").click()
    conflict = ada.locator("#save-conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("was saved since you opened it")
    expect(ada.locator("#save-conflict-diff")).to_contain_text("+# Bob's note")
    expect(ada.locator("#save-conflict-diff")).not_to_contain_text("Ada")  # theirs, not hers
    assert (bank / "amp-demo.yaml").read_text() == bob_text  # nothing lost

    # Take theirs, look, and go back to hers: nothing of hers is lost either
    ada.get_by_role("button", name="Take theirs").click()
    assert ada.locator("#yaml").input_value() == bob_text
    ada.get_by_role("button", name="Back to mine").click()
    assert ada.locator("#yaml").input_value() == ada_text

    # She merges Bob's note into her text and keeps hers: saved over his, with both
    merged = "# Bob's note\n" + ada_text
    ada.locator("#yaml").fill(merged)
    ada.get_by_role("button", name="Keep mine (save again over theirs)").click()
    expect(ada.locator("#save-result")).to_contain_text("Saved amp-demo.yaml")
    expect(conflict).to_be_hidden()
    assert (bank / "amp-demo.yaml").read_text() == merged

    # Bob saves again on the version he saved: now he is the one shown what changed
    bob.locator("#yaml").fill(bob_text + "# Bob again\n")
    bob.get_by_role("button", name="Save").click()
    expect(bob.locator("#save-conflict-diff")).to_contain_text("+# Ada's note")
    assert (bank / "amp-demo.yaml").read_text() == merged
    assert not errors, errors
