"""Two web processes, one bank folder, simultaneous saves of one file: exactly one wins, the other
is told 409 with what the winner changed, and nothing is lost (the check and the write are one
step under a lock on the bank folder, across threads and processes). Both servers also start on a
folder holding hostile files (one nested 600 levels deep refused `serve` its start), serving the
others. Real servers (`ampquiz serve`, about five seconds each to start)."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import Server

SET = """\
title: Race
description: Two authors, one file.
questions:
  - id: race-one
    kind: multiple_choice
    topic: studio-race
    difficulty: 1
    prompt: Which one?
    choices:
      - {text: This one, correct: true, why: Right.}
      - {text: That one, correct: false, why: Wrong.}
    explanation: It is this one.
    source: tests
"""
HOSTILE = {
    "deep.yaml": "title: " + "[" * 600 + "]" * 600 + "\n",
    "control.yaml": SET.replace("race-one", "control-one").replace(
        "prompt: Which one?", 'prompt: "Which\\x01?"'
    ),
    "race.yml": SET.replace("race-one", "race-again"),
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, Path]]:
    work = tmp_path_factory.mktemp("race")
    bank = work / "bank"
    bank.mkdir()
    (bank / "race.yaml").write_text(SET)
    for name, text in HOSTILE.items():
        (bank / name).write_text(text)
    started: list[Server] = []
    try:
        for which in ("one", "two"):
            (work / which).mkdir()
            server = Server(work / which, bank=bank)
            started.append(server)
            server.start()
        yield started[0], started[1], bank
    finally:
        for server in started:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def signed_in(server: Server) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=60)
    link = server.instructor_link(f"author-{server.port}")
    assert client.post(link.removeprefix(server.url), follow_redirects=False).status_code == 303
    return client


def test_both_servers_start_and_serve_the_other_files(servers: tuple[Server, Server, Path]) -> None:
    for server in servers[:2]:
        health = httpx.get(server.url + "/healthz", timeout=30).json()
        assert health["questions"] == 1 and health["sets"] == 1, health
        for name in HOSTILE:
            assert any(name in p for p in health["problems"]), (name, health["problems"])
        assert "Traceback" not in server.log.read_text()


def _together(
    authors: list[httpx.Client], bodies: list[dict[str, str]]
) -> list[httpx.Response | None]:
    """Each author's save, sent at the same moment (a barrier), each on a thread of its own."""
    answers: list[httpx.Response | None] = [None] * len(authors)
    barrier = threading.Barrier(len(authors))

    def save(n: int) -> None:
        barrier.wait()
        answers[n] = authors[n].post("/studio/api/save", json=bodies[n])

    threads = [threading.Thread(target=save, args=(n,)) for n in range(len(authors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return answers


def test_simultaneous_saves_from_two_processes_one_wins_and_nothing_is_lost(
    servers: tuple[Server, Server, Path],
) -> None:
    one, two, bank = servers
    authors = [signed_in(one), signed_in(two)]
    try:
        for round_ in range(6):
            versions = []
            for client in authors:
                page = client.get("/studio/edit/race.yaml")
                assert page.status_code == 200
                found = re.search(r'data-version="([^"]*)"', page.text)
                versions.append(found.group(1) if found else "")
            base = (bank / "race.yaml").read_text()
            texts = [base + f"# round {round_}, author {n}\n" for n in range(2)]
            answers = _together(authors, [{"name": "race.yaml", "text": texts[n], "version": versions[n], "base": base}
                                          for n in range(2)])  # fmt: skip
            said = [a.status_code if a is not None else None for a in answers]
            assert sorted(said) == [200, 409], (
                round_,
                said,
                [a.text[:300] for a in answers if a is not None],
            )  # type: ignore[type-var]
            won = said.index(200)
            lost = answers[1 - won]
            assert lost is not None and (bank / "race.yaml").read_text() == texts[won]
            assert (
                f"+# round {round_}, author {won}\n" in lost.json()["diff"]
                and lost.json()["current"] == texts[won]
            )
    finally:
        for client in authors:
            client.close()
