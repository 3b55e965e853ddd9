"""The live server grades only what it has proved: a real `ampquiz serve` on a copy of the bank,
with files dropped into it while it runs, as an instructor would."""

from __future__ import annotations

import html
import re
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.bank import PredictOutputQuestion, load_bank
from app.bank.load import LoadedQuestion
from tests.support.cli import BANK, ampquiz
from tests.support.planted import wrong_key_set
from tests.support.server import Server

PLANTED = wrong_key_set("planted-fp16-max")

REUSES_AN_ID = """\
title: Reuses an id
description: A new file whose question takes an id another set already serves.
questions:
  - id: {qid}
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


TOLERANT = """\
title: Tolerant
description: A printed value no one types to the last digit.
questions:
  - id: tolerant-third
    kind: predict_output
    topic: float16-numerics
    difficulty: 1
    prompt: What does this print?
    code: |
      import torch
      print(torch.tensor(1 / 3, dtype=torch.bfloat16).item())
    requires: cpu
    answer: "0.333984375"
    tolerance: {rel: 0.01}
    explanation: bfloat16 keeps 8 bits of mantissa.
    source: tests
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("live")
    bank = work / "bank"
    # Without the committed CUDA record: a CPU server whose CUDA keys no run has proved yet (what
    # an instructor's new CUDA question is). The record's own proofs: test_a_committed_cuda_record_...
    shutil.copytree(
        BANK,
        bank,
        ignore=lambda folder, names: [
            n for n in names if n.startswith("cuda-") and n.endswith(".json")
        ],
    )
    server = Server(work, bank=bank)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def bank_of(server: Server) -> Path:
    return Path(server.env["AMPQUIZ_BANK"])


def first(kind: type, where: Callable[[Any], bool]) -> LoadedQuestion:
    """The first question of the real bank of this kind that `where` holds for."""
    found = next(
        (
            q
            for q in load_bank(BANK).questions
            if isinstance(q.question, kind) and where(q.question)
        ),
        None,
    )
    assert found is not None, "the bank has no such question"
    return found


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
            held = any(
                q["id"] == "planted-fp16-max"
                for q in c.get("/healthz").json()["proofs"]["held_back"]
            )
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
            c.cookies.clear()  # a learner per question: two answers each, well inside one's answers per minute
            first = c.post(f"/api/questions/{q['id']}/attempts", json={"output": "not it"}).json()
            printed = first["run"]["stdout"]
            assert first["run"]["status"] == "ok", q["id"]
            assert attempt(c, q["id"], output=printed).json()["correct"] is True, q["id"]


def test_a_new_file_reusing_an_id_is_left_out_whatever_its_name(live: Server) -> None:
    taken = load_bank(bank_of(live)).questions[
        -1
    ]  # served from a file that sorts after the new one
    owner = Path(taken.path).name
    (bank_of(live) / "aaa-reuses-an-id.yaml").write_text(REUSES_AN_ID.replace("{qid}", taken.id))
    with httpx.Client(base_url=live.url, timeout=30) as c:
        deadline = time.monotonic() + 30
        problems: list[str] = []
        while time.monotonic() < deadline and not problems:
            problems = [
                p for p in c.get("/healthz").json()["problems"] if "aaa-reuses-an-id.yaml" in p
            ]
            time.sleep(0.1)
        assert problems and f"duplicate id '{taken.id}'" in problems[0]
        assert owner in problems[0]  # both places named
        assert c.get(f"/sets/{taken.set_id}").status_code == 200
        page = c.get(f"/questions/{taken.id}").text
        assert "IMPOSTOR" not in page
        assert c.get("/sets/aaa-reuses-an-id").status_code == 404
    lint = ampquiz("lint", str(bank_of(live)))  # the command line blames the same file
    assert lint.returncode == 1
    blamed = [line for line in lint.stdout.splitlines() if "duplicate id" in line]
    assert blamed and all(
        line.startswith(str(bank_of(live) / "aaa-reuses-an-id.yaml")) for line in blamed
    )


def test_each_learner_sees_a_stable_order_of_their_own_and_answers_by_position(
    live: Server,
) -> None:
    """Choices come shuffled per learner, and an answer names a choice by its position in that
    order (the page's inputs, the API's `index`): never by its place in the YAML, where the bank
    writes the right choice first in most questions, so sending 0 was right almost every time."""
    with (
        httpx.Client(base_url=live.url, timeout=30) as one,
        httpx.Client(base_url=live.url, timeout=30) as two,
    ):
        mcs = [
            q
            for q in one.get("/api/questions").json()
            if q["kind"] == "multiple_choice" and len(q["choices"]) >= 3
        ]
        differ = 0
        for q in mcs[:12]:
            choices = one.get(f"/api/questions/{q['id']}").json()["choices"]
            mine = [c["text"] for c in choices]
            assert [c["index"] for c in choices] == list(range(len(choices)))
            assert mine == [
                c["text"] for c in one.get(f"/api/questions/{q['id']}").json()["choices"]
            ]
            page = one.get(f"/questions/{q['id']}").text
            values = [int(v) for v in re.findall(r'name="choice" value="(\d+)"', page)]
            assert values == list(range(len(choices))), q["id"]  # positions, as the API's
            differ += mine != [
                c["text"] for c in two.get(f"/api/questions/{q['id']}").json()["choices"]
            ]
        assert differ >= 3
        # the first position is right about as often as chance makes it (it was 72 of 73 questions)
        gradeable = [
            q for q in mcs if q["proof"]["state"] in ("proved", "conceptual") and not q["multiple"]
        ][:12]
        firsts_right = sum(attempt(two, q["id"], choices=[0]).json()["correct"] for q in gradeable)
        assert len(gradeable) == 12 and firsts_right <= 9, firsts_right
        # graded by what the learner picked: the right choices, whatever position they are shown in
        q = next(
            q for q in mcs if q["proof"]["state"] in ("proved", "conceptual") and not q["multiple"]
        )
        wrong = attempt(one, q["id"], choices=[0]).json()
        right = [c["index"] for c in wrong["outcome"]["choices"] if c["correct"]]
        assert right == wrong["outcome"]["correct_choices"]
        assert attempt(one, q["id"], choices=right).json()["correct"] is True


def test_a_cuda_answer_does_not_count_on_a_question_about_the_cpu(live: Server) -> None:
    q = first(PredictOutputQuestion, lambda q: "cuda" in q.device_answers and q.asks_about == "cpu")
    cuda_says = q.question.device_answers["cuda"]
    assert cuda_says != q.question.answer
    with httpx.Client(base_url=live.url, timeout=30) as c:
        assert c.get(f"/api/questions/{q.id}").json()["asks_about"] == "cpu"
        assert attempt(c, q.id, output=cuda_says).json()["correct"] is False
        assert attempt(c, q.id, output=q.question.answer).json()["correct"] is True
        assert "The answer is what happens on the CPU" in c.get(f"/questions/{q.id}").text
        # After answering, the CUDA output is shown for comparison, and said to be the author's:
        # no CUDA run here, nor a CUDA record, proved it.
        page = c.get(f"/questions/{q.id}").text
        submit_id = re.search(r'name="submit_id" value="([^"]+)"', page).group(1)
        answered = c.post(
            f"/questions/{q.id}",
            data={"output": q.question.answer, "submit_id": submit_id},
            follow_redirects=True,
        )
        assert (
            "on CUDA it prints (not this question's answer; the author's, not yet proved by a run there)"
            in html.unescape(answered.text)
        )


def test_printed_numbers_count_within_the_tolerance(live: Server) -> None:
    (bank_of(live) / "zz-tolerant.yaml").write_text(TOLERANT)
    with httpx.Client(base_url=live.url, timeout=30) as c:
        deadline = time.monotonic() + 30
        while attempt(c, "tolerant-third", output="0.3").status_code in (404, 409):  # until proved
            assert time.monotonic() < deadline, "the server did not prove the new question"
            time.sleep(0.1)
        assert attempt(c, "tolerant-third", output="0.334").json()["correct"] is True
        assert attempt(c, "tolerant-third", output="0.3340").json()["correct"] is True
        assert attempt(c, "tolerant-third", output="0.34").json()["correct"] is False  # 1.8 % off
        assert attempt(c, "tolerant-third", output="0.334 ").json()["correct"] is True
        assert "printed numbers within 1 % count" in c.get("/questions/tolerant-third").text


def test_three_quick_submits_make_one_attempt_and_an_empty_answer_none(live: Server) -> None:
    qid = first(PredictOutputQuestion, lambda q: q.requires != "cuda" and q.tolerance is None).id
    with httpx.Client(base_url=live.url, timeout=30) as c:
        page = c.get(f"/questions/{qid}").text
        submit_id = re.search(r'name="submit_id" value="([^"]+)"', page).group(1)
        form = {"output": "a guess", "submit_id": submit_id}
        with ThreadPoolExecutor(3) as pool:
            replies = list(pool.map(lambda _: c.post(f"/questions/{qid}", data=form), range(3)))
        assert {r.status_code for r in replies} == {303}
        assert len({r.headers["location"] for r in replies}) == 1  # all three show the same attempt
        assert (
            c.post(f"/questions/{qid}", data=form).headers["location"]
            == replies[0].headers["location"]
        )
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
        cuda_only = first(PredictOutputQuestion, lambda q: q.requires == "cuda")
        assert "not yet verified on CUDA" in c.get(f"/questions/{cuda_only.id}").text
        # Answered, it is graded on the author's word, and the verdict says so beside it; a key
        # proved here says nothing of the kind.
        for qid, unproved in (
            (cuda_only.id, True),
            (first(PredictOutputQuestion, lambda q: q.requires == "cpu").id, False),
        ):
            page = c.get(f"/questions/{qid}").text
            submit_id = re.search(r'name="submit_id" value="([^"]+)"', page).group(1)
            answered = c.post(
                f"/questions/{qid}",
                data={"output": "a guess", "submit_id": submit_id},
                follow_redirects=True,
            )
            said = (
                "Graded by the author's answer: no run on CUDA has proved it yet"
                in html.unescape(answered.text)
            )
            assert said is unproved, (qid, answered.text[:2000])


def test_a_committed_cuda_record_proves_cuda_answers_on_a_cpu_server(tmp_path: Path) -> None:
    """With the CUDA record (run on a GPU), a CPU server's pages say what proved a CUDA key and
    no longer call it the author's alone; a key that record did not run says why."""
    records = sorted((BANK / "verified").glob("cuda-*.json"))
    assert records, "no CUDA record is committed"
    bank = tmp_path / "bank"
    shutil.copytree(BANK, bank)
    server = Server(tmp_path, bank=bank)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            cuda_only = first(
                PredictOutputQuestion, lambda q: q.requires == "cuda" and not q.torch_versions
            )
            page = c.get(f"/questions/{cuda_only.id}").text
            assert "verified on CUDA · NVIDIA" in page and "not yet verified on CUDA" not in page
            submit_id = re.search(r'name="submit_id" value="([^"]+)"', page).group(1)
            answered = c.post(
                f"/questions/{cuda_only.id}",
                data={"output": "a guess", "submit_id": submit_id},
                follow_redirects=True,
            )
            assert "Graded by the author's answer" not in html.unescape(answered.text)
            later = first(
                PredictOutputQuestion, lambda q: q.requires == "cuda" and bool(q.torch_versions)
            )
            assert "not run on CUDA: its key is what torch >=" in html.unescape(
                c.get(f"/questions/{later.id}").text
            )
    finally:
        server.stop()


def test_a_run_handed_out_that_contradicts_a_recorded_key_holds_it_back_before_anyone_is_graded(
    tmp_path: Path,
) -> None:
    """Code printing an unseeded random draw passed the prover's runs and the committed record by
    luck, and the run each result page showed printed something else beside a verdict graded on
    the key. Here the record says pass for a key the code never prints (what such luck, or a
    hand-written record, leaves): the run learners are shown is made and checked before the first
    answer is graded, and holds the key back."""
    import json

    from app.verify.record import question_hash

    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "lucky.yaml").write_text(wrong_key_set("lucky-record"))  # its key, "proved" by a record
    loaded = load_bank(bank).question("lucky-record")
    environment = json.loads((BANK / "verified" / "cpu-torch2.13.0.json").read_text())[
        "environment"
    ]
    (bank / "verified").mkdir()
    entry = {"result": "pass", "hash": question_hash(loaded.question)}
    (bank / "verified" / "cpu-torch2.13.0.json").write_text(
        json.dumps({"environment": environment, "results": {loaded.id: entry}})
    )
    server = Server(tmp_path, bank=bank)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert (
                c.get("/api/questions/lucky-record").json()["proof"]["state"] == "proved"
            )  # the record's word
            # The first answer, straight to the API (no page read first, no run asked for): its
            # run is made and checked before it is graded (a hand-written record got it counted).
            r = attempt(c, "lucky-record", output="65536.0")
            assert r.status_code == 409 and "under review" in r.json()["error"], r.text
            assert c.get("/api/progress").json()["totals"]["attempts"] == 0
            held = c.get("/healthz").json()["proofs"]["held_back"]
            assert [h["id"] for h in held] == [
                "lucky-record"
            ] and "made after it was proved contradicts it" in held[0]["reason"]
    finally:
        server.stop()


def _question(qid: str, code: str, answer: str) -> str:
    body = "\n".join("      " + line for line in code.splitlines())
    return f"""\
title: {qid}
description: A question for the prover's order.
questions:
  - id: {qid}
    kind: predict_output
    topic: float16-numerics
    difficulty: 1
    prompt: What does this print?
    code: |
{body}
    requires: cpu
    answer: "{answer}"
    explanation: Tests.
    source: tests
"""


def test_a_snippet_that_never_ends_keeps_the_keys_after_it_waiting_one_short_try(
    tmp_path: Path,
) -> None:
    """The prover ran keys in the bank's order, each timed-out run tried again at once for 60 s
    three times: a question added after one that sleeps stayed pending for 138 s (an instructor's
    walk). A first try is short, and a key whose run ended early waits behind those not tried."""
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "aa-sleeps.yaml").write_text(
        _question("aa-sleeps", "import time\ntime.sleep(1000)\nprint(1)", "1")
    )
    server = Server(tmp_path, bank=bank)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            time.sleep(1)  # the sleeping key's first try under way
            (bank / "zz-quick.yaml").write_text(_question("zz-quick", "print(3 + 3)", "6"))
            deadline = time.monotonic() + 60
            state = ""
            while time.monotonic() < deadline and state != "proved":
                found = c.get("/api/questions/zz-quick")
                state = found.json()["proof"]["state"] if found.status_code == 200 else ""
                time.sleep(0.5)
            assert state == "proved"
            assert (
                c.get("/api/questions/aa-sleeps").json()["proof"]["state"] == "pending"
            )  # still being tried
    finally:
        server.stop()
