"""The mutate tests' shared fixture: a one-question bank with its mutant record, made by really
running the mutants (through the session's pool)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bank.load import load_bank
from app.mutate.run import Snippet, run_mutants
from app.verify.record import write_mutant_record
from sandbox import Sandbox
from tests.app.mutate.test_cards import write_bank


@pytest.fixture
def recorded(tmp_path: Path, sandbox_pool: Sandbox) -> Path:
    bank_root = write_bank(tmp_path / "bank")
    loaded = load_bank(bank_root).question("one-step")
    assert loaded is not None and loaded.question.code
    (report,) = run_mutants([Snippet(loaded.question.code)], sandbox_pool)
    write_mutant_record(
        bank_root,
        sandbox_pool.environment,
        {"one-step": report.record_entry()},
        records=[],
        partial=False,
    )
    return bank_root
