"""The verification record: which answer keys were proved by execution, where, and when.

One JSON file per environment under `questions/verified/` (e.g. `cpu-torch2.13.0.json`), committed
with the bank, so a CPU-only server can still say truthfully what was verified on a GPU. Each entry
holds a hash of what was checked (code and key); when the question changes, the entry is stale.

This module owns the record whole: hashing, reading, writing, and the one staleness rule
(`is_stale`) that both `ampquiz verify` and the web pages apply.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.bank.load import AnyQuestion, Bank, LoadedQuestion

if TYPE_CHECKING:
    from app.verify.check import KeyCheck

RECORD_DIR = "verified"


_HASHES: dict[int, tuple[weakref.ref[Any], str]] = {}
"""Each question's hash, by the object (questions are never changed in place: an edit loads a new
one): the proofs of a 5,000-question bank computed it 12,000 times at start-up, 0.3 s of CPU."""


def question_hash(question: AnyQuestion) -> str:
    """Hash of everything a verification depends on: the code, where it runs, and the answer key.
    Fields added to the format since records were first written count only when set, so adding a
    field never makes every committed record stale."""
    kept = _HASHES.get(id(question))
    if kept is not None and kept[0]() is question:
        return kept[1]
    if len(_HASHES) >= 100_000:
        _HASHES.clear()
    found = _question_hash(question)
    _HASHES[id(question)] = (weakref.ref(question), found)
    return found


def _question_hash(question: AnyQuestion) -> str:
    data = question.model_dump(
        mode="json",
        include={"code", "requires", "device", "kind", "answer", "accept", "tolerance", "device_answers",
                 "expect", "device_expect", "torch_versions"},
    )  # fmt: skip
    for later in ("device", "tolerance", "torch_versions"):
        if data.get(later) is None:
            data.pop(later, None)
    if question.kind == "multiple_choice":  # which choice is right, and what each says the run does
        data["choices"] = [
            c.model_dump(mode="json", include={"correct", "outcome", "device_outcome"})
            for c in question.choices
        ]
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def is_stale(entry: dict[str, Any], question: AnyQuestion) -> bool:
    """The one staleness rule: an entry is stale when what it checked (code, where it runs, key)
    has changed since, whatever its result. A `skip` is no exception: the change may be the one
    that made the question runnable here (`requires: cuda` became `any`), so "not run" no longer
    holds either."""
    return entry.get("hash") != question_hash(question)


def record_name(environment: dict[str, Any]) -> str:
    return f"{environment['device_kind']}-torch{environment['torch_version']}.json"


@dataclass
class Record:
    path: Path
    environment: dict[str, Any]
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def device_kind(self) -> str:
        return self.environment.get("device_kind", "cpu")

    def to_json(self) -> str:
        body = {"environment": self.environment, "results": dict(sorted(self.results.items()))}
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Verification:
    """What the record says of one question on one device."""

    device_kind: str
    result: str
    """`pass`, `fail`, `skip`, `stale` (the question changed since), or `none` (never verified there)."""
    torch_version: str = ""
    device_name: str = ""
    date: str = ""
    reason: str = ""
    """Why it was not run there (a `skip`)."""

    @property
    def label(self) -> str:
        """What proved the key there, said exactly: "verified by running on CPU · torch 2.13.0 ·
        2026-11-22", "verified on CUDA · NVIDIA H100 · torch 2.13.0 · 2026-11-22", or why not."""
        if self.result == "pass":
            if self.device_kind == "cuda":
                name = f"{self.device_name} · " if self.device_name else ""
                return f"verified on CUDA · {name}torch {self.torch_version} · {self.date}"
            return f"verified by running on CPU · torch {self.torch_version} · {self.date}"
        device = "CUDA" if self.device_kind == "cuda" else "CPU"
        if self.result == "stale":
            return f"verified on {device}: out of date (the question changed since {self.date})"
        if self.result == "fail":
            return f"running it on {device} contradicted the key (torch {self.torch_version}, {self.date})"
        if self.result == "skip":
            why = f": {self.reason}" if self.reason else ""
            return f"not run on {device}{why} ({self.date})"
        return f"not yet verified on {device}"


def records_dir(bank_root: Path) -> Path:
    bank_root = Path(bank_root)
    return (bank_root.parent if bank_root.is_file() else bank_root) / RECORD_DIR


def load_records(bank_root: Path) -> list[Record]:
    records = []
    folder = records_dir(bank_root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            records.append(Record(path, data["environment"], data.get("results", {})))
        except (OSError, ValueError, KeyError):
            continue
    return records


def verifications(records: list[Record], loaded: LoadedQuestion) -> list[Verification]:
    """One line per device (CPU first, then CUDA), newest torch first within a device."""
    question = loaded.question
    if not question.code:
        return []
    out = []
    for device in ("cpu", "cuda"):
        found = [r for r in records if r.device_kind == device and loaded.id in r.results]
        found.sort(key=lambda r: r.environment.get("date", ""), reverse=True)
        if not found:
            out.append(Verification(device, "none"))
            continue
        rec = found[0]
        entry = rec.results[loaded.id]
        result = entry.get("result", "none")
        if is_stale(entry, question):
            result = "stale"
        env = rec.environment
        out.append(
            Verification(device, result, env.get("torch_version", ""), env.get("device_name", ""), env.get("date", "")[:10],
                         entry.get("reason", "") if result == "skip" else "")
        )  # fmt: skip
    return out


def contradicted(records: list[Record], loaded: LoadedQuestion) -> Verification | None:
    """The newest record of the device the question asks about, where its run contradicted the
    key as it is now: such a key is graded nowhere (the live server holds it back, an export
    leaves it out). A record of another device checked that device's output, not the key."""
    asked = next(
        (v for v in verifications(records, loaded) if v.device_kind == loaded.question.asks_about),
        None,
    )
    return asked if asked is not None and asked.result == "fail" else None


def stale_entries(records: list[Record], bank: Bank) -> list[str]:
    """Every record entry that no longer holds, said as `ampquiz verify` prints it."""
    stale = []
    for rec in records:
        for qid, entry in rec.results.items():
            loaded = bank.question(qid)
            if loaded is None:
                stale.append(f"{rec.path.name}: {qid} is no longer in the bank")
            elif is_stale(entry, loaded.question):
                stale.append(f"{rec.path.name}: {qid} changed since it was verified")
    return stale


def write_record(
    bank_root: Path,
    environment: dict[str, Any],
    checks: list[KeyCheck],
    bank: Bank,
    *,
    records: list[Record],
    partial: bool,
) -> Record:
    """Writes (or, with `partial`, updates) the record of this environment, and returns it.

    The environment is stamped with today's date; the protections in force are left out (they
    describe the host's sandbox, not what was proved).
    """
    environment = {k: v for k, v in environment.items() if k != "protections"}
    environment["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    path = records_dir(bank_root) / record_name(environment)
    old = next((r for r in records if r.path.name == path.name), None)
    results = dict(old.results) if old and partial else {}
    for check in checks:
        loaded = bank.question(check.id)
        assert loaded is not None, check.id
        results[check.id] = {"result": check.result, "hash": question_hash(loaded.question)}
        if check.reason:
            results[check.id]["reason"] = check.reason
    path.parent.mkdir(parents=True, exist_ok=True)
    record = Record(path, environment, results)
    path.write_text(record.to_json())
    return record


# ---- mutants: what each classic mistake did to a question's code (`ampquiz mutate --record`) ----
#
# Kept apart from the proofs above, in `verified/mutants/<device>-torch<version>.json`: a mutant's
# run proves no key (most mutants are meant to break), and the folder below `verified/` is not
# read as a verification record by `load_records`. Each recorded mutant carries the hash of the
# original code, the rule and the mutant's code (`mutant_hash`); `fresh_mutants` is the one
# staleness rule: a recorded mutant is shown only while that hash is what the rule gives today.

MUTANTS_DIR = "mutants"


def mutant_hash(original_code: str, rule_name: str, mutant_code: str) -> str:
    """What a recorded mutant run proves: this rule, turning this code into that code."""
    blob = json.dumps([original_code, rule_name, mutant_code], separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def mutants_dir(bank_root: Path) -> Path:
    return records_dir(bank_root) / MUTANTS_DIR


@dataclass
class MutantRecord:
    """The mutants' runs of one environment: per question id, the original's run and each
    mutant's rule, hash, diff, run and whether its output differs from the original's."""

    path: Path
    environment: dict[str, Any]
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def device_kind(self) -> str:
        return self.environment.get("device_kind", "cpu")

    def to_json(self) -> str:
        body = {"environment": self.environment, "questions": dict(sorted(self.questions.items()))}
        return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


def load_mutant_records(bank_root: Path) -> list[MutantRecord]:
    folder = mutants_dir(bank_root)
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            questions = data.get("questions", {})
            if isinstance(data["environment"], dict) and isinstance(questions, dict):
                out.append(MutantRecord(path, data["environment"], questions))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def write_mutant_record(
    bank_root: Path,
    environment: dict[str, Any],
    entries: dict[str, dict[str, Any]],
    *,
    records: list[MutantRecord],
    partial: bool,
) -> MutantRecord:
    """Writes (or, with `partial`, updates) this environment's mutant record, and returns it."""
    environment = {k: v for k, v in environment.items() if k != "protections"}
    environment["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    path = mutants_dir(bank_root) / record_name(environment)
    old = next((r for r in records if r.path.name == path.name), None)
    questions = dict(old.questions) if old and partial else {}
    questions.update(entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = MutantRecord(path, environment, questions)
    path.write_text(record.to_json())
    return record


def recorded_hashes(entry: dict[str, Any]) -> dict[str, Any]:
    """A recorded question's mutants as rule -> hash."""
    return {
        str(m.get("rule")): m.get("hash") for m in entry.get("mutants") or [] if isinstance(m, dict)
    }


def fresh_mutants(entry: dict[str, Any], current: dict[str, str]) -> list[dict[str, Any]]:
    """The recorded mutants of one question that still hold: `current` maps each rule that
    applies to the question's code today to its mutant's hash; a recorded mutant whose rule no
    longer applies, or whose hash differs (the code or the rule changed), is left out."""
    mutants = entry.get("mutants") if isinstance(entry, dict) else None
    return [
        m for m in (mutants if isinstance(mutants, list) else [])
        if isinstance(m, dict) and m.get("hash") is not None and current.get(str(m.get("rule"))) == m.get("hash")
    ]  # fmt: skip
