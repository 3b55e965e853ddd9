"""The instructor's studio in real Chromium: sign in with a one-time link; see a planted failing
question and a planted broken file; create a question, run it, take its output as the answer,
preview it, save it; a learner then answers it; the saved file lints and keeps its comments. A
learner cannot open any studio page or API."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from playwright.sync_api import Browser, expect

from tests.support.browser import reload_until_open
from tests.support.cli import REPO, ampquiz
from tests.support.planted import wrong_key_set
from tests.support.server import BANK, Server

WRONG_KEY = wrong_key_set("planted-wrong-key")
AXE = REPO / "tests" / "browser" / "axe" / "node_modules" / "axe-core" / "axe.min.js"

BROKEN = """\
title: Broken
description: Half written.
questions:
  - id: half-written
    kind: predict_output
"""


def _studio(folder: Path) -> Iterator[tuple[Server, Path]]:
    bank = folder / "bank"
    shutil.copytree(BANK, bank)
    demo = bank / "amp-demo.yaml"
    demo.write_text(
        "# The demo set: this comment must survive a save from the studio.\n" + demo.read_text()
    )
    (bank / "planted.yaml").write_text(WRONG_KEY)
    (bank / "broken.yaml").write_text(BROKEN)
    server = Server(folder, bank=bank)
    server.start()
    try:
        yield server, bank
    finally:
        server.stop()


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    yield from _studio(tmp_path)


@pytest.fixture(scope="module")
def shared_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One server for the tests that need no fresh one: a learner refused everywhere reads and
    writes nothing the mistakes test reads (a server start is seconds)."""
    yield from _studio(tmp_path_factory.mktemp("studio"))


def test_an_instructor_authors_a_question_a_learner_then_answers(
    browser: Browser, studio: tuple[Server, Path], shots: Path
) -> None:
    server, bank = studio
    link = server.instructor_link("ada")
    assert link.startswith(server.url + "/studio/sign-in/")
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()

    page.goto(link)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Bank status")).to_be_visible()
    planted = page.locator('tr[data-question="planted-wrong-key"]')
    expect(planted.locator(".proof-chip")).to_have_text(
        "held back", timeout=30_000
    )  # proved wrong on load
    expect(planted).to_contain_text("65504")  # the run's own output, in the diff
    # A fold per set file: the one with a key to look at open, the rest one line each (as one
    # table, the real bank was 44,000 px high on a phone).
    expect(page.locator("details.studio-set", has_text="planted.yaml")).to_have_attribute(
        "open", ""
    )
    expect(page.locator("details.studio-set", has_text="amp-demo.yaml")).not_to_have_attribute(
        "open", ""
    )
    expect(page.locator("li.problem").first).to_contain_text("broken.yaml:")
    expect(page.locator("li.problem").first).to_contain_text("half-written")
    expect(page.get_by_role("alert")).to_contain_text("broken.yaml")  # the banner
    page.screenshot(path=str(shots / "studio-status.png"), full_page=True)
    # a question's file:line opens the editor there (it opened at line 1)
    at = planted.get_by_role("link", name=re.compile(r"planted\.yaml:\d+"))
    line_number = int(at.inner_text().rsplit(":", 1)[1])
    at.click()
    expect(page.locator("#cursor-at")).to_have_text(f"Line {line_number}, column 1")

    # a new question in the demo set: run it, take its output as the answer, preview, save
    page.goto("/studio/edit/amp-demo.yaml?new=studio-made")
    expect(page.locator("#question")).to_have_value("studio-made")
    expect(page.locator("#problems")).to_contain_text("source")  # lint: an empty source is refused
    # The textarea has no line numbers: a problem's line:column takes the cursor there.
    go = page.locator("#problems li", has_text="source").get_by_role("button")
    line, col = (int(n) for n in go.inner_text().split(":"))
    go.click()
    expect(page.locator("#cursor-at")).to_have_text(f"Line {line}, column {col}")
    yaml = page.locator("#yaml")
    assert yaml.evaluate("a => a.value.slice(0, a.selectionStart).split('\\n').length") == line
    assert yaml.evaluate("a => document.activeElement === a")
    # A file that does not load has nothing to preview: said here (it opened a learner's 422 page
    # in a new tab, "question_id: Field required").
    pages_before = len(context.pages)
    page.get_by_role("button", name="Preview", exact=True).click()
    expect(page.locator("#studio-run")).to_contain_text("Fix the file's problems first (")
    assert len(context.pages) == pages_before
    # The starter's explanation is left to write too: until it is, the file stays out of the bank.
    expect(page.locator("#problems")).to_contain_text(
        "explanation: still the studio's starter text"
    )
    yaml.fill(
        yaml.input_value()
        .replace("source: ''", "source: docs for autocast")
        .replace(
            "explanation: Why it prints what it prints.", "explanation: Linear runs in bfloat16."
        )
    )
    # What is left is the answer, which no learner could type empty: taken from a run, below.
    expect(page.locator("#problems")).to_have_text(
        re.compile(r"^\d+:\d+: \[studio-made\] answer: is empty: run the code and use its output")
    )
    # Leaving with an unsaved edit asks first (a reload or a tapped link lost it without a word):
    # declined, the page and the edit stay.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.type), dialog.dismiss()))
    page.locator(".studio-nav").get_by_role("link", name="Bank status").click()
    expect(yaml).to_have_value(re.compile("source: docs for autocast"))
    assert asked == ["beforeunload"] and page.url.endswith(
        "/studio/edit/amp-demo.yaml?new=studio-made"
    )
    page.get_by_role("button", name="Run it").click()
    expect(page.locator("#studio-run .run pre.stdout")).to_have_text("torch.bfloat16\n")
    verdict = page.locator("#studio-run > p.notice").first
    expect(verdict).to_contain_text(
        "not checked until the file's problems are fixed"
    )  # no answer yet to check
    page.get_by_role("button", name="Use this output as the answer").click()
    expect(yaml).to_have_value(re.compile(r"answer: '?torch\.bfloat16'?\n"))
    expect(page.locator("#problems")).to_contain_text("No problems.")
    # That verdict was about the file as it was run: it no longer stands in red beside the new key.
    expect(verdict).to_have_text("The answer is now this run's output.")
    expect(verdict).not_to_have_class(re.compile(r"\berror\b"))
    with page.expect_popup() as before:
        page.get_by_role("button", name="Preview", exact=True).click()
    preview = before.value
    expect(preview.locator(".notice", has_text="Preview from the studio")).to_be_visible()
    expect(preview.get_by_label("What does it print?")).to_be_visible()
    preview.close()
    with page.expect_popup() as after:
        page.get_by_role("button", name="Preview after answering").click()
    expect(after.value.locator("#result")).to_contain_text("Right!")
    after.value.close()
    page.screenshot(path=str(shots / "studio-editor.png"), full_page=True)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-result")).to_contain_text("Saved amp-demo.yaml.")
    page.locator(".studio-nav").get_by_role(
        "link", name="Bank status"
    ).click()  # saved: leaves without asking
    expect(page.get_by_role("heading", name="Bank status")).to_be_visible()
    assert asked == ["beforeunload"]
    context.close()

    saved = (bank / "amp-demo.yaml").read_text()
    assert saved.startswith("# The demo set: this comment must survive a save from the studio.\n")
    lint = ampquiz("lint", str(bank / "amp-demo.yaml"))
    assert lint.returncode == 0, lint.stdout

    # a learner answers the new question on the learner pages
    learner = browser.new_context(base_url=server.url)
    learner.set_default_timeout(30_000)
    lp = learner.new_page()
    lp.goto("/questions/studio-made")
    reload_until_open(
        lp, "What does it print?", waiting="being checked"
    )  # served at once, then proved
    expect(lp.get_by_label("What does it print?")).to_be_visible()
    lp.get_by_label("What does it print?").fill("torch.bfloat16")
    lp.get_by_role("button", name="Check answer").click()
    expect(lp.locator("#result")).to_contain_text("Right!")
    for path in ("/studio", "/studio/stats", "/studio/edit/amp-demo.yaml", "/studio/attempts.csv"):
        response = lp.goto(path)
        assert response is not None and response.status == 403, path
    learner.close()


def test_a_learner_cannot_use_the_studio_api(shared_studio: tuple[Server, Path]) -> None:
    server, _ = shared_studio
    with httpx.Client(base_url=server.url, timeout=30) as c:
        c.get("/")  # a learner's cookie
        for path, body in [("/studio/api/check", {"name": "x.yaml", "text": ""}),
                           ("/studio/api/save", {"name": "amp-demo.yaml", "text": "title: x"}),
                           ("/studio/api/run", {"name": "x.yaml", "text": "", "question_id": "x"}),
                           ("/studio/api/distractors", {"name": "x.yaml", "text": "", "question_id": "x"}),
                           ("/studio/api/add-choice", {"text": "", "question_id": "x", "choice_text": "x", "why": "x"})]:  # fmt: skip
            r = c.post(path, json=body)
            assert r.status_code == 403 and r.json()["ok"] is False, path
        spent = server.instructor_link("bob").rsplit("/", 1)[1]
        assert c.post(f"/studio/sign-in/{spent}").status_code == 303
        again = c.post(f"/studio/sign-in/{spent}")
        assert again.status_code == 403 and "works once" in again.text  # a link works once


def test_a_classic_mistake_becomes_a_choice_with_one_click(
    browser: Browser, shared_studio: tuple[Server, Path], shots: Path
) -> None:
    """ "Mistakes as choices" runs each classic mistake on the question's code as edited, lists one
    wrong choice per distinct outcome, and "Add as choice" puts one under `choices:`, saved with
    the file's comment kept and linting clean."""
    server, bank = shared_studio
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(server.instructor_link("ada"))
    page.get_by_role("button", name="Sign in").click()
    page.goto("/studio/edit/amp-demo.yaml")
    expect(page.locator("#problems")).to_contain_text("No problems.")
    # a predict-the-output question: its mistakes are shown, but it has no choices to add them to
    page.locator("#question").select_option("linear-dtype-under-autocast")
    page.get_by_role("button", name="Mistakes as choices").click()
    expect(page.locator("#studio-distractors")).to_contain_text(
        "Only a multiple-choice question has choices"
    )
    expect(
        page.locator('#studio-distractors li.distractor[data-rule="drop-autocast"]')
    ).to_contain_text("It prints `torch.float32")
    expect(page.get_by_role("button", name="Add as choice").first).to_be_disabled()

    page.locator("#question").select_option("gradscaler-skips-inf-step")
    page.get_by_role("button", name="Mistakes as choices").click()
    found = page.locator("#studio-distractors li.distractor")
    expect(found.first).to_be_visible()
    assert found.count() >= 2
    dropped = page.locator('#studio-distractors li.distractor[data-rule="drop-scale"]')
    expect(dropped).to_contain_text("It raises `AssertionError`")  # the run's own exception
    expect(dropped).to_contain_text("proved by running that change")
    choice_text = dropped.locator("p").first.inner_text()
    page.evaluate(AXE.read_text())
    violations = page.evaluate("axe.run('#studio-editor', {resultTypes: ['violations']})")[
        "violations"
    ]
    assert violations == [], [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in violations]
    page.screenshot(path=str(shots / "studio-distractors.png"), full_page=True)

    dropped.get_by_role("button", name="Add as choice").click()
    expect(dropped.get_by_role("button", name="Added")).to_be_disabled()
    expect(page.locator("#yaml")).to_have_value(re.compile(re.escape("AssertionError")))
    expect(page.locator("#problems")).to_contain_text("No problems.")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-result")).to_contain_text("Saved amp-demo.yaml.")
    context.close()

    saved = (bank / "amp-demo.yaml").read_text()
    assert saved.startswith("# The demo set: this comment must survive a save from the studio.\n")
    assert ampquiz("lint", str(bank / "amp-demo.yaml")).returncode == 0
    question = next(
        q for q in yaml.safe_load(saved)["questions"] if q["id"] == "gradscaler-skips-inf-step"
    )
    assert len(question["choices"]) == 4
    added = question["choices"][-1]
    assert added["text"] == choice_text and added["correct"] is False
    assert (
        "as if" not in added["text"] and "drop" not in added["text"].lower()
    )  # what it does, not which mistake
    assert added["outcome"]["raises"] == "AssertionError"  # what its run showed, checked by running
    assert "The code as written prints `1.0 32768.0`" in added["why"]
