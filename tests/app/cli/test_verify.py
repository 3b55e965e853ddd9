"""`ampquiz verify`: the bank's keys are proved by execution; a wrong key is caught and named."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import BANK, ampquiz, expectation, pick_question


def _edit_copy(tmp_path: Path, edit) -> Path:
    """A copy of the real bank with `edit(question_dict)` applied to each question of each file."""
    copy = tmp_path / "bank"
    shutil.copytree(BANK, copy, ignore=shutil.ignore_patterns("verified"))
    for path in copy.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        for q in data["questions"]:
            edit(q)
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return copy


FLIPPED = "cpu-autocast-which-ops-float32"
"""A question with two right choices, each saying what the run prints of its op."""


@pytest.fixture(scope="module")
def broken_report(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[int, dict, str, dict[str, str]]:
    wrong_answer = pick_question("predict_output")
    wrong_expect = pick_question("multiple_choice", expect_key="raises")
    raises, random, accepts, threads = [
        q["id"]
        for p in sorted(BANK.glob("*.yaml"))
        for q in yaml.safe_load(p.read_text())["questions"]
        if q["kind"] == "predict_output"
        and q.get("requires", "any") != "cuda"
        and q["id"] != wrong_answer
    ][:4]

    def edit(q: dict) -> None:
        if q["id"] == wrong_answer:
            q["answer"] = "torch.float64"
        elif q["id"] == wrong_expect:
            expectation(q)["raises"] = "KeyError"
        elif q["id"] == raises:
            q["code"] = q["code"] + "\nraise ValueError('boom from the snippet')\n"
        elif q["id"] == random:  # one lucky run would have proved it
            q["code"], q["answer"] = (
                "import random\nprint(random.random() < 2)\nprint(random.random())\n",
                "True",
            )
        elif q["id"] == threads:  # what a float32 sum prints on the sandbox's one thread only
            q["code"], q["answer"] = (
                "import torch\nprint(torch.full((10_000_000,), 0.1).sum().item())\n",
                "999999.4375",
            )
        elif (
            q["id"] == accepts
        ):  # a spelling that counts as right, saying another dtype and another number
            q["accept"] = [
                q["answer"].replace("float32", "float64").replace("bfloat16", "float16") + " 7"
            ]
        elif q["id"] == FLIPPED:  # the softmax choice marked right, the cross_entropy one wrong
            q["choices"][0]["correct"], q["choices"][1]["correct"] = False, True

    copy = _edit_copy(tmp_path_factory.mktemp("verify"), edit)
    ids = {
        "answer": wrong_answer,
        "expect": wrong_expect,
        "raises": raises,
        "random": random,
        "flipped": FLIPPED,
        "accepts": accepts,
        "threads": threads,
    }
    out = ampquiz("verify", str(copy), "--json")
    text = ampquiz("verify", str(copy), "--only", *ids.values())
    return out.returncode, json.loads(out.stdout), text.stdout, ids


def test_wrong_answer_fails_with_a_diff(broken_report) -> None:
    code, report, text, ids = broken_report
    assert code == 1
    failed = {q["id"]: q for q in report["questions"] if q["result"] == "fail"}
    assert set(failed) == set(ids.values())
    bad = failed[ids["answer"]]
    assert "-torch.float64" in bad["diff"] and bad["device"] == "cpu"
    assert f"FAIL {ids['answer']}" in text and "-torch.float64" in text
    assert re.search(rf"\.yaml:\d+: FAIL {ids['answer']} ", text), (
        "a failure says where the question is"
    )


def test_wrong_expect_fails_naming_the_exception(broken_report) -> None:
    _, report, text, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["expect"])
    assert bad["result"] == "fail" and "expected KeyError" in bad["reason"]
    assert f"FAIL {ids['expect']}" in text


def test_snippet_raising_unexpectedly_fails_with_the_exception(broken_report) -> None:
    _, report, text, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["raises"])
    assert bad["result"] == "fail"
    assert "ValueError: boom from the snippet" in bad["exception"]
    assert bad["summary"], "a failure carries the explanation summary of the run"
    assert "7 failed" in text


def test_an_accepted_spelling_that_says_something_else_fails(broken_report) -> None:
    _, report, _, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["accepts"])
    assert bad["result"] == "fail" and bad["reason"].startswith("accept: "), bad


def test_code_that_prints_something_else_each_run_proves_nothing(broken_report) -> None:
    _, report, _, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["random"])
    assert (
        bad["result"] == "fail" and "does not do the same thing each time it runs" in bad["reason"]
    )


def test_a_key_that_holds_on_one_thread_only_proves_nothing(broken_report) -> None:
    """A float32 sum of many values ends in other digits on a learner's cores than on the
    sandbox's one thread: the second proof run computes on two, and the key fails, saying why."""
    _, report, _, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["threads"])
    assert bad["result"] == "fail" and "the number of threads" in bad["reason"], bad
    assert "-999999.4375" in bad["diff"] and "+999999.5625" in bad["diff"], bad["diff"]


def test_a_choice_marked_right_or_wrong_against_the_run_fails(broken_report) -> None:
    """Which choice is right is checked by running: a right choice's outcome must hold, and a wrong
    choice's must not."""
    _, report, _, ids = broken_report
    bad = next(q for q in report["questions"] if q["id"] == ids["flipped"])
    assert bad["result"] == "fail", bad
    assert (
        "choice 1 is marked wrong, but on cpu the run does what its outcome says" in bad["reason"]
    )
    assert (
        "choice 2 is marked correct, but on cpu the run does not do what its outcome says"
        in bad["reason"]
    )
    assert "softmax torch.float32" in bad["reason"]


def test_a_right_choice_that_says_nothing_the_run_can_check_is_refused(tmp_path: Path) -> None:
    """Flipping `correct:` onto another choice of a question with code: that choice says nothing
    the run could check, so the file does not load (and the choice left marked wrong would fail
    `verify` too, its outcome being what the run does)."""
    qid = pick_question("multiple_choice", expect_key="stdout")

    def flip(q: dict) -> None:
        if q["id"] == qid:
            right = next(i for i, c in enumerate(q["choices"]) if c["correct"])
            q["choices"][right]["correct"] = False
            q["choices"][(right + 1) % len(q["choices"])]["correct"] = True

    copy = _edit_copy(tmp_path, flip)
    out = ampquiz("lint", str(copy))
    assert out.returncode == 1, out.stdout
    assert "is marked correct but has no outcome" in out.stdout + out.stderr
    assert ".yaml:" in out.stdout + out.stderr  # where: file:line


def test_record_is_written_and_goes_stale_when_the_question_changes(tmp_path: Path) -> None:
    qid = pick_question("predict_output")
    copy = _edit_copy(tmp_path, lambda q: None)
    out = ampquiz("verify", str(copy), "--only", qid, "--record")
    assert out.returncode == 0, out.stdout
    records = list((copy / "verified").glob("cpu-torch*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["environment"]["device_kind"] == "cpu" and rec["environment"]["date"]
    assert rec["results"][qid]["result"] == "pass" and len(rec["results"][qid]["hash"]) == 16

    def edit(q: dict) -> None:
        if q["id"] == qid:
            q["code"] = q["code"] + "\n# changed\n"

    for path in copy.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        for q in data["questions"]:
            edit(q)
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    again = ampquiz("verify", str(copy), "--only", qid)
    assert f"stale record: {records[0].name}: {qid} changed since it was verified" in again.stdout


def test_show_prints_what_the_code_prints() -> None:
    qid = pick_question("predict_output")
    q = next(
        q
        for p in BANK.glob("*.yaml")
        for q in yaml.safe_load(p.read_text())["questions"]
        if q["id"] == qid
    )
    out = ampquiz("verify", "--show", qid)
    assert out.returncode == 0
    assert out.stdout.rstrip() == q["answer"].rstrip()
