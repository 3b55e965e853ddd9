"""Pages that stay the same size whatever the bank or the learner's history holds: the home page
lists the sets a page at a time, the progress page the first reviews and the newest attempts
(saying how many more there are), and the busiest pages refuse bad parameters as before."""

from __future__ import annotations

import re

import pytest

from tests.support.web import Web, form_at

pytestmark = pytest.mark.anyio

SETS = 30


def add_sets(web: Web, n: int = SETS) -> list[str]:
    """`n` more sets of one conceptual question each (no code: graded at once); their ids."""
    ids = []
    for i in range(n):
        qid = f"concept-{i:02d}"
        (web.bank / f"many-{i:02d}.yaml").write_text(f"""\
title: Many sets {i:02d}
description: One of many sets.
questions:
  - id: {qid}
    kind: multiple_choice
    topic: topic-{i % 3}
    difficulty: 1
    prompt: Which one?
    choices:
      - {{text: the right one, correct: true, why: "Right."}}
      - {{text: the wrong one, correct: false, why: "Wrong."}}
    explanation: Because.
    source: tests
""")
        ids.append(qid)
    return ids


def set_cards(html: str) -> list[str]:
    return re.findall(r'<article class="card set-card">\s*<h3><a href="/sets/([\w-]+)"', html)


async def test_home_shows_the_sets_a_page_at_a_time(web: Web) -> None:
    add_sets(web)
    async with web.client() as c:
        total = SETS + 1  # and the test bank's own "basics" (its broken file is left out)
        first = (await c.get("/")).text
        assert len(set_cards(first)) == 24 and f"1–24 of {total}" in first
        assert 'href="/?page=2#sets"' in first and "Previous sets" not in first
        second = (await c.get("/?page=2")).text
        assert len(set_cards(second)) == total - 24 and 'href="/?page=1#sets"' in second
        assert not set(set_cards(first)) & set(set_cards(second))
        assert "topic-0" in second  # the topics table still covers the whole bank
        assert (await c.get("/?page=3")).status_code == 404
        assert (await c.get("/?page=two")).status_code == 422


async def test_progress_shows_the_first_reviews_and_newest_attempts_and_counts_the_rest(
    web: Web,
) -> None:
    ids = add_sets(web, 25)
    async with web.client() as c:
        for qid in ids:
            # The choices are shuffled per learner, and a form sends a position: find the wrong one.
            shown = (await c.get(f"/api/questions/{qid}")).json()["choices"]
            wrong = next(str(ch["index"]) for ch in shown if ch["text"] == "the wrong one")
            assert (await c.post(f"/questions/{qid}", data={"choice": wrong})).status_code == 303
        web.clock.advance(hours=1)
        page = (await c.get("/progress")).text
        due = re.findall(r'<li class="due"><a href="/questions/(concept-\d+)"', page)
        assert len(due) == 20 and "and 5 more due now" in page
        assert "Review now: 25 due" in page
        assert "your newest 20 of 25 attempts" in page
        history = re.findall(r'href="/questions/(concept-\d+)\?attempt=\d+#result"', page)
        assert history == ids[::-1][:20]  # newest first


async def test_the_busiest_pages_refuse_bad_parameters(web: Web) -> None:
    async with web.client() as c:
        # A link's bad query shows the question without it (test_pages.py): nothing read for it.
        for query in ("attempt=first", "review=12a", f"attempt={'9' * 30}"):
            page = await c.get(f"/questions/mc-half-dtype?{query}")
            assert (
                page.status_code == 200
                and 'id="result"' not in page.text
                and "Review session" not in page.text
            ), query
        bad_time = await c.post(
            "/questions/mc-half-dtype",
            data={"choice": await form_at(c, "mc-half-dtype", 0), "shown_at": "soon"},
        )
        assert bad_time.status_code == 422 and "shown_at" in bad_time.text
        # Every attempt is stored: 10,000 characters each let one client grow the database 4 MB/s.
        # The page refuses one too long on the question itself, the text kept (test_pages.py).
        too_long = await c.post("/questions/po-linear-dtype", data={"output": "x" * 2_001})
        assert too_long.status_code == 400 and "the most it may be is 2,000" in too_long.text
        assert len(c.app.state.web.store.all_attempts()) == 0  # type: ignore[attr-defined]
        api_too_long = await c.post(
            "/api/questions/po-linear-dtype/attempts?run=false", json={"output": "x" * 2_001}
        )
        assert api_too_long.status_code == 422
        assert 'maxlength="2000"' in (await c.get("/questions/po-linear-dtype")).text
        assert (await c.post("/questions/mc-half-dtype", data={"choice": "A"})).status_code == 422
        # Empty fields count as absent, as they did: an answer still goes through.
        ok = await c.post(
            "/questions/mc-half-dtype",
            data={"choice": await form_at(c, "mc-half-dtype", 0), "shown_at": "", "review": ""},
        )
        assert ok.status_code == 303
