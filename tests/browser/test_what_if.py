"""The "What if…" cards in real Chromium: after a wrong answer to a GradScaler training-loop
question, each classic mistake applied to its code, with the diff and what it printed, read from
the mutant record. On a desktop and on a 375 px phone (no sideways scrolling), light and dark,
with no axe-core violation. Screenshots: tests/output/what-if.png and what-if-phone-*.png."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from app.mutate.run import Snippet, run_mutants
from app.verify.record import write_mutant_record
from sandbox import Sandbox
from tests.support.cli import REPO
from tests.support.server import Server
from tests.support.web import commit_record

pytestmark = pytest.mark.browser

AXE = REPO / "tests" / "browser" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
QID = "training-step-with-scaler"
CODE = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(8, 4), torch.randn(8, 2)
for step in range(3):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    loss = nn.functional.mse_loss(out.float(), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
print(out.dtype, loss.dtype, round(norm.item()), scaler.get_scale())
"""


def write_bank(folder: Path, answer: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "what-if.yaml").write_text(
        "title: What if demo\ndescription: One training loop with a GradScaler.\nquestions:\n"
        f"  - id: {QID}\n    kind: predict_output\n    topic: gradscaler\n    difficulty: 2\n"
        "    prompt: What does this training loop print?\n"
        "    code: |\n" + textwrap.indent(CODE, "      ")
        + f"    requires: cpu\n    answer: {json.dumps(answer)}\n"
        "    explanation: Autocast makes the linear float16; the loss is float32; no step overflowed.\n"
        "    source: tests\n"
    )  # fmt: skip
    return folder


@pytest.fixture
def live(tmp_path: Path, sandbox_pool: Sandbox) -> Server:
    """A server whose bank has one question, its verification record and its mutant record."""
    printed = sandbox_pool.run(CODE).stdout.strip()
    bank = write_bank(tmp_path / "bank", printed)
    commit_record(bank, sandbox_pool.environment, [QID])
    (report,) = run_mutants([Snippet(CODE)], sandbox_pool)
    write_mutant_record(
        bank, sandbox_pool.environment, {QID: report.record_entry()}, records=[], partial=False
    )
    server = Server(tmp_path, bank=bank)
    server.start()
    yield server
    server.stop()


def answer_wrong(page: Page, url: str) -> None:
    page.goto(f"{url}/questions/{QID}")
    page.get_by_label("What does it print?").fill("torch.float32 torch.float32 1 65536.0")
    page.get_by_role("button", name="Check answer").click()
    expect(page.locator("#result")).to_contain_text("Not quite")


def overflow(page: Page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_what_if_cards_after_an_answer(
    live: Server, page: Page, browser: Browser, shots: Path
) -> None:
    answer_wrong(page, live.url)
    cards = page.locator("#what-if .what-if-card")
    expect(page.get_by_role("heading", level=2, name="What if…")).to_be_visible()
    assert cards.count() >= 10
    drop_scale = page.locator('#what-if [data-rule="drop-scale"]')
    expect(drop_scale).to_contain_text(
        "What if you call backward() on the loss without scaler.scale()?"
    )
    expect(drop_scale.locator(".d-del")).to_have_text("-    scaler.scale(loss).backward()")
    expect(drop_scale.locator(".d-add")).to_have_text("+    loss.backward()")
    expect(drop_scale.locator(".exception")).to_contain_text(
        "AssertionError at line 15: Attempted unscale_ but _scale is None"
    )
    clip = page.locator('[data-rule="clip-before-unscale"]')
    expect(clip.locator(".chip")).to_have_text("changes what it does")
    backward = page.locator('[data-rule="backward-inside-autocast"]')
    expect(backward.locator(".chip")).to_have_text("no visible effect")
    # the first two cards that change what the code does are open; the rest show their titles
    expect(cards.nth(0).locator(".what-if-diff")).to_be_visible()
    expect(cards.nth(1).locator(".what-if-diff")).to_be_visible()
    expect(backward.locator(".what-if-diff")).to_be_hidden()
    backward.locator("summary h3").click()
    expect(backward.locator(".what-if-diff")).to_be_visible()
    backward.get_by_text("Why engineers make this mistake").click()
    expect(backward).to_contain_text("The docs recommend autocast around the forward pass")
    page.locator("#what-if").screenshot(path=str(shots / "what-if.png"))

    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 375, "height": 800}, color_scheme=scheme)
        phone = context.new_page()
        try:
            answer_wrong(phone, live.url)
            expect(phone.locator("#what-if .what-if-card").first).to_be_visible()
            assert overflow(phone) <= 0, f"{overflow(phone)} px wider than a 375 px phone"
            phone.evaluate(AXE.read_text())
            violations = phone.evaluate("axe.run(document, {resultTypes: ['violations']})")[
                "violations"
            ]
            assert violations == [], json.dumps(
                [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in violations]
            )
            phone.locator("#what-if").screenshot(path=str(shots / f"what-if-phone-{scheme}.png"))
            phone.set_viewport_size({"width": 320, "height": 800})
            assert overflow(phone) <= 0, f"{overflow(phone)} px wider than a 320 px screen"
        finally:
            context.close()
