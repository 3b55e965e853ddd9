"""The "What if…" cards a learner sees after answering: each classic mistake applied to the
question's code, its diff, and what its recorded run printed.

Only what a mutant record holds is shown (`ampquiz mutate --record`; nothing runs on a page
view), and only while it holds: a recorded mutant is shown when the rule still turns today's code
into the code that ran (`fresh_mutants` in `app.verify.record`). No web framework here.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bank.load import LoadedQuestion
from app.mutate.apply import mutants_of
from app.mutate.freshness import rules_version
from app.mutate.rules import rule as rule_named
from app.verify.live_bank import files_signature
from app.verify.record import (
    MutantRecord,
    code_hash,
    fresh_mutants,
    load_mutant_records,
    mutants_dir,
    recorded_hashes,
)

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class Card:
    rule: str
    title: str
    """Markdown, completing "What if you…"."""
    explanation: str
    diff: list[dict[str, str]]
    """The diff's lines: `kind` (`add`, `del`, `ctx`, `hunk`) and `text`."""
    run: dict[str, Any]
    """The recorded run (`app.mutate.run.recorded_run`)."""
    visible_effect: bool


@dataclass
class WhatIf:
    cards: list[Card]
    original: dict[str, Any]
    device_kind: str
    torch_version: str
    date: str
    hidden: int = 0
    """Recorded mutants left out because they no longer match the code."""

    @property
    def where(self) -> str:
        device = "CUDA" if self.device_kind == "cuda" else "CPU"
        return f"run on {device} · torch {self.torch_version} · {self.date}"


def diff_lines(diff: str) -> list[dict[str, str]]:
    out = []
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")):
            continue
        hunk = _HUNK.match(line)
        if hunk:
            out.append({"kind": "hunk", "text": f"from line {hunk.group(1)}"})
        elif line.startswith("+"):
            out.append({"kind": "add", "text": line})
        elif line.startswith("-"):
            out.append({"kind": "del", "text": line})
        else:
            out.append({"kind": "ctx", "text": line})
    return out


def what_if(
    records: list[MutantRecord], loaded: LoadedQuestion, environment: dict[str, Any]
) -> WhatIf | None:
    """The cards of one question from the records, or None when none holds for today's code.
    The record of the device the question asks about is used, this server's torch version first,
    then the newest."""
    code = loaded.question.code
    if not code:
        return None
    derived: dict[str, Any] | None = None

    def current(entry: dict[str, Any]) -> dict[str, Any]:
        """Each rule that applies to today's code -> its mutant's hash: as recorded, when the
        record was made from this code under these rules; else derived (once)."""
        nonlocal derived
        version = rules_version()
        if (
            version is not None
            and entry.get("rules") == version
            and entry.get("code_hash") == code_hash(code)
        ):
            return recorded_hashes(entry)
        if derived is None:
            derived = {m.rule.name: m.hash for m in mutants_of(code)}
        return derived

    device = loaded.question.asks_about
    torch_version = str(environment.get("torch_version") or "")
    candidates = [r for r in records if r.device_kind == device and loaded.id in r.questions]
    candidates.sort(
        key=lambda r: (
            r.environment.get("torch_version") == torch_version,
            str(r.environment.get("date", "")),
        ),
        reverse=True,
    )
    for record in candidates:
        entry = record.questions[loaded.id]
        fresh = fresh_mutants(entry, current(entry)) if isinstance(entry, dict) else []
        if not fresh:
            continue
        cards = []
        for m in fresh:
            rule = rule_named(str(m["rule"]))
            if rule is None or not isinstance(m.get("run"), dict):
                continue
            cards.append(Card(rule.name, rule.title, rule.explanation, diff_lines(str(m.get("diff", ""))),
                              m["run"], bool(m.get("visible_effect"))))  # fmt: skip
        cards.sort(key=lambda c: not c.visible_effect)  # stable: the rules' order within each kind
        env = record.environment
        original = entry.get("original")
        return WhatIf(
            cards,
            original if isinstance(original, dict) else {},
            record.device_kind,
            str(env.get("torch_version", "")),
            str(env.get("date", ""))[:10],
            hidden=len(entry.get("mutants") or []) - len(cards),
        )
    return None


class RecordedMutants:
    """A bank folder's mutant records, read again when their files change (checked every few
    seconds, as `app.verify.live_bank` does for the bank)."""

    def __init__(self, bank_root: Path, *, check_every_s: float = 2.0) -> None:
        self.root = Path(bank_root)
        self.check_every_s = check_every_s
        self._lock = threading.Lock()
        self._checked = float("-inf")
        self._signature: tuple = ()
        self._records: list[MutantRecord] = []

    def _current_signature(self) -> tuple:
        folder = mutants_dir(self.root)
        return files_signature(sorted(folder.glob("*.json")) if folder.is_dir() else [])

    def records(self) -> list[MutantRecord]:
        if time.monotonic() - self._checked >= self.check_every_s:
            with self._lock:
                if time.monotonic() - self._checked >= self.check_every_s:
                    self._checked = time.monotonic()
                    signature = self._current_signature()
                    if signature != self._signature:
                        self._records, self._signature = load_mutant_records(self.root), signature
        return self._records

    def what_if(self, loaded: LoadedQuestion, environment: dict[str, Any]) -> WhatIf | None:
        return what_if(self.records(), loaded, environment)
