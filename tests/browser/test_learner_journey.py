"""A new learner's first visit, in real Chromium, and their return after the server restarts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.support.server import Server

pytestmark = pytest.mark.browser


def test_a_new_learner_practises_runs_code_and_comes_back(
    server: Server, page: Page, shots: Path
) -> None:
    # Home: the sets, with counts.
    page.goto(server.url)
    expect(
        page.get_by_role("heading", name="Mixed precision, proved by running it")
    ).to_be_visible()
    card = page.locator(".set-card", has_text="AMP demo")
    expect(card).to_contain_text("2 questions")
    card.get_by_role("link", name="AMP demo").click()

    # A set: every question is new.
    expect(page.get_by_role("heading", level=1, name="AMP demo")).to_be_visible()
    expect(page.locator(".question-row .chip", has_text="new")).to_have_count(2)
    page.get_by_role("link", name=re.compile("Linear dtype under autocast")).click()

    # A question: prompt, highlighted code, an output box. Answer wrong.
    expect(page.locator(".prompt")).to_contain_text("What does this print?")
    expect(page.locator(".codeblock")).to_contain_text(
        'torch.autocast("cpu", dtype=torch.bfloat16)'
    )
    page.get_by_label("What does it print?").fill("torch.float32\ntorch.float32")
    page.get_by_role("button", name="Check answer").click()

    result = page.locator("#result")
    expect(result).to_contain_text("Not quite")
    expect(result.locator(".compare .correct pre")).to_have_text("torch.bfloat16\ntorch.float32")
    expect(result).to_contain_text("lower-precision list")  # the author's explanation
    run = page.locator("#run .run")
    expect(run.locator("pre.stdout")).to_have_text("torch.bfloat16\ntorch.float32\n")
    trace = run.locator("table.trace")
    linear_row = trace.locator("tr", has_text="torch.nn.functional.linear")
    expect(linear_row).to_contain_text("bfloat16 [1, 2]")
    expect(linear_row).to_contain_text("float32 → bfloat16")
    expect(page.locator(".badges")).to_contain_text("verified by running on CPU · torch")
    expect(page.locator(".badges")).to_contain_text("not yet verified on CUDA")
    page.screenshot(path=str(shots / "question-wrong.png"), full_page=True)

    # Answer right, with the key just shown: practice, graded and not recorded; it stays to revisit.
    page.get_by_label("What does it print?").fill("torch.bfloat16\ntorch.float32")
    page.get_by_label("What does it print?").press("Control+Enter")
    expect(page.locator("#result")).to_contain_text("Right!")
    expect(page.locator("[data-practice]")).to_contain_text("Practice, not recorded")
    expect(
        page.locator("#result [data-practice]")
    ).to_be_in_viewport()  # said with the verdict, on screen
    expect(page.locator(".page-head .chip.status-wrong")).to_be_visible()

    # The next question, from right under the verdict (the pager repeats it at the end): GradScaler,
    # answered wrong; its run shows the scaler skipping the step.
    expect(
        page.locator(".verdict-next").get_by_role("link", name="Next question →")
    ).to_be_in_viewport()
    page.get_by_role("link", name="Next question →").first.click()
    page.get_by_label(re.compile("-inf 65536.0")).check()
    page.get_by_role("button", name="Check answer").click()
    expect(page.locator("#result")).to_contain_text("never applies an infinite update")
    scaler = page.locator("table.scaler")
    expect(scaler.locator("tr.skipped")).to_contain_text("SKIPPED")
    expect(scaler).to_contain_text("65536 → 32768")
    page.screenshot(path=str(shots / "question-gradscaler.png"), full_page=True)

    # Edit and run: the playground, prefilled; change the code, run it with the keyboard.
    page.get_by_role("link", name="Edit and run").first.click()
    editor = page.get_by_label("Python code")
    expect(editor).to_have_value(re.compile(r"scaler\.get_scale\(\)\)\n?$"))
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type("for step in range(2):")
    page.keyboard.press("Enter")  # indents the loop body by itself
    page.keyboard.type("print('step', step, scaler.get_scale())")
    expect(editor).to_have_value(re.compile(r"for step in range\(2\):\n    print\('step'"))
    expect(page.locator(".editor .gutter")).to_contain_text("13")
    address = page.url
    page.keyboard.press("Control+Enter")
    panel = page.locator("#run-panel")
    expect(panel.locator("pre.stdout")).to_have_text(
        "1.0 32768.0\nstep 0 32768.0\nstep 1 32768.0\n"
    )
    expect(panel.locator("table.scaler")).to_be_visible()
    assert page.url == address  # ran without leaving or reloading the page
    page.screenshot(path=str(shots / "playground.png"), full_page=True)

    # Tomorrow: the server restarted; the attempts are still there, and the miss is queued.
    server.restart()
    page.goto(server.url + "/progress")
    history = page.locator("table.history tbody tr")
    expect(history).to_have_count(2)  # the practice answer is not among them
    expect(history.nth(0)).to_contain_text("GradScaler skips inf step")
    expect(history.nth(0)).to_contain_text("wrong")
    expect(history.nth(1)).to_contain_text("Linear dtype under autocast")
    expect(history.nth(1)).to_contain_text("wrong")
    review = page.locator("#review .review-list li")
    expect(review).to_have_count(2)
    expect(review.first).to_contain_text("next review in")
    expect(page.locator(".topics-table")).to_contain_text("0%")  # autocast-basics: 0 of 1 right
    page.screenshot(path=str(shots / "progress.png"), full_page=True)

    # The history's times are the reader's own (the server writes UTC, and says so without JS).
    from datetime import datetime
    from zoneinfo import ZoneInfo

    stamp = history.nth(0).locator("time")
    at = datetime.fromisoformat(stamp.get_attribute("datetime"))
    expect(stamp).to_have_text(at.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M"))
    india = page.context.browser.new_context(timezone_id="Asia/Kolkata")
    try:
        india.add_cookies(page.context.cookies())
        there = india.new_page()
        there.goto(server.url + "/progress")
        expect(there.locator("table.history tbody tr time").first).to_have_text(
            at.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%Y-%m-%d %H:%M")
        )
    finally:
        india.close()


def test_friendly_404_page(server: Server, page: Page) -> None:
    response = page.goto(server.url + "/questions/not-a-question")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    page.get_by_role("link", name="Go to the question sets").click()
    expect(page.get_by_role("heading", name="Question sets")).to_be_visible()
