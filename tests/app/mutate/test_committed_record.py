"""The committed mutant record (questions/verified/mutants/), read as CI finds it; nothing runs.

- It is fresh: every question with code that its device can run has an entry, and each entry's
  mutants are exactly what today's rules make of today's code (same rules, same hashes). A stale
  record does not break a page, it silently hides "What if…" cards; here it fails instead, saying
  to run `ampquiz mutate --all --record`. It was also made under today's rules (their version),
  so pages need not derive its mutants again.
- Issue 17's promise: every GradScaler question (`app.mutate.subject`) has at least three mutants
  whose recorded output differs visibly from the original's.
"""

from __future__ import annotations

import pytest

from app.bank.load import Bank, load_bank
from app.mutate.freshness import belongs_in, record_problems, rules_version
from app.mutate.subject import is_gradscaler_question
from app.verify.record import MutantRecord, load_mutant_records
from tests.support.cli import BANK

AT_LEAST = 3


@pytest.fixture(scope="module")
def bank() -> Bank:
    return load_bank(BANK)


@pytest.fixture(scope="module")
def records() -> list[MutantRecord]:
    found = load_mutant_records(BANK)
    assert found, "no mutant record is committed: run `ampquiz mutate --all --record`"
    return found


def test_the_committed_record_matches_the_bank_and_the_rules(
    bank: Bank, records: list[MutantRecord]
) -> None:
    for record in records:
        problems = record_problems(bank, record)
        assert not problems, (
            f"{record.path.name} is stale; run `ampquiz mutate --all --record`:\n"
            + "\n".join(problems)
        )


def test_the_committed_record_was_made_under_todays_rules(records: list[MutantRecord]) -> None:
    """So the pages take its mutants as recorded instead of applying every rule to every
    question's code at their first view in each web process (see `rules_version`)."""
    version = rules_version()
    assert version is not None
    for record in records:
        other = sorted(
            qid for qid, entry in record.questions.items() if entry.get("rules") != version
        )
        assert not other, (
            f"{record.path.name} was made under other rules (app/mutate/ changed since): run "
            f"`ampquiz mutate --all --record` ({len(other)} questions, e.g. {other[:3]})"
        )


def seen(run: dict) -> tuple:
    """What a learner sees of a recorded run: how it ended, what it printed, what it raised."""
    exc = run.get("exception") or {}
    return (
        run.get("status"),
        (run.get("stdout") or "").rstrip(),
        exc.get("type"),
        exc.get("message"),
    )


def test_every_gradscaler_question_has_three_mutants_that_visibly_change_it(
    bank: Bank, records: list[MutantRecord]
) -> None:
    checked = 0
    for record in records:
        for loaded in bank.questions:
            code = loaded.question.code
            if (
                not code
                or not is_gradscaler_question(code)
                or not belongs_in(record.device_kind, loaded.question.requires)
            ):
                continue
            entry = record.questions[loaded.id]
            original = seen(entry["original"])
            visible = [
                m["rule"]
                for m in entry["mutants"]
                if m["visible_effect"] and seen(m["run"]) != original
            ]
            assert len(visible) >= AT_LEAST, (record.path.name, loaded.id, visible)
            checked += 1
    assert checked, "no GradScaler question in any committed record"
