"""The cheap staleness check of a mutant record (hashes only): a record made for the bank is
fresh; editing a question's code, adding or removing a question, or a rule that now makes another
mutant each make it stale, named per question; a CUDA-only question is not expected in a record
made without CUDA."""

from __future__ import annotations

import json
from pathlib import Path

from app.bank.load import load_bank
from app.mutate.freshness import belongs_in, record_problems
from app.verify.record import load_mutant_records
from tests.app.mutate.test_cards import QUESTION, write_bank

SECOND = QUESTION.split("questions:\n")[1].replace("id: one-step", "id: two-steps")


def problems(bank_root: Path) -> list[str]:
    (record,) = load_mutant_records(bank_root)
    return record_problems(load_bank(bank_root), record)


def test_a_record_made_for_the_bank_is_fresh(recorded: Path) -> None:
    assert problems(recorded) == []


def test_edited_added_and_removed_questions_make_it_stale(recorded: Path) -> None:
    write_bank(recorded, QUESTION.replace("(w * 2.0)", "(w * 3.0)"))
    assert problems(recorded) == ["one-step: its code changed since the record"]
    write_bank(recorded, QUESTION + SECOND)
    assert problems(recorded) == ["two-steps: not in the record"]
    write_bank(recorded, QUESTION.replace("id: one-step", "id: renamed"))
    assert problems(recorded) == [
        "one-step: recorded, but no longer a question with code in the bank",
        "renamed: not in the record",
    ]


def test_a_rule_that_makes_another_mutant_today_makes_it_stale(recorded: Path) -> None:
    (record,) = load_mutant_records(recorded)
    body = json.loads(record.path.read_text())
    mutants = body["questions"]["one-step"]["mutants"]
    changed = mutants[0]["rule"]
    mutants[0]["hash"] = "0" * 16  # as if the rule's edit had changed since the run
    gone = mutants.pop()["rule"]
    mutants.append({"rule": "a-retired-rule", "hash": "1" * 16})
    record.path.write_text(json.dumps(body))
    (line,) = problems(recorded)
    assert (
        line
        == f"one-step: the rules give other mutants today (new mutants: {gone}; gone: a-retired-rule; changed: {changed})"
    )


def test_a_cuda_only_question_is_not_expected_in_a_record_made_without_cuda(recorded: Path) -> None:
    (record,) = load_mutant_records(recorded)
    assert record.device_kind == "cpu"
    write_bank(recorded, QUESTION + SECOND.replace("requires: cpu", "requires: cuda"))
    assert problems(recorded) == []
    assert belongs_in("cuda", "cuda") and belongs_in("cuda", "cpu") and belongs_in("cpu", "any")
