"""The "What if…" cards on a question page, after an answer: from the record only, escaped, and
gone when the question's code changed since."""

from __future__ import annotations

import json
import re

import pytest

from app.bank.load import load_bank
from app.mutate.run import Snippet, run_mutants
from app.verify.record import load_mutant_records, mutants_dir, write_mutant_record
from sandbox import Sandbox
from tests.support.web import Web

pytestmark = pytest.mark.anyio

QID = "po-linear-dtype"  # the web tests' bank: a Linear under CPU autocast


def record_mutants(web: Web, pool: Sandbox) -> dict:
    loaded = load_bank(web.bank).question(QID)
    assert loaded is not None and loaded.question.code
    (report,) = run_mutants([Snippet(loaded.question.code)], pool)
    entry = report.record_entry()
    write_mutant_record(web.bank, pool.environment, {QID: entry}, records=[], partial=False)
    return entry


def unstamp_records(web: Web) -> None:
    """The web bank's mutant records as an earlier version wrote them: without the rules' version."""
    for path in mutants_dir(web.bank).glob("*.json"):
        data = json.loads(path.read_text())
        for entry in data["questions"].values():
            entry.pop("rules", None)
        path.write_text(json.dumps(data))


async def answered_page(web: Web) -> str:
    async with web.client() as c:
        before = (await c.get(f"/questions/{QID}")).text
        assert 'id="what-if"' not in before  # nothing is revealed before an answer
        r = await c.post(f"/questions/{QID}", data={"output": "torch.float32"})
        return (await c.get(r.headers["location"])).text


def section(page: str) -> str:
    found = re.search(r'<section class="what-if".*?</section>', page, re.DOTALL)
    assert found, "no What if… section"
    return found.group(0)


async def test_cards_show_each_recorded_mistake_with_its_diff_and_output(
    web: Web, sandbox_pool: Sandbox
) -> None:
    entry = record_mutants(web, sandbox_pool)
    cards = section(await answered_page(web))
    rules = re.findall(r'data-rule="([\w-]+)"', cards)
    assert sorted(rules) == sorted(m["rule"] for m in entry["mutants"])
    assert {"drop-autocast", "swap-autocast-dtype", "swap-autocast-device"} <= set(rules)
    # the diff is code, escaped: quotes as entities, each line in its own span
    lines = cards.replace("<wbr>", "")  # where a phone may wrap a line (after a dot or a bracket)
    assert '<span class="d-del">-with torch.autocast(&#34;cpu&#34;):</span>' in lines
    assert '<span class="d-add">+with torch.autocast(&#34;cuda&#34;):</span>' in lines
    assert "What if you leave out the <code>autocast</code> context (keeping its body)?" in cards
    assert "torch.float32 torch.Size([1, 2])" in cards  # what the mutant without autocast printed
    assert "changes what it does" in cards
    assert "run on CPU · torch " in cards


async def test_recorded_text_is_escaped(web: Web, sandbox_pool: Sandbox) -> None:
    record_mutants(web, sandbox_pool)
    (path,) = mutants_dir(web.bank).glob("*.json")
    data = json.loads(path.read_text())
    data["questions"][QID]["mutants"][0]["run"]["stdout"] = '<script>alert("x")</script>\n'
    data["questions"][QID]["mutants"][0]["diff"] += "\n+<img src=x onerror=alert(1)>"
    path.write_text(json.dumps(data))
    cards = section(await answered_page(web))
    assert (
        "<script>alert" not in cards and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in cards
    )
    assert "<img" not in cards and "&lt;img src=x onerror=alert(1)&gt;" in cards.replace(
        "<wbr>", ""
    )


async def test_no_record_no_cards(web: Web) -> None:
    page = await answered_page(web)
    assert 'id="what-if"' not in page and "Not quite" in page


async def test_a_question_changed_since_its_record_shows_no_cards(
    web: Web, sandbox_pool: Sandbox
) -> None:
    record_mutants(web, sandbox_pool)
    path = web.bank / "basics.yaml"
    path.write_text(
        path.read_text().replace("y = layer(torch.ones(1, 4))", "y = layer(torch.ones(1, 4) * 1)")
    )
    loaded = load_bank(web.bank).question(QID)
    assert loaded is not None and "* 1" in (loaded.question.code or "")
    assert load_mutant_records(web.bank)  # the record is still there, only stale
    page = await answered_page(web)
    assert 'id="what-if"' not in page and "Not quite" in page


async def test_health_is_answered_while_the_cards_are_first_made(web: Web, sandbox_pool: Sandbox,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The cards' first making in a process applies every mutation rule to the code (tens of ms
    for one question, once per question and process): the event loop keeps answering meanwhile.
    The rules wait, wherever they run, until a /healthz asked after they began has been answered:
    on the event loop that answer could never come (the wait gives up after 60 s: the test fails)."""
    import asyncio
    import threading

    from app.mutate import cards as cards_module

    record_mutants(web, sandbox_pool)
    unstamp_records(web)  # made before the rules' version was kept: the rules run on first view
    making, health_answered = threading.Event(), threading.Event()
    answered_mid_making: list[bool] = []
    mutants_of = cards_module.mutants_of

    def mutants_once_health_is_answered(code: str):  # type: ignore[no-untyped-def]
        making.set()
        answered_mid_making.append(health_answered.wait(60))
        return mutants_of(code)

    monkeypatch.setattr(cards_module, "mutants_of", mutants_once_health_is_answered)
    async with web.client() as c:
        r = await c.post(f"/questions/{QID}", data={"output": "torch.float32"})

        async def ping_mid_making() -> None:
            await asyncio.to_thread(making.wait, 60)
            assert (await c.get("/healthz")).status_code == 200
            health_answered.set()

        page, _ = await asyncio.gather(c.get(r.headers["location"]), ping_mid_making())
    assert answered_mid_making == [True], "/healthz was not answered while the cards were made"
    assert 'data-rule="drop-autocast"' in section(page.text)
