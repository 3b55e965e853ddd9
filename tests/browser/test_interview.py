"""Interview mode in two real Chromium pages against a real `ampquiz serve`: an instructor makes
an interview in the studio; the candidate predicts with a confidence, answers, edits and runs;
the interviewer's page shows each step within a second, without reloading (server-sent events);
the interview survives a server restart; the report shows predictions, runs and notes; the
candidate's link never opens the interviewer's page, and a revoked link stops working."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import reload_until_open
from tests.support.cli import REPO
from tests.support.server import Server

LIVE_MS = 1000
"""How soon the interviewer's page must show what the candidate just did."""
PO, MC = "linear-dtype-under-autocast", "gradscaler-skips-inf-step"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests below that neither restart it nor depend on what another did
    (each makes interviews of its own): a server start is seconds."""
    srv = Server(tmp_path_factory.mktemp("interviews"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_an_interviewer_watches_a_candidate_live(
    browser: Browser, server: Server, shots: Path
) -> None:
    errors: list[str] = []
    host_ctx = browser.new_context(
        base_url=server.url,
        viewport={"width": 1280, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    host_ctx.set_default_timeout(30_000)
    host = host_ctx.new_page()
    host.on("pageerror", lambda exc: errors.append(str(exc)))
    host.goto(server.instructor_link("ada"))
    host.get_by_role("button", name="Sign in").click()
    host.goto("/studio/interviews/new")
    host.locator(
        "details.studio-set > summary"
    ).first.click()  # a set's questions, folded until opened
    host.locator(f'input[value="{PO}"]').check()
    host.locator(f'input[value="{MC}"]').check()
    host.get_by_label("Time limit in minutes").fill("30")
    host.get_by_role("button", name="Create the interview").click()
    expect(host.get_by_role("heading", name="Interviewer")).to_be_visible()
    host_url = host.url
    # the page's own address is the only way back to it: shown, to bookmark
    expect(host.locator("[data-host-link]")).to_have_text(host_url)
    candidate_url = host.locator("[data-candidate-link]").inner_text().strip()
    # one tap copies it (selecting 90 characters by hand was fiddly on a phone)
    host.locator('[data-copy="candidate-link"]').click()
    expect(host.locator("[data-copied]")).to_have_text("Copied.")
    assert host.evaluate("navigator.clipboard.readText()") == candidate_url
    expect(host.locator("[data-live-status]")).to_have_text("Live: updates appear as they happen.")
    po = host.locator(f'[data-question="{PO}"]')
    mc = host.locator(f'[data-question="{MC}"]')

    cand_ctx = browser.new_context(viewport={"width": 1000, "height": 900})
    cand_ctx.set_default_timeout(30_000)
    cand = cand_ctx.new_page()
    cand.on("pageerror", lambda exc: errors.append(str(exc)))
    cand.goto(candidate_url)
    expect(cand.locator("[data-start]")).to_be_visible()  # opening the link starts nothing
    cand.screenshot(path=str(shots / "interview-start.png"), full_page=True)
    expect(po.locator("[data-state]")).to_have_text("not opened yet")
    cand.get_by_role("button", name="Start the interview").click()
    expect(po.locator("[data-state]")).to_contain_text("opened at", timeout=LIVE_MS)
    expect(cand.locator("[data-time-left]")).to_contain_text(":")
    reload_until_open(cand, "How sure are you?")

    # predict, with a confidence
    cand.get_by_label("What will it print?").fill("torch.bfloat16\ntorch.float32")
    cand.get_by_label("75 %").check()
    cand.get_by_role("button", name="Lock in my prediction").click()
    expect(cand.locator("[data-verdict]")).to_contain_text("Right")
    expect(po.locator("[data-prediction]")).to_contain_text("75 % confidence", timeout=LIVE_MS)
    expect(po.locator("[data-prediction]")).to_contain_text("right", timeout=LIVE_MS)
    # A prediction's line breaks are shown (collapsed, a wrong three-line one read exactly as the
    # two-line truth): on the candidate's page and, live, on the interviewer's.
    said = "torch.bfloat16\ntorch.float32"  # (the form sends the textarea's line breaks as CRLF)
    assert cand.locator("code.printed").first.inner_text().replace("\r", "") == said
    assert po.locator("[data-prediction] code.printed").first.inner_text().replace("\r", "") == said

    # edit and run
    code = cand.locator("#code")
    code.fill(code.input_value().replace("print(loss.dtype)", "print(loss.dtype, y.float().dtype)"))
    cand.get_by_role("button", name="Run").click()
    expect(cand.locator("#run-panel")).to_contain_text("torch.float32 torch.float32")
    run = po.locator("[data-runs] > li")
    expect(run).to_have_count(1, timeout=LIVE_MS)
    expect(run.locator(".interview-diff")).to_contain_text(
        "+print(loss.dtype, y.float().dtype)", timeout=LIVE_MS
    )
    expect(run.locator(".interview-output")).to_contain_text(
        "torch.float32 torch.float32", timeout=LIVE_MS
    )
    # the diff's added line stands out as on a What-if card (it had no colour)
    expect(run.locator(".interview-diff .d-add")).to_have_text(
        "+print(loss.dtype, y.float().dtype)"
    )
    # a prediction over two lines is a block of two lines, not "torch.bfloat16 torch.float32" in a sentence
    expect(po.locator("[data-prediction] pre.interview-output").first).to_have_text(said)

    # the interviewer's notes, saved without leaving the page
    notes = po.get_by_label("Notes (the candidate never sees them)")
    notes.fill("knows autocast's lists")
    # Leaving with notes not saved asks first (a reload lost them without a word): declined, the
    # page and the notes stay.
    asked: list[str] = []
    host.once("dialog", lambda dialog: (asked.append(dialog.type), dialog.dismiss()))
    host.get_by_role("link", name="Report").click()
    expect(notes).to_have_value("knows autocast's lists")
    assert asked == ["beforeunload"] and host.url == host_url
    po.get_by_role("button", name="Save notes").click()
    expect(po.locator("[data-saved]")).to_contain_text("saved", timeout=LIVE_MS)
    host.screenshot(path=str(shots / "interview-host.png"), full_page=True)
    assert host.url == host_url  # never reloaded

    cand.get_by_role("button", name="Next question").click()
    expect(po.locator("[data-state]")).to_contain_text("done in", timeout=LIVE_MS)
    expect(mc.locator("[data-state]")).to_contain_text("opened at", timeout=LIVE_MS)

    # the server restarts mid-interview: both pages carry on, the live page reconnects by itself
    server.restart()
    expect(host.locator("[data-live-status]")).to_have_text(
        "Live: updates appear as they happen.", timeout=15_000
    )
    cand.reload()
    reload_until_open(cand, "How sure are you?")
    cand.get_by_text("the step is skipped and the scale is halved").click()
    cand.get_by_label("95 %").check()
    cand.get_by_role("button", name="Lock in my prediction").click()
    expect(cand.locator("[data-verdict]")).to_contain_text("Right")
    expect(mc.locator("[data-prediction]")).to_contain_text("95 % confidence", timeout=LIVE_MS)
    cand.get_by_role("button", name="Finish the interview").click()
    expect(cand.locator("[data-interview-over]")).to_be_visible()
    expect(host.locator("[data-live-status]")).to_have_text(
        "The candidate finished the interview.", timeout=LIVE_MS
    )
    expect(po.locator("[data-runs] > li")).to_have_count(
        1
    )  # the replay after the restart added nothing twice
    cand.screenshot(path=str(shots / "interview-candidate.png"), full_page=True)

    # the report
    report = host_ctx.new_page()
    report.goto(host_url + "/report")
    row = report.locator(f'[data-report-row="{PO}"]')
    expect(row).to_contain_text("torch.bfloat16")
    expect(row).to_contain_text("75 %")
    expect(row.locator("[data-runs]")).to_have_text("1")
    expect(row).to_contain_text("knows autocast's lists")
    expect(report.locator(f'[data-report-row="{MC}"]')).to_contain_text("95 %")
    expect(report.get_by_role("heading", name="Calibration")).to_be_visible()
    report.screenshot(path=str(shots / "interview-report.png"), full_page=True)

    # the candidate's link never opens the interviewer's page, and never shows the notes
    token = candidate_url.rsplit("/", 1)[1]
    for path in (f"/interviewer/{token}", f"/interviewer/{token}/report"):
        response = cand.goto(server.url + path)
        assert response is not None and response.status == 404, path
    cand.goto(candidate_url)
    expect(cand.get_by_text("knows autocast's lists")).to_have_count(0)

    # a revoked link stops working; it asks first (one stray tap ended a live interview)
    host.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    host.get_by_role("button", name="Revoke the candidate's link").click()
    assert asked[-1].startswith("Revoke the candidate's link?")
    expect(host.locator("[data-revoked]")).to_be_visible()
    response = cand.goto(candidate_url)
    assert response is not None and response.status == 404
    assert not errors, f"JavaScript errors: {errors}"
    cand_ctx.close()
    host_ctx.close()


def test_interview_pages_fit_a_phone_and_pass_axe(browser: Browser, shared: Server) -> None:
    server = shared
    from tests.browser.test_every_page import AXE, axe_violations, overflow

    if not AXE.exists():
        pytest.fail(f"axe-core is not installed at {AXE}: run `make browser`")
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "interview", "new", "--questions", f"{PO},{MC}", "--minutes", "20", "--url", server.url],
        env=server.env, cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    candidate_url, host_url = out.stdout.split()
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 375, "height": 800}, color_scheme=scheme)
        context.set_default_timeout(30_000)
        page = context.new_page()
        checked = {}
        if (
            scheme == "light"
        ):  # before the start, before and after the prediction; the dark pass sees it answered
            page.goto(candidate_url)
            assert overflow(page) <= 0 and axe_violations(page) == [], axe_violations(page)
            page.get_by_role("button", name="Start the interview").click()
            reload_until_open(page, "How sure are you?")
            checked["candidate"] = candidate_url
            assert overflow(page) <= 0 and axe_violations(page) == [], axe_violations(page)
            page.get_by_label("What will it print?").fill("torch.float32")
            page.get_by_label("50 %").check()
            page.get_by_role("button", name="Lock in my prediction").click()
            # A run of edited code: the interviewer's page shows its diff, whose long line
            # pushed that page 85 px wider than a phone.
            code = page.locator("#code")
            code.fill(
                code.input_value()
                + "\nprint('a long line that a phone cannot show whole', torch.float32, torch.bfloat16)\n"
            )
            page.get_by_role("button", name="Run").click()
            expect(page.locator("#run-panel")).to_contain_text("torch.bfloat16")
        checked.update(
            {
                "candidate, answered": candidate_url,
                "interviewer": host_url,
                "report": host_url + "/report",
            }
        )
        for name, url in checked.items():
            page.goto(url)
            if name == "interviewer":
                expect(page.locator("[data-live-status]")).to_contain_text("Live")
            for width in (375, 320):
                page.set_viewport_size({"width": width, "height": 800})
                assert overflow(page) <= 0, (
                    f"{name} ({scheme}) is {overflow(page)} px wider than {width} px"
                )
            assert axe_violations(page) == [], f"{name} ({scheme}): {axe_violations(page)}"
        context.close()


def test_a_candidate_on_a_phone_keeps_the_clock_in_sight_and_is_told_as_time_runs_out(
    browser: Browser, shared: Server, shots: Path
) -> None:
    """The clock sat at the top, 750 px above a phone's answer box, said nothing as time ran low,
    and at 0 left the form and "I need more time" up: a prediction typed on was refused, lost (a
    newcomer's walk). The page's clock is moved on by Playwright's; the server's is the real one."""
    server = shared
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "interview", "new", "--questions", PO, "--minutes", "1", "--url", server.url],
        env=server.env, cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    candidate_url = out.stdout.split()[0]
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.clock.install()
    try:
        page.goto(candidate_url)
        page.get_by_role("button", name="Start the interview").click()
        reload_until_open(page, "How sure are you?")
        timer = page.locator(".interview-timer")
        said = timer.locator("[data-time-said]")
        page.get_by_role("button", name="Lock in my prediction").scroll_into_view_if_needed()
        scrolled = page.evaluate("window.scrollY")
        box = timer.bounding_box()
        assert scrolled > 300 and box is not None and 0 <= box["y"] <= 2, (
            scrolled,
            box,
        )  # at the top of the screen
        expect(said).to_have_text("One minute left.")  # a one-minute interview: said at once
        expect(page.locator("[data-extend] button")).to_be_visible()
        left_ms = int(
            timer.get_attribute("data-left-ms") or 0
        )  # by the server's clock, when the page was made
        assert 15_000 < left_ms <= 60_000, left_ms
        page.clock.run_for(left_ms - 10_000)
        expect(said).to_have_text("Under 15 seconds left.")
        page.get_by_label("What will it print?").fill("torch.float32")
        page.clock.run_for(12_000)
        expect(timer.get_by_role("timer")).to_have_text("Time is up.")
        expect(said).to_have_text(
            "Lock in what you have now, with how sure you are, or it is lost."
        )
        expect(
            page.locator("[data-extend]")
        ).to_be_hidden()  # the server would refuse more time now
        page.screenshot(path=str(shots / "interview-time-up-phone.png"))
    finally:
        context.close()
