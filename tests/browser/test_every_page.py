"""Every page type, as a learner on a phone meets it, in light and in dark: no sideways scrolling
at 320 and 375 px, and axe-core finds no accessibility violation. Screenshots of the phone views
go to tests/output/phone-*.png."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.cli import REPO
from tests.support.server import Server

AXE = REPO / "tests" / "browser" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
PO, MC = "linear-dtype-under-autocast", "gradscaler-skips-inf-step"

RAISES = (
    "import torch\nx = torch.ones(2, 3)\ny = torch.ones(2, 3, dtype=torch.float16)\nprint(x @ y)\n"
)
TRAINS = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for step in range(3):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(torch.randn(8, 4)).float().pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
print(round(loss.item(), 3) > 0)
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("pages"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def answered(page: Page, qid: str, fill: Callable[[Page], None]) -> None:
    page.goto(f"/questions/{qid}")
    fill(page)
    page.get_by_role("button", name="Check answer").click()
    expect(page.locator("#result")).to_be_visible()


def ran(code: str) -> Callable[[Page], None]:
    def go(page: Page) -> None:
        page.goto("/run")
        page.locator("#code").fill(code)
        page.get_by_role("button", name="Run").click()
        expect(page.locator("#run-panel .run")).to_be_visible(timeout=30_000)

    return go


def with_history(page: Page, then: str) -> None:
    """A learner who missed one question and got another right, then opens `then`."""
    answered(page, PO, lambda q: q.get_by_label("What does it print?").fill("torch.float32"))
    answered(page, MC, lambda q: q.locator(".choice").first.click())
    page.goto(then)


PAGES: dict[str, Callable[[Page], None]] = {
    "home": lambda p: p.goto("/"),
    "set": lambda p: p.goto("/sets/amp-demo"),
    "predict-before": lambda p: p.goto(f"/questions/{PO}"),
    "choice-before": lambda p: p.goto(f"/questions/{MC}"),
    "predict-after": lambda p: answered(p, PO, lambda q: q.get_by_label("What does it print?").fill("torch.float32")),
    "choice-after": lambda p: answered(p, MC, lambda q: q.locator(".choice").first.click()),
    "playground-raising": ran(RAISES),
    "playground-training": ran(TRAINS),
    "progress": lambda p: with_history(p, "/progress"),
    "review": lambda p: with_history(p, "/review"),
    "review-question": lambda p: p.goto(f"/questions/{PO}?review={int(time.time())}"),
    "not-found": lambda p: p.goto("/questions/no-such-question"),
}  # fmt: skip


def overflow(page: Page) -> int:
    """How many pixels the page is wider than the viewport (0: no sideways scrolling)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def axe_violations(page: Page) -> list[dict]:
    page.evaluate(AXE.read_text())  # evaluated by the driver: the page's CSP stays as it is
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:4]}
        for v in result["violations"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_fits_a_phone_and_passes_axe(
    browser: Browser, live: Server, shots: Path, name: str, scheme: str
) -> None:
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed at {AXE}: run `make browser`")
    context = browser.new_context(
        viewport={"width": 375, "height": 800}, color_scheme=scheme, base_url=live.url
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        PAGES[name](page)
        assert overflow(page) <= 0, f"{name} is {overflow(page)} px wider than a 375 px phone"
        violations = axe_violations(page)
        assert violations == [], json.dumps(violations, indent=1)
        page.screenshot(path=str(shots / f"phone-{name}-{scheme}.png"), full_page=True)
        page.set_viewport_size({"width": 320, "height": 800})
        assert overflow(page) <= 0, f"{name} is {overflow(page)} px wider than a 320 px screen"
    finally:
        context.close()
    assert not errors, errors


def test_the_theme_toggle_is_remembered(browser: Browser, live: Server) -> None:
    context = browser.new_context(color_scheme="light", base_url=live.url)
    page = context.new_page()
    try:
        page.goto("/")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        page.get_by_role("button", name="Switch to the dark theme").click()
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        page.goto("/progress")
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") != background
        page.get_by_role("button", name="Switch to the light theme").click()
        page.reload()
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == background
    finally:
        context.close()


def test_the_theme_button_follows_the_system_while_the_page_is_open(
    browser: Browser, live: Server
) -> None:
    """With no theme chosen here, the page follows the system's scheme, even as it changes; the
    button's words went on offering "Dark theme" on a page already dark."""
    context = browser.new_context(color_scheme="light", base_url=live.url)
    page = context.new_page()
    try:
        page.goto("/")
        assert page.get_by_role("button", name="Switch to the dark theme").is_visible()
        page.emulate_media(color_scheme="dark")
        assert (
            page.get_by_role("button", name="Switch to the light theme").inner_text()
            == "Light theme"
        )
    finally:
        context.close()


def test_choices_by_key_and_focus_on_the_verdict(browser: Browser, live: Server) -> None:
    context = browser.new_context(base_url=live.url)
    page = context.new_page()
    try:
        page.goto(f"/questions/{MC}")
        page.keyboard.press("2")
        second = page.locator("input[name=choice]").nth(1)
        expect(second).to_be_checked()
        expect(second).to_be_focused()
        page.keyboard.press("a")
        expect(page.locator("input[name=choice]").first).to_be_checked()
        page.keyboard.press("Control+Enter")
        verdict = page.locator("#result .verdict-title")
        expect(verdict).to_be_focused()
        assert re.search(r"attempt=\d+", page.url)
        assert (
            verdict.evaluate("e => getComputedStyle(e).outlineStyle") != "none"
        )  # answered by keys: the ring shows where
    finally:
        context.close()


def test_an_answer_given_by_a_tap_lands_on_the_verdict_without_a_ring(
    browser: Browser, live: Server
) -> None:
    """The verdict takes the focus (for a screen reader); after a tap Chromium still drew its focus
    ring, which looked like a selection gone wrong on a phone (a newcomer's walk)."""
    context = browser.new_context(
        viewport={"width": 375, "height": 740}, base_url=live.url, has_touch=True, is_mobile=True
    )
    page = context.new_page()
    try:
        page.goto(f"/questions/{MC}")
        page.locator("label.choice").first.tap()
        page.get_by_role("button", name="Check answer").tap()
        verdict = page.locator("#result .verdict-title")
        expect(verdict).to_be_focused()
        assert verdict.evaluate("e => getComputedStyle(e).outlineStyle") == "none"
    finally:
        context.close()


def test_the_api_docs_work_under_the_csp(browser: Browser, live: Server) -> None:
    context = browser.new_context(base_url=live.url)
    page = context.new_page()
    refused: list[str] = []
    page.on(
        "console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None
    )
    try:
        page.goto("/docs")
        expect(page.locator(".opblock").first).to_be_visible()
        expect(page.get_by_text("/api/questions/{question_id}/attempts").first).to_be_visible()
    finally:
        context.close()
    assert refused == []


def test_an_empty_answer_is_refused_where_a_learner_on_a_phone_sees_it(
    browser: Browser, live: Server
) -> None:
    """ "Type what you think it prints first." came back with the page scrolled to the top, the
    message a screen below the code on a phone: the learner saw the question again and nothing
    else. It is in view now, and nothing was recorded."""
    context = browser.new_context(viewport={"width": 375, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        page.goto(f"/questions/{PO}")
        page.get_by_role("button", name="Check answer").click()
        message = page.get_by_role("alert").filter(has_text="Type what you think it prints first.")
        expect(message).to_be_in_viewport()
        expect(page.locator("#result")).to_have_count(0)
    finally:
        context.close()


def test_the_op_trace_shows_each_ops_dtype_on_a_phone(
    browser: Browser, live: Server, shots: Path
) -> None:
    """As a table, only the line and the op fitted 375 px: the dtype each op made, the point of
    the trace, was a swipe away (and at 320 px gone). Each op is a card now, all of it in view."""
    context = browser.new_context(viewport={"width": 320, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        answered(page, PO, lambda p: p.get_by_label("What does it print?").fill("torch.float32"))
        made = page.locator("table.trace td[data-label=made]").first
        expect(made).to_be_visible()
        box = made.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 320, box
        assert page.evaluate("document.documentElement.scrollWidth") <= 320
        made.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "phone-op-trace.png"))
    finally:
        context.close()


def test_a_wrapped_code_line_hangs_under_its_own_text_on_a_phone(
    browser: Browser, live: Server
) -> None:
    """On a phone a long code line wraps; its continuation started at column 0, so inside an `if`
    it read as a statement outside it (a newcomer's walk). It now starts deeper than the line's own
    indentation (the class `i8`: indented by 8 spaces, set by the server's highlighting)."""
    from app.web.rendering.code_html import highlight

    line = "        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)"
    assert '<span id="L-2" class="i8">' in highlight("if True:\n" + line + "\n")
    context = browser.new_context(viewport={"width": 320, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        page.goto(f"/questions/{PO}")
        first, last = page.evaluate(
            """line => {
                const span = document.getElementById("L-1");
                span.className = "i8";
                span.textContent = line;
                const range = document.createRange();
                range.selectNodeContents(span);
                const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
                const code = document.createRange();
                code.setStart(span.firstChild, 8);  // where the line's own text starts
                code.setEnd(span.firstChild, 9);
                return [code.getBoundingClientRect().left, rects[rects.length - 1].left];
            }""",
            line,
        )
        assert last > first, (first, last)  # the continuation hangs deeper than `opt`
    finally:
        context.close()


def test_a_wrapped_code_line_breaks_between_names_not_inside_one_on_a_phone(
    browser: Browser, live: Server
) -> None:
    """A dotted call is one word to the browser: on a phone it moved whole under the line's number,
    which stood alone on its row, then broke inside a name (`model.weig` / `ht.grad`), a newcomer's
    walk. It now breaks after a dot, a bracket or a comma, starting on the number's row."""
    from app.web.rendering.code_html import highlight

    line = "print(torch.count_nonzero(model.weight.grad).item(), torch.count_nonzero(model.bias.grad).item())"
    html = str(highlight(line + "\n"))
    inner = html[
        html.index('<span id="L-1">') + len('<span id="L-1">') : html.rindex("</span></code>")
    ]
    context = browser.new_context(viewport={"width": 320, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        page.goto(f"/questions/{PO}")
        rows = page.evaluate(
            """inner => {
                const span = document.getElementById("L-1");
                span.className = "";
                span.innerHTML = inner;
                const rows = new Map();
                const walker = document.createTreeWalker(span, NodeFilter.SHOW_TEXT);
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    for (let i = 0; i < node.length; i++) {
                        const range = document.createRange();
                        range.setStart(node, i);
                        range.setEnd(node, i + 1);
                        const rect = range.getBoundingClientRect();
                        if (rect.width === 0) continue;
                        const top = Math.round(rect.top);
                        rows.set(top, (rows.get(top) || "") + node.data[i]);
                    }
                }
                const numberTop = Math.round(span.getBoundingClientRect().top);
                return [...rows.entries()].sort((a, b) => a[0] - b[0]).map(([top, text]) => [top - numberTop, text]);
            }""",
            inner,
        )
        assert len(rows) > 1, rows  # it does wrap at this width
        assert abs(rows[0][0]) < 8 and rows[0][1].startswith("print("), rows  # on the number's row
        for (_, row), (_, following) in itertools.pairwise(rows):
            assert row.rstrip()[-1] in ".(,[" and following.lstrip()[0].isalpha(), (
                rows
            )  # between names
        assert "".join(text for _, text in rows) == line
    finally:
        context.close()


def test_progress_shows_every_column_and_each_result_on_a_phone(
    browser: Browser, live: Server
) -> None:
    """As tables, "By topic" showed a phone only the topic and its count of questions, and
    "History" left whether each attempt was right a swipe away (a newcomer's walk): a card each now."""
    context = browser.new_context(viewport={"width": 375, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        answered(page, PO, lambda p: p.get_by_label("What does it print?").fill("torch.float32"))
        page.goto("/progress")
        for cell in ("table.topics-table td[data-label=Accuracy]", "table.history td.result"):
            box = page.locator(cell).first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, (cell, box)
        expect(page.locator("table.history td.result").first).to_contain_text("wrong")
    finally:
        context.close()


def test_output_wider_than_a_phone_can_be_wrapped(
    browser: Browser, live: Server, shots: Path
) -> None:
    """On a phone a run's output was cut at the box's right edge, with nothing to say it scrolls
    sideways (a newcomer's walk). Output wider than its box gets a button that wraps its lines;
    output that fits gets none."""
    context = browser.new_context(viewport={"width": 375, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        page.goto("/run")
        page.locator("#code").fill(
            'print("short")\nprint("a message long enough to run past the right edge of any phone screen " * 2)'
        )
        page.get_by_role("button", name="Run").click()
        out = page.locator("#run-panel pre.out.stdout")
        expect(out).to_contain_text("short")
        wrap = page.locator("#run-panel").get_by_role("button", name="Wrap long lines")
        expect(wrap).to_have_attribute("aria-pressed", "false")
        assert out.evaluate("e => e.scrollWidth > e.clientWidth")
        wrap.click()
        expect(wrap).to_have_attribute("aria-pressed", "true")
        assert out.evaluate("e => e.scrollWidth <= e.clientWidth")
        page.screenshot(path=str(shots / "phone-output-wrapped.png"))
        page.locator("#code").fill('print("short")')
        page.get_by_role("button", name="Run").click()
        expect(page.locator("#run-panel pre.out.stdout")).to_have_text("short\n")
        expect(
            page.locator("#run-panel").get_by_role("button", name="Wrap long lines")
        ).to_have_count(0)
    finally:
        context.close()


def test_an_answer_sent_too_fast_says_when_and_counts_down(browser: Browser, live: Server) -> None:
    """Past the answers per minute, the question comes back (429) with how long to wait, counted
    down; the button holds the answer until then (the server would refuse it again), and then it
    goes. The wait did not count down before: a learner could not tell when to try."""
    context = browser.new_context(viewport={"width": 375, "height": 740}, base_url=live.url)
    page = context.new_page()
    try:
        page.goto(f"/questions/{PO}")
        page.clock.install()
        page.clock.pause_at(
            page.evaluate("Date.now()") + 1000
        )  # from here the pages' clock moves when the test moves it
        for _ in range(60):  # a learner's bucket (AMPQUIZ_ANSWERS_PER_MINUTE, 60), spent at once
            # the first is stored; the rest, with its key shown, are practice (graded, not stored): all count
            assert page.request.post(
                f"/questions/{PO}", form={"output": "x"}, max_redirects=0
            ).status in (200, 303)
        page.goto(f"/questions/{PO}")
        page.get_by_label("What does it print?").fill("torch.float16")
        page.get_by_role("button", name="Check answer").click()
        expect(page.locator("[data-retry-after]")).to_contain_text("You can send it again in 1 s.")
        button = page.get_by_role("button", name="Check answer")
        expect(button).to_have_attribute("aria-disabled", "true")
        refused_at = time.monotonic()
        button.click(
            force=True
        )  # a tap all the same (Playwright waits out aria-disabled): held back
        expect(page.locator("[data-retry-after]")).to_contain_text("You can send it again in 1 s.")
        page.clock.run_for(1500)
        expect(
            page.get_by_role("status").filter(has_text="You can send your answer again now.")
        ).to_be_visible()
        page.wait_for_timeout(
            max(0, 1100 - 1000 * (time.monotonic() - refused_at))
        )  # the server's own second
        expect(button).not_to_have_attribute("aria-disabled", "true")
        expect(page.locator("#answer .notice.error")).to_have_count(
            0
        )  # its "wait 1 s" no longer true
        expect(page.get_by_label("What does it print?")).to_have_value(
            "torch.float16"
        )  # what was typed, kept
        button.click()
        expect(page.locator("#result")).to_be_visible()
    finally:
        context.close()


def test_history_times_are_the_readers_and_the_heading_says_so(
    browser: Browser, live: Server
) -> None:
    """The progress page's times are turned into the reader's zone; the column said "(UTC)" over them."""
    context = browser.new_context(
        viewport={"width": 1000, "height": 800}, base_url=live.url, timezone_id="America/New_York"
    )
    page = context.new_page()
    try:
        answered(page, PO, lambda p: p.get_by_label("What does it print?").fill("torch.float32"))
        page.goto("/progress")
        heading = page.locator("th", has_text="When")
        expect(heading).to_have_text("When (your time)")
        shown = page.locator("td.when time").first
        at = shown.get_attribute("datetime")
        assert at is not None and "UTC" not in shown.inner_text()
        local = page.evaluate("iso => { const d = new Date(iso); return d.getHours(); }", at)
        assert f" {local:02d}:" in shown.inner_text()
    finally:
        context.close()
