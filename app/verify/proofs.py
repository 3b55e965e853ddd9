"""What proved each answer key on this server (proving on load what nothing has proved yet is
`app.verify.prover`'s).

The live server grades only keys it has proof of. Each question is in one state:

- `conceptual`: no code, nothing to run; graded on the author's word, and said so.
- `proved`: a committed record for this server's environment (device kind and torch version),
  or a run on this server, agrees with the key; graded.
- `elsewhere`: the key is about a device this server does not run the code on (CUDA on a CPU
  host, the CPU's output on a CUDA host); graded, with the committed record of that device if
  there is one, else said plainly: "not yet verified on CUDA".
- `pending`: runnable here and not proved yet (a new or changed file): shown, never graded, until
  its run is in (a second or two; `app.verify.prover` runs it in the background).
- `held_back`: running it here (or this environment's record, or the record of the device it
  asks about) contradicts the key, or the key is about torch releases this server does not run
  and no record made on one proves it: shown as "under review", never graded, and listed by
  /healthz and `ampquiz status` with the diff.

No web framework here: the web asks `ProofBook.proof()` before grading and shows its lines.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.bank.lint import words_against_key
from app.bank.load import Bank, LoadedQuestion
from app.bank.schema import MultipleChoiceQuestion
from app.bank.torch_range import torch_in_range
from app.verify.check import KeyCheck, check, skip_reason
from app.verify.record import (
    Record,
    Verification,
    contradicted,
    is_stale,
    question_hash,
    verifications,
)
from sandbox import RunResult
from sandbox.result import TRANSIENT

log = logging.getLogger("ampquiz.proofs")

GRADEABLE = {"conceptual", "proved", "elsewhere"}
_RETRIES = 3


@dataclass(frozen=True)
class Proof:
    state: str
    badges: list[dict[str, str]] = field(default_factory=list)
    """What proved the key, one per device: `{"device": "cpu", "result": "pass", "label": "verified by running on
    CPU · torch 2.13.0 · 2026-11-22"}`; results are pass, fail, stale, skip, none, pending,
    conceptual."""
    reason: str = ""
    diff: str = ""

    @property
    def gradeable(self) -> bool:
        return self.state in GRADEABLE

    @property
    def lines(self) -> list[str]:
        return [b["label"] for b in self.badges]

    def on_the_authors_word(self, asks_about: str) -> bool:
        """Graded (a key about a device this server does not run the code on) with no record of
        that device proving it: every verdict given on it says so."""
        return self.state == "elsewhere" and not any(
            b["device"] == asks_about and b["result"] == "pass" for b in self.badges
        )


def _badge(device: str, result: str, label: str) -> dict[str, str]:
    return {"device": device, "result": result, "label": label}


@dataclass
class _RunHere:
    result: str
    """`pass` or `fail`."""
    date: str
    reason: str = ""
    diff: str = ""


class ProofBook:
    """The proofs this server holds: committed records, and the runs it made itself (in memory,
    keyed by the hash of what was checked, so an edit back to a proved version is proved at once)."""

    def __init__(self, environment: dict[str, Any]) -> None:
        self.device = str(environment.get("device_kind") or "cpu")
        self.torch_version = str(environment.get("torch_version") or "")
        self._runs: dict[str, _RunHere] = {}
        self._contradicted: dict[str, _RunHere] = {}
        """Keys a later run of their code contradicted (`witness`): held back whatever proved them."""
        self._witnessed: dict[tuple[str, int], RunResult] = {}
        self._failures: dict[str, int] = {}
        self.version = 0
        """Counts what this server learned by running; a summary is recomputed when it moves."""
        self._summary: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    def follow(self, environment: dict[str, Any]) -> None:
        """Where this server's runs land now. It changes when remote workers come online after the
        web started (or are replaced by others): the proofs are then those of the new environment,
        and what was proved by running elsewhere is forgotten."""
        device = str(environment.get("device_kind") or "cpu")
        torch_version = str(environment.get("torch_version") or "")
        if (device, torch_version) != (self.device, self.torch_version):
            self.device, self.torch_version = device, torch_version
            self._runs.clear()
            self._contradicted.clear()
            self._witnessed.clear()
            self._failures.clear()
            self.version += 1

    def _hash(self, loaded: LoadedQuestion) -> str:
        cached = loaded.__dict__.get("_key_hash")
        if cached is None:
            cached = loaded.__dict__["_key_hash"] = question_hash(loaded.question)
        return cached

    @staticmethod
    def _words_against_key(loaded: LoadedQuestion) -> list[str]:
        """`lint.words_against_key`, once per loaded question (proofs are recomputed whenever one
        is made here: across a 5,000-question bank, each time)."""
        cached = loaded.__dict__.get("_words_against_key")
        if cached is None:
            assert isinstance(loaded.question, MultipleChoiceQuestion)
            cached = loaded.__dict__["_words_against_key"] = words_against_key(loaded.question)
        return cached

    def _record_here(self, records: list[Record]) -> Record | None:
        """The committed record of exactly this environment, if there is one."""
        for record in records:
            env = record.environment
            if (
                env.get("device_kind") == self.device
                and env.get("torch_version") == self.torch_version
            ):
                return record
        return None

    def runnable_here(self, loaded: LoadedQuestion) -> bool:
        """Whether a run on this server proves the key learners are graded on: the code runs
        here, on a torch the key is about, and on the device the question asks about. (A CUDA
        host runs a question about the CPU's output too, but its run proves `device_answers.cuda`,
        not the CPU answer graded: that was "proved" there, a wrong CPU key with it.)"""
        q = loaded.question
        return (
            skip_reason(q, self.device, self.torch_version) is None and q.asks_about == self.device
        )

    def proof(self, loaded: LoadedQuestion, records: list[Record]) -> Proof:
        """What proves this question's key; kept on the question until the records or this
        server's own proofs change (every page asks, once per request)."""
        cached = loaded.__dict__.get("_proof")
        if (
            cached is not None
            and cached[0] is self
            and cached[1] is records
            and cached[2] == self.version
        ):
            return cached[3]
        found = self._proof(loaded, records)
        loaded.__dict__["_proof"] = (self, records, self.version, found)
        return found

    def _proof(self, loaded: LoadedQuestion, records: list[Record]) -> Proof:
        q = loaded.question
        if not q.code:
            return Proof("conceptual", [_badge("", "conceptual", "conceptual — no code to run")])
        by_device = {v.device_kind: v for v in verifications(records, loaded)}
        if isinstance(q, MultipleChoiceQuestion) and (said := self._words_against_key(loaded)):
            # A run checks a right choice's outcome; a learner picks its words. Where they plainly
            # disagree (texts swapped between choices), no run can prove what learners are graded on.
            badges = [_badge(v.device_kind, v.result, v.label) for v in by_device.values()]
            return Proof(
                "held_back",
                badges,
                reason=f"the right choice's words disagree with its outcome: {said[0]}",
            )
        if not self.runnable_here(loaded):
            return self._proof_elsewhere(loaded, records, by_device)
        others = [
            _badge(v.device_kind, v.result, v.label)
            for kind, v in by_device.items()
            if kind != self.device
        ]
        device = "CUDA" if self.device == "cuda" else "CPU"
        key = self._hash(loaded)
        here = self._runs.get(key)
        # What this server's own runs said comes first: a record that says pass outranks neither.
        if (later := self._contradicted.get(key)) is not None:  # a run handed out since (`witness`)
            label = (
                f"under review: a run of its code on {device} contradicted the key ({later.date})"
            )
            return Proof(
                "held_back",
                [_badge(self.device, "fail", label), *others],
                reason=later.reason,
                diff=later.diff,
            )
        if here is not None and here.result == "fail":  # the prover's
            label = f"under review: running it on {device} contradicts the key ({here.date})"
            return Proof(
                "held_back",
                [_badge(self.device, "fail", label), *others],
                reason=here.reason,
                diff=here.diff,
            )
        record = self._record_here(records)
        entry = record.results.get(loaded.id) if record is not None else None
        if record is not None and entry is not None and not is_stale(entry, loaded.question):
            env = record.environment
            recorded = Verification(self.device, str(entry.get("result")), self.torch_version,
                                    str(env.get("device_name") or ""), str(env.get("date", ""))[:10])  # fmt: skip
            if recorded.result == "pass":
                return Proof("proved", [_badge(self.device, "pass", recorded.label), *others])
            if recorded.result == "fail":
                why = str(entry.get("reason") or "the record says its run contradicts the key")
                return Proof(
                    "held_back", [_badge(self.device, "fail", recorded.label), *others], reason=why
                )
        if here is None:
            label = f"being verified on {device} now: answers open when its run is in"
            return Proof("pending", [_badge(self.device, "pending", label), *others])
        label = f"verified by running on {device} · torch {self.torch_version} · {here.date} (on this server)"
        return Proof("proved", [_badge(self.device, "pass", label), *others])

    def _proof_elsewhere(
        self, loaded: LoadedQuestion, records: list[Record], by_device: dict[str, Verification]
    ) -> Proof:
        """A key no run on this server can prove (another device's output, another torch's):
        graded on the committed record of the device it asks about, held back where that record
        contradicts it. A key about torch releases this server does not run is held back unless
        a record made on one of them proves it: the run a learner sees beside the verdict is
        this server's torch's, and one that said otherwise was graded on the author's word."""
        q = loaded.question
        badges = [_badge(v.device_kind, v.result, v.label) for v in by_device.values()]
        if (asked := contradicted(records, loaded)) is not None:
            device = "CUDA" if q.asks_about == "cuda" else "CPU"
            return Proof(
                "held_back",
                badges,
                reason=f"the {device} record says its run contradicts the key ({asked.date})",
            )
        if not torch_in_range(
            q.torch_versions, self.torch_version
        ) and not _proved_on_a_torch_asked_about(loaded, records):
            reason = (f"its key is what torch {q.torch_versions} does; this server runs torch {self.torch_version}, "
                      "and no committed record made on such a torch proves it")  # fmt: skip
            return Proof("held_back", badges, reason=reason)
        return Proof("elsewhere", badges)

    def to_prove(self, bank: Bank, records: list[Record]) -> list[LoadedQuestion]:
        return [q for q in bank.questions if self.proof(q, records).state == "pending"]

    def remember(self, loaded: LoadedQuestion, checked: KeyCheck) -> None:
        today = datetime.now(UTC).date().isoformat()
        self._runs[self._hash(loaded)] = _RunHere(
            checked.result, today, checked.reason, checked.diff
        )
        self.version += 1

    def witness(self, loaded: LoadedQuestion, run: RunResult) -> None:
        """A run of the question's code made for another reason (the run a result page shows,
        shared by every learner), checked against the key as the prover's are: one that
        contradicts it holds the key back, whatever proved it before. Code that prints a random
        value passed the prover's two runs (and the committed record's) by luck, and the page
        then graded learners on the key beside a run that printed something else."""
        key = self._hash(loaded)
        seen = (
            key,
            id(run),
        )  # checked once per version of the key and run (a result page asks each time)
        if self._witnessed.get(seen) is run:
            return
        if len(self._witnessed) >= 4096:
            self._witnessed.clear()
        self._witnessed[seen] = run  # held, so its id is not another run's meanwhile
        if (
            not self.runnable_here(loaded)
            or run.status in TRANSIENT
            or run.status == "unavailable"
            or key in self._contradicted
        ):
            return
        checked = check(loaded, run, self.device)
        if checked.result == "fail":
            reason = f"a run of its code made after it was proved contradicts it: {checked.reason}"
            self._contradicted[key] = _RunHere(
                "fail", datetime.now(UTC).date().isoformat(), reason, checked.diff
            )
            self.version += 1
            log.warning("held back %s (%s): %s", loaded.id, loaded.path, reason)

    def tries_ended_early(self, loaded: LoadedQuestion) -> int:
        """How many proofs of this version of the key ended for a reason of the moment."""
        return self._failures.get(self._hash(loaded), 0)

    def transient_failure(self, loaded: LoadedQuestion, why: str) -> None:
        """A run that ended for a reason that may not happen next time (a timeout on a busy
        host): tried again, and held back only when it keeps happening."""
        key = self._hash(loaded)
        self._failures[key] = self._failures.get(key, 0) + 1
        if self._failures[key] >= _RETRIES:
            today = datetime.now(UTC).date().isoformat()
            self._runs[key] = _RunHere("fail", today, f"its run keeps ending early: {why}")
            self.version += 1

    def summary(self, bank: Bank, records: list[Record]) -> dict[str, Any]:
        """Counts per state, and every held-back question with why (for /healthz and the footer);
        computed once per bank, records and proofs made here."""
        key = (id(bank), id(records), self.version)
        cached = self._summary  # one read: another thread may swap it meanwhile
        if cached is None or cached[0] != key:
            cached = (key, self._summarise(bank, records))
            self._summary = cached
        return cached[1]

    def _summarise(self, bank: Bank, records: list[Record]) -> dict[str, Any]:
        counts = {
            state: 0 for state in ("proved", "conceptual", "elsewhere", "pending", "held_back")
        }
        held = []
        for q in bank.questions:
            proof = self.proof(q, records)
            counts[proof.state] += 1
            if proof.state == "held_back":
                held.append(
                    {
                        "id": q.id,
                        "set_id": q.set_id,
                        "file": f"{q.path}:{q.line}",
                        "reason": proof.reason,
                        "diff": proof.diff,
                    }
                )
        elsewhere_proved = sum(
            1 for q in bank.questions
            if not self.runnable_here(q) and q.question.code
            and any(v.result == "pass" for v in verifications(records, q) if v.device_kind != self.device)
        )  # fmt: skip
        return {
            "device": self.device,
            "counts": counts,
            "elsewhere_proved": elsewhere_proved,
            "held_back": held,
        }


def _proved_on_a_torch_asked_about(loaded: LoadedQuestion, records: list[Record]) -> bool:
    """Whether a committed record made on the device the question asks about, with a torch in its
    `torch_versions`, proves the key as it is now."""
    q = loaded.question
    for record in records:
        entry = record.results.get(loaded.id)
        env = record.environment
        if (entry is not None and entry.get("result") == "pass" and not is_stale(entry, q)
                and record.device_kind == q.asks_about and torch_in_range(q.torch_versions, str(env.get("torch_version") or ""))):  # fmt: skip
            return True
    return False
