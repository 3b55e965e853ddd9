"""Loading the bank: which file a duplicate id leaves out, and the keys lint warns about
(pure Python over files in a temporary folder; milliseconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.bank.lint import underivable
from app.bank.load import load_bank


def one_question(qid: str, marker: str) -> str:
    return f"""\
title: Set {marker}
description: d
questions:
  - id: {qid}
    kind: predict_output
    topic: t
    difficulty: 1
    prompt: {marker}
    code: print(1)
    answer: "1"
    explanation: e
    source: s
"""


def write(folder: Path, name: str, text: str, mtime: int) -> Path:
    path = folder / name
    path.write_text(text)
    os.utime(path, ns=(mtime, mtime))
    return path


def test_the_newer_file_is_left_out_whatever_the_names(tmp_path: Path) -> None:
    write(tmp_path, "zz-old.yaml", one_question("shared-id", "OLD"), 1_000_000_000)
    write(tmp_path, "aa-new.yaml", one_question("shared-id", "NEW"), 2_000_000_000)
    bank = load_bank(tmp_path)
    assert [s.id for s in bank.sets] == ["zz-old"]
    assert bank.question("shared-id").question.prompt == "OLD"
    (problem,) = bank.problems
    assert problem.path.endswith("aa-new.yaml") and "zz-old.yaml:4" in problem.message


def test_the_file_that_served_the_id_before_keeps_it(tmp_path: Path) -> None:
    old = write(tmp_path, "b.yaml", one_question("shared-id", "SERVED"), 2_000_000_000)  # newer...
    write(tmp_path, "a.yaml", one_question("shared-id", "NEW"), 1_000_000_000)
    bank = load_bank(tmp_path, incumbents={"shared-id": str(old)})  # ...but it was being served
    assert bank.question("shared-id").question.prompt == "SERVED"
    assert bank.problems[0].path.endswith("a.yaml")


@pytest.mark.parametrize(
    ("number", "hard"),
    [("0.2448", True), ("9.1553e-06", True), ("3.3895313892515355e+38", True), ("22032.", False),
     ("65504.0", False), ("0.0009765625", False), ("1.0001", False), ("458752.0", False), ("0.6000", False)],
)  # fmt: skip
def test_keys_no_one_could_type_are_warned_about(number: str, hard: bool) -> None:
    assert underivable(number) is hard


def test_the_live_bank_keeps_what_it_served_when_a_newer_file_takes_an_id(tmp_path: Path) -> None:
    from app.live_bank import LiveBank

    write(tmp_path, "b-served.yaml", one_question("shared-id", "SERVED"), 1_000_000_000)
    live = LiveBank(tmp_path, check_every_s=0)
    assert live.current().question("shared-id").question.prompt == "SERVED"
    # the served file is edited (now the newest), and a new file takes its id
    write(tmp_path, "a-new.yaml", one_question("shared-id", "NEW"), 2_000_000_000)
    write(tmp_path, "b-served.yaml", one_question("shared-id", "SERVED AGAIN"), 3_000_000_000)
    bank = live.current()
    assert bank.question("shared-id").question.prompt == "SERVED AGAIN"
    assert [p.path for p in bank.problems] == [str(tmp_path / "a-new.yaml")]
