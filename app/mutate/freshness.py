"""Whether a mutant record still describes the bank: the cheap check (hashes only, nothing runs)
that tells an author, and CI, to run `ampquiz mutate --all --record` again.

A recorded mutant whose hash no longer matches is never shown (`fresh_mutants` in
`app.verify.record`), so a stale record fails quietly: the "What if…" cards of an edited question
just disappear. `record_problems` says so out loud, per question. `rules_version` names the
rules a record was made under: while it holds, a page takes the record's mutants as they are.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from functools import lru_cache
from pathlib import Path

from app.bank.load import Bank
from app.mutate.apply import mutants_of
from app.verify.record import MutantRecord, code_hash, mutant_hash, recorded_hashes

_ENGINE = Path(__file__).parent
"""The mutation engine's modules: what a mutant of a given code is depends on them alone (and on
`mutant_hash`)."""


@lru_cache(maxsize=1)
def rules_version() -> str | None:
    """A digest of the mutation engine's code (every module of `app.mutate`, and `mutant_hash`'s):
    a record made under the same digest holds exactly the mutants these rules derive from the
    code it names, so a page can show them without deriving them again (~90 ms a question, once
    per web process). Any change to what the code says changes it; layout and comments do not
    (the digest is of the syntax tree), so reformatting keeps a record fresh. The page then
    derives them, as for a record made before versions were kept. None where the source is not
    there to read (nothing is taken on trust then)."""
    try:
        digest = hashlib.sha256()
        for path in sorted(_ENGINE.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + _syntax(path.read_text()) + b"\0")
        digest.update(_syntax(textwrap.dedent(inspect.getsource(mutant_hash))))
    except (OSError, TypeError, SyntaxError):
        return None
    return digest.hexdigest()[:16]


def _syntax(source: str) -> bytes:
    """The code's syntax tree without positions: what it does, not how it is laid out."""
    return ast.dump(ast.parse(source)).encode()


def belongs_in(device_kind: str, requires: str | None) -> bool:
    """Whether a record made on `device_kind` holds a question that `requires` that device: every
    question with code, except CUDA-only ones in a record made without CUDA (they cannot run)."""
    return requires != "cuda" or device_kind == "cuda"


def record_problems(bank: Bank, record: MutantRecord) -> list[str]:
    """What in `record` no longer matches `bank` and today's rules, one line per question; empty
    when the record is fresh."""
    problems: list[str] = []
    expected = {
        q.id: q.question.code
        for q in bank.questions
        if q.question.code and belongs_in(record.device_kind, q.question.requires)
    }
    for qid in sorted(set(record.questions) - set(expected)):
        problems.append(f"{qid}: recorded, but no longer a question with code in the bank")
    for qid, code in expected.items():
        entry = record.questions.get(qid)
        if not isinstance(entry, dict):
            problems.append(f"{qid}: not in the record")
            continue
        if entry.get("code_hash") != code_hash(code or ""):
            problems.append(f"{qid}: its code changed since the record")
            continue
        today = {m.rule.name: m.hash for m in mutants_of(code or "")}
        recorded = recorded_hashes(entry)
        if recorded != today:
            new = sorted(set(today) - set(recorded))
            gone = sorted(set(recorded) - set(today))
            changed = sorted(r for r in set(today) & set(recorded) if today[r] != recorded[r])
            parts = [f"{label}: {', '.join(names)}" for label, names in
                     (("new mutants", new), ("gone", gone), ("changed", changed)) if names]  # fmt: skip
            problems.append(f"{qid}: the rules give other mutants today ({'; '.join(parts)})")
    return problems
