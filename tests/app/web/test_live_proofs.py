"""The live server grades only what it has proved: a real `ampquiz serve` on a copy of the bank,
with files dropped into it while it runs, as an instructor would."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.cli import BANK, ampquiz
from tests.support.server import Server

PLANTED = """\
title: Planted
description: A question with a wrong key, as a careless author might write it.
questions:
  - id: planted-fp16-max
    kind: predict_output
    topic: float16-numerics
    difficulty: 1
    prompt: What does this print?
    code: |
      import torch
      print(torch.finfo(torch.float16).max)
    requires: cpu
    answer: "65536.0"
    explanation: The largest float16.
    source: tests
"""

REUSES_AN_ID = """\
title: Reuses an id
description: A new file whose question takes an id another set already serves.
questions:
  - id: fp16-max-and-overflow
    kind: multiple_choice
    topic: float16-numerics
    difficulty: 1
    prompt: IMPOSTOR prompt
    choices:
      - {text: a, correct: true, why: a}
      - {text: b, correct: false, why: b}
    explanation: IMPOSTOR
    source: tests
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("live")
    bank = work / "bank"
    shutil.copytree(BANK, bank)
    server = Server(work, bank=bank)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def bank_of(server: Server) -> Path:
    return Path(server.env["AMPQUIZ_BANK"])


def attempt(c: httpx.Client, qid: str, **answer: object) -> httpx.Response:
    return c.post(f"/api/questions/{qid}/attempts", params={"run": "false"}, json=answer)


def test_a_wrong_key_dropped_into_the_running_bank_is_never_graded(live: Server) -> None:
    (bank_of(live) / "zz-planted.yaml").write_text(PLANTED)
    seen: list[int] = []
    with httpx.Client(base_url=live.url, timeout=30) as c:
        deadline = time.monotonic() + 30
        held = False
        while time.monotonic() < deadline and not held:
            r = attempt(c, "planted-fp16-max", output="65504.0")  # the truth, typed by a learner
            seen.append(r.status_code)
            assert r.status_code in (404, 409), r.text  # not there yet, or there and not graded
            held = any(q["id"] == "planted-fp16-max" for q in c.get("/healthz").json()["proofs"]["held_back"])
            time.sleep(0.05)
        assert held, "the server should hold the planted question back"
        assert 409 in seen  # it was served, from its first second, without grading
        r = attempt(c, "planted-fp16-max", output="65536.0")  # the wrong key is no better
        assert r.status_code == 409 and "under review" in r.json()["error"]
        assert c.get("/api/progress").json()["totals"]["attempts"] == 0
        page = c.get("/questions/planted-fp16-max").text
        assert "under review" in page and 'name="output"' not in page
    out = ampquiz("status", "--url", live.url)
    assert out.returncode == 1
    assert "planted-fp16-max" in out.stdout and "zz-planted.yaml" in out.stdout
    assert "-65536.0" in out.stdout and "+65504.0" in out.stdout  # the diff of key and run


def test_a_learner_typing_what_the_code_prints_is_never_told_they_are_wrong(live: Server) -> None:
    with httpx.Client(base_url=live.url, timeout=60) as c:
        questions = [q for q in c.get("/api/questions").json()
                     if q["kind"] == "predict_output" and q["proof"]["state"] == "proved"]  # fmt: skip
        assert len(questions) >= 20
        for q in questions:
            first = c.post(f"/api/questions/{q['id']}/attempts", json={"output": "not it"}).json()
            printed = first["run"]["stdout"]
            assert first["run"]["status"] == "ok", q["id"]
            assert attempt(c, q["id"], output=printed).json()["correct"] is True, q["id"]


def test_a_new_file_reusing_an_id_is_left_out_whatever_its_name(live: Server) -> None:
    (bank_of(live) / "aaa-reuses-an-id.yaml").write_text(REUSES_AN_ID)  # sorts before every set
    with httpx.Client(base_url=live.url, timeout=30) as c:
        deadline = time.monotonic() + 30
        problems: list[str] = []
        while time.monotonic() < deadline and not problems:
            problems = [p for p in c.get("/healthz").json()["problems"] if "aaa-reuses-an-id.yaml" in p]
            time.sleep(0.1)
        assert problems and "duplicate id 'fp16-max-and-overflow'" in problems[0]
        assert "float16-numerics.yaml" in problems[0]  # both places named
        assert c.get("/sets/float16-numerics").status_code == 200
        page = c.get("/questions/fp16-max-and-overflow").text
        assert "IMPOSTOR" not in page
        assert c.get("/sets/aaa-reuses-an-id").status_code == 404
    lint = ampquiz("lint", str(bank_of(live)))  # the command line blames the same file
    assert lint.returncode == 1
    blamed = [line for line in lint.stdout.splitlines() if "duplicate id" in line]
    assert blamed and all(line.startswith(str(bank_of(live) / "aaa-reuses-an-id.yaml")) for line in blamed)


def test_each_learner_sees_a_stable_order_of_their_own_graded_by_identity(live: Server) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as one, httpx.Client(base_url=live.url, timeout=30) as two:
        mcs = [q for q in one.get("/api/questions").json() if q["kind"] == "multiple_choice" and len(q["choices"]) >= 3]
        differ = 0
        for q in mcs[:12]:
            mine = [c["index"] for c in one.get(f"/api/questions/{q['id']}").json()["choices"]]
            assert mine == [c["index"] for c in one.get(f"/api/questions/{q['id']}").json()["choices"]]
            page = one.get(f"/questions/{q['id']}").text
            shown = [int(v) for v in re.findall(r'name="choice" value="(\d+)"', page)]
            assert shown == mine, q["id"]  # the page and the API agree
            theirs = [c["index"] for c in two.get(f"/api/questions/{q['id']}").json()["choices"]]
            differ += mine != theirs
        assert differ >= 3
        firsts = [one.get(f"/api/questions/{q['id']}").json()["choices"][0]["index"] for q in mcs]
        assert len(set(firsts)) > 1  # the first choice shown is not always the same one
        # graded by identity: the right choices, whatever position they are shown in
        q = next(q for q in mcs if q["proof"]["state"] in ("proved", "conceptual") and not q["multiple"])
        wrong = attempt(one, q["id"], choices=[q["choices"][0]["index"]]).json()
        right = [c["index"] for c in wrong["outcome"]["choices"] if c["correct"]]
        assert attempt(one, q["id"], choices=right).json()["correct"] is True


def test_a_cuda_answer_does_not_count_on_a_question_about_the_cpu(live: Server) -> None:
    qid = "api-migration-amp-gradscaler-default-device"
    with httpx.Client(base_url=live.url, timeout=30) as c:
        assert c.get(f"/api/questions/{qid}").json()["asks_about"] == "cpu"
        assert attempt(c, qid, output="True 65536.0").json()["correct"] is False
        assert attempt(c, qid, output="False 1.0").json()["correct"] is True
        assert "This question is about running on the CPU" in c.get(f"/questions/{qid}").text


def test_printed_numbers_count_within_the_tolerance(live: Server) -> None:
    qid = "debugging-nans-bf16-range-no-scaler"
    first = "tensor([inf, 0.], dtype=torch.float16) 65504.0\n"
    with httpx.Client(base_url=live.url, timeout=30) as c:
        close = first + "tensor([7.0144e+04, 1.001e-08], dtype=torch.bfloat16) 3.39e+38"
        assert attempt(c, qid, output=close).json()["correct"] is True
        rounded_away = first + "tensor([7.0000e+04, 1.001e-08], dtype=torch.bfloat16) 3.39e+38"
        assert attempt(c, qid, output=rounded_away).json()["correct"] is False  # bfloat16 rounds 70000
        assert "printed numbers within 0.2 % count" in c.get(f"/questions/{qid}").text


def test_three_quick_submits_make_one_attempt_and_an_empty_answer_none(live: Server) -> None:
    qid = "fp16-max-and-overflow"
    with httpx.Client(base_url=live.url, timeout=30) as c:
        page = c.get(f"/questions/{qid}").text
        submit_id = re.search(r'name="submit_id" value="([^"]+)"', page).group(1)
        form = {"output": "65504.0 65504.0 inf inf", "submit_id": submit_id}
        with ThreadPoolExecutor(3) as pool:
            replies = list(pool.map(lambda _: c.post(f"/questions/{qid}", data=form), range(3)))
        assert {r.status_code for r in replies} == {303}
        assert len({r.headers["location"] for r in replies}) == 1  # all three show the same attempt
        assert c.post(f"/questions/{qid}", data=form).headers["location"] == replies[0].headers["location"]
        empty = c.post(f"/questions/{qid}", data={"output": "  \n", "submit_id": "another"})
        assert empty.status_code == 400 and "Type what you think it prints first." in empty.text
        api_empty = attempt(c, qid, output="")
        assert api_empty.status_code == 400
        assert c.get("/api/progress").json()["totals"]["attempts"] == 1


def test_every_page_says_what_proved_its_answers(live: Server) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        footer = c.get("/").text
        assert "Every answer here was checked" not in footer
        assert "verified by running on CPU" in footer and "conceptual (no code to run)" in footer
        conceptual = next(q for q in c.get("/api/questions").json() if not q["code"])
        assert "conceptual — no code to run" in c.get(f"/questions/{conceptual['id']}").text
        cuda = c.get("/questions/seed004-fp16-sum-overflow-cuda").text
        assert "not yet verified on CUDA" in cuda
