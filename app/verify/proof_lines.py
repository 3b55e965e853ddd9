"""The proof line an export carries: what proved each answer key, from the committed records,
and the keys an export leaves out because a record contradicts them.

Read from `questions/verified/*.json` next to the bank's files (no sandbox, no network), so
`ampquiz export` works offline and says exactly what the records say. What proves a key on the
live server is `app.verify.proofs`; this is the same records' word, without a server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.bank.lint import words_against_key
from app.bank.load import Bank, LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.verify.record import Record, contradicted, load_records, verifications

ProofLine = Callable[[LoadedQuestion], str]
"""What proved a question's key, as one line: "Answer verified by running on CPU · torch …"."""


def proof_line_from(records: list[Record], loaded: LoadedQuestion) -> str:
    """ "Answer verified by running on CPU · torch 2.13.0 · 2026-11-22" (one clause per device that
    passed), "Conceptual — no code to run", or why the key is not proved ("Answer not proved by
    running: not yet verified on CUDA")."""
    if not loaded.question.code:
        return "Conceptual — no code to run"
    found = verifications(records, loaded)
    passed = [v.label for v in found if v.result == "pass"]
    if passed:
        return "Answer " + "; ".join(passed)
    asked = next(v for v in found if v.device_kind == loaded.question.asks_about)
    return f"Answer not proved by running: {asked.label}"


def committed_proof_lines() -> ProofLine:
    """Proof lines from the records committed beside each question's file (read once per folder,
    when first asked: make a new one to see records written since)."""
    by_folder: dict[Path, list[Record]] = {}

    def proof_line(loaded: LoadedQuestion) -> str:
        folder = Path(loaded.path).parent
        if folder not in by_folder:
            by_folder[folder] = load_records(folder)
        return proof_line_from(by_folder[folder], loaded)

    return proof_line


def without_contradicted_keys(bank: Bank) -> tuple[Bank, list[str]]:
    """The bank less every question whose committed record (of the device it asks about)
    contradicts its key, or whose right choice's words disagree with its outcome, as the live
    server holds such a key back: an LMS would grade learners
    on it, the contradiction said only in feedback shown after grading. Also a line for each
    question left out, with its file and what the record says."""
    by_folder: dict[Path, list[Record]] = {}
    kept_sets, left_out = [], []
    for loaded_set in bank.sets:
        kept = []
        for loaded in loaded_set.questions:
            folder = Path(loaded.path).parent
            records = by_folder.setdefault(folder, load_records(folder))
            said = contradicted(records, loaded) if loaded.question.code else None
            words = (
                words_against_key(loaded.question)
                if isinstance(loaded.question, MultipleChoiceQuestion)
                else []
            )
            if said is not None:
                left_out.append(f"{loaded.path}:{loaded.line}: {loaded.id}: {said.label}")
            elif words:  # the live server holds these back too (`app.verify.proofs`)
                left_out.append(
                    f"{loaded.path}:{loaded.line}: {loaded.id}: the right choice's words disagree with its outcome: {words[0]}"
                )
            else:
                kept.append(loaded)
        if kept:
            kept_sets.append(replace(loaded_set, questions=kept))
    return replace(bank, sets=kept_sets), left_out
