"""Once-only rules under concurrent requests: two real web processes on one database (SQLite and
PostgreSQL), many requests at the same moment split across both (`tests.support.concurrency`),
and the rule checked in what the database kept.

Each rule here was a read of the state, then a write: requests that all read before any wrote
all wrote (16 requests for more time gave 7 or 8 extensions; a one-time sign-in link opened
several sessions). Each is now one conditional write (a unique key the second write breaks, or
an UPDATE whose WHERE only the first satisfies).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import instructors
from app.interview import model, snippets
from app.interview.live import Hub
from app.store import Store
from app.web.routes.interview import RUNS_PER_QUESTION
from tests.support.concurrency import Pair, at_once, pair_fixture

two_servers = pair_fixture()
"""Two servers on one database, SQLite then PostgreSQL, for every test of the module."""

N = 16
"""Requests sent at once (as many as the attacker's scripts sent)."""
JSON = {"Accept": "application/json"}
"""A note's answer as app.js asks for it (a 200, not the page's 303)."""


def _interview(pair: Pair, questions: int, minutes: int | None = None) -> model.NewInterview:
    """An interview of ad-hoc snippets (snippet n prints n), made in the shared database."""
    made = [snippets.snippet_question(n, f"print({n})\n", f"{n}\n", {"device_kind": "cpu"}, "ada")
            for n in range(1, questions + 1)]  # fmt: skip
    return model.create(pair.store(), made, by="ada", minutes=minutes)  # type: ignore[arg-type]


def _kinds(pair: Pair, made: model.NewInterview) -> list[str]:
    assert made.interview.id is not None
    return [e.kind for e in model.events(pair.store(), made.interview.id)]


def _started(pair: Pair, made: model.NewInterview, *, predicted: bool = False) -> str:
    """The candidate's link, started (and the first question predicted)."""
    cand = f"/interview/{made.candidate_token}"
    with pair.client() as client:
        assert client.post(cand + "/start").status_code == 303
        if predicted:
            said = client.post(cand + "/predict", data={"output": "1", "confidence": "95"})
            assert said.status_code == 303, said.text[-2000:]
    return cand


def test_starting_opens_the_first_question_once(two_servers: Pair) -> None:
    made = _interview(two_servers, 2, minutes=10)
    cand = f"/interview/{made.candidate_token}"
    sent = two_servers.at_once(N, lambda c, i: c.post(cand + "/start"))
    assert {r.status_code for r in sent} == {303}
    opened = _kinds(two_servers, made).count("opened")
    assert opened == 1, f"{N} starts -> {opened} 'opened' events"


def test_more_time_is_given_once(two_servers: Pair) -> None:
    made = _interview(two_servers, 2, minutes=10)
    cand = _started(two_servers, made)
    sent = two_servers.at_once(N, lambda c, i: c.post(cand + "/extend"))
    assert {r.status_code for r in sent} == {303}
    extended = _kinds(two_servers, made).count("extended")
    with two_servers.client(1) as client:
        extra = client.get(f"/interviewer/{made.host_token}/report.json").json()["extra_seconds"]
    assert (extended, extra) == (1, 10 * 30), (
        f"{N} requests -> {extended} extensions, {extra} s more"
    )


def test_a_prediction_is_taken_once(two_servers: Pair) -> None:
    made = _interview(two_servers, 2)
    cand = _started(two_servers, made)
    sent = two_servers.at_once(
        N, lambda c, i: c.post(cand + "/predict", data={"output": str(i), "confidence": "50"})
    )
    assert {r.status_code for r in sent} == {303}
    predicted = _kinds(two_servers, made).count("predicted")
    assert predicted == 1, f"{N} predictions -> {predicted} kept"


def test_next_moves_on_one_question(two_servers: Pair) -> None:
    """N requests from question 1 move the candidate to question 2; N more, once question 2 is
    predicted, to question 3: a step per question left, however many ask for it."""
    made = _interview(two_servers, 5)
    cand = _started(two_servers, made, predicted=True)
    for step in (1, 2):
        sent = two_servers.at_once(N, lambda c, i: c.post(cand + "/next"))
        assert {r.status_code for r in sent} == {303}
        kinds = _kinds(two_servers, made)
        assert (kinds.count("next"), kinds.count("finished")) == (step, 0), (
            f"{N} requests -> {kinds.count('next') - step + 1} steps"
        )
        with two_servers.client(1) as client:
            assert f"Question {step + 1} of 5" in client.get(cand).text
            said = client.post(cand + "/predict", data={"output": "2", "confidence": "95"})
            assert said.status_code == 303


def test_the_interview_finishes_once(two_servers: Pair) -> None:
    made = _interview(two_servers, 1)
    cand = _started(two_servers, made, predicted=True)
    sent = two_servers.at_once(N, lambda c, i: c.post(cand + "/next"))
    assert {r.status_code for r in sent} == {303}
    finished = _kinds(two_servers, made).count("finished")
    assert finished == 1, f"{N} requests -> {finished} 'finished' events"


def test_revoking_is_logged_once(two_servers: Pair) -> None:
    made = _interview(two_servers, 1)
    sent = two_servers.at_once(N, lambda c, i: c.post(f"/interviewer/{made.host_token}/revoke"))
    assert {r.status_code for r in sent} == {303}
    revoked = _kinds(two_servers, made).count("revoked")
    assert revoked == 1, f"{N} requests -> {revoked} 'revoked' events"


def test_a_question_never_keeps_more_runs_than_its_cap(two_servers: Pair) -> None:
    """Two runs left under the cap, and N sent at once: two are kept (and shown), the rest
    refused; none is shown that the interviewer's log lacks."""
    made = _interview(two_servers, 1)
    cand = _started(two_servers, made, predicted=True)
    assert made.interview.id is not None
    for n in range(RUNS_PER_QUESTION - 2):
        model.append(
            two_servers.store(),
            made.interview.id,
            "run",
            {"question": "snippet-1", "code": f"print({n})"},
        )
    sent = two_servers.at_once(
        N, lambda c, i: c.post(cand + "/run/panel", data={"code": f"print({i})\n"})
    )
    shown = sum(1 for r in sent if r.status_code == 200)
    assert {r.status_code for r in sent} <= {200, 429}, [
        r.text[-500:] for r in sent if r.status_code not in (200, 429)
    ]
    runs = _kinds(two_servers, made).count("run")
    assert runs == RUNS_PER_QUESTION, (
        f"{N} runs with 2 left -> {runs - RUNS_PER_QUESTION + 2} kept, cap {RUNS_PER_QUESTION}"
    )
    assert shown == runs - (RUNS_PER_QUESTION - 2), (shown, runs)


def _session(response: httpx.Response) -> str:
    """The session a sign-in's cookie names (`NAME/SESSION`, signed)."""
    value = response.cookies["ampquiz_instructor"]
    return value.rsplit(".", 2)[0].partition("/")[2]


def test_a_sign_in_link_opens_one_session(two_servers: Pair) -> None:
    store = two_servers.store()
    instructors.add(store, "ada")
    token = instructors.new_link(store, "ada")
    sent = two_servers.at_once(12, lambda c, i: c.post(f"/studio/sign-in/{token}"))
    signed = [r for r in sent if r.status_code == 303]
    assert {r.status_code for r in sent} <= {303, 403}
    assert len(signed) == 1, (
        f"12 sign-ins with one link -> {len(signed)} sessions, {len({_session(r) for r in signed})} ids"
    )
    # Another link of hers opens a session of its own: signing out of one leaves the other.
    with two_servers.client(0) as first, two_servers.client(1) as second:
        first.cookies = signed[0].cookies
        assert (
            second.post(f"/studio/sign-in/{instructors.new_link(store, 'ada')}").status_code == 303
        )
        assert (
            _session(signed[0])
            != second.cookies["ampquiz_instructor"].rsplit(".", 2)[0].partition("/")[2]
        )
        assert first.post("/studio/sign-out").status_code == 303
        assert first.get("/studio").status_code == 403 and second.get("/studio").status_code == 200


def test_adding_an_instructor_at_once_adds_one(two_servers: Pair) -> None:
    """`ampquiz instructor add` run twice at the same moment: one adds, the other is told so
    (it failed on the database's duplicate key)."""
    store = two_servers.store()
    added = at_once(N, lambda i: instructors.add(store, "grace"))
    assert sorted(added) == [False] * (N - 1) + [True]


def test_one_submit_is_stored_once(two_servers: Pair) -> None:
    """The same answer (one learner, one submit id) sent N times at once, to both servers: one
    attempt stored, and every response names it."""
    with two_servers.client(0) as client:
        client.get("/healthz")
        cookies = dict(client.cookies)
    answer = {"output": "torch.bfloat16\ntorch.float32", "submit_id": "race-submit-1"}
    path = "/api/questions/linear-dtype-under-autocast/attempts?run=false"
    sent = two_servers.at_once(N, lambda c, i: c.post(path, json=answer), cookies=cookies)
    assert {r.status_code for r in sent} == {200}, [
        r.text[-500:] for r in sent if r.status_code != 200
    ]
    stored = [a for a in two_servers.store().all_attempts() if a.submit_id == "race-submit-1"]
    assert len(stored) == 1, f"{N} submits -> {len(stored)} attempts stored"
    assert {r.json()["attempt_id"] for r in sent} == {stored[0].id}


@pytest.mark.anyio
async def test_a_stream_handed_an_event_past_the_next_reads_the_ones_between(
    tmp_path: Path,
) -> None:
    """In one process, without servers: the stream's own process hands it event 3 while event 2,
    committed by another process, has not been read yet: 2 is read from the log, then 3 (handed
    over first, 2 was never sent)."""
    store = Store(f"sqlite:///{tmp_path / 'hub.db'}")
    made = model.create(store, ["q1"], by="ada")
    interview_id = made.interview.id
    assert interview_id is not None
    watching, other_process = Hub(), Hub()
    got: list[int] = []
    first = asyncio.Event()

    async def follow() -> None:
        async for event in watching.follow(store, interview_id):
            if event is not None:
                got.append(event.id)
                first.set()
                if len(got) == 3:
                    return

    follower = asyncio.create_task(follow())
    await asyncio.wait_for(first.wait(), 5)  # `created`, read from the log
    await other_process.record(store, interview_id, "note", {"question": "q1", "text": "two"})
    await watching.record(store, interview_id, "note", {"question": "q1", "text": "three"})
    try:
        await asyncio.wait_for(follower, 5)
    except TimeoutError:
        follower.cancel()
    store.close()
    assert got == [1, 2, 3]


def _stream(
    client: httpx.Client, path: str, after: int, most: int, deadline: float
) -> list[dict[str, Any]]:
    """Up to `most` events of a live stream after `after` (then the connection is closed, as a
    dropped one would be)."""
    got: list[dict[str, Any]] = []
    headers = {"Last-Event-ID": str(after)} if after else {}
    with client.stream("GET", path, headers=headers, timeout=httpx.Timeout(30, read=5)) as response:
        try:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    if (
                        len(got) >= most
                        or got[-1]["data"].get("text") == "end"
                        or time.monotonic() > deadline
                    ):
                        break
        except httpx.ReadTimeout:
            pass
    return got


def test_a_live_stream_never_skips_an_event_committed_by_the_other_process(
    two_servers: Pair,
) -> None:
    """Both servers append notes at once while a reader on the first follows the live stream,
    dropping and reconnecting with `Last-Event-ID` every few events: it sees every event of the
    log, each once, in the log's order."""
    made = _interview(two_servers, 1)
    assert made.interview.id is not None
    host = f"/interviewer/{made.host_token}"
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90

    def read() -> None:
        with two_servers.client(0) as client:
            while time.monotonic() < deadline and not (
                seen and seen[-1]["data"].get("text") == "end"
            ):
                seen.extend(
                    _stream(client, host + "/events", seen[-1]["id"] if seen else 0, 7, deadline)
                )

    reader = threading.Thread(target=read)
    reader.start()
    try:
        per_writer, writers = 10, 8

        def write(client: httpx.Client, i: int) -> httpx.Response:
            for k in range(per_writer):
                said = client.post(
                    host + "/notes",
                    data={"question": "snippet-1", "text": f"{i}-{k}"},
                    headers=JSON,
                )
                said.raise_for_status()
            return said

        two_servers.at_once(writers, write)
        with two_servers.client(1) as client:
            client.post(
                host + "/notes", data={"question": "snippet-1", "text": "end"}, headers=JSON
            ).raise_for_status()
    finally:
        reader.join(100)
    log = [e.id for e in model.events(two_servers.store(), made.interview.id)]
    ids = [e["id"] for e in seen]
    missed = sorted(set(log) - set(ids))
    assert ids == log, (
        f"{len(log)} events -> the reader saw {len(ids)}, skipped {len(missed)}: {missed[:10]}"
    )
