"""The real command line, as an author types it, and where the bank and the seeds are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
"""The checkout: tests run the command line from here, as an author would."""
BANK = REPO / "questions"
SEEDS = REPO.parent / "shared" / "seeds"


def ampquiz(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The real command line, as an author types it."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        check=False,
    )


def expectation(q: dict) -> dict:
    """A multiple-choice question's expect block as written: its own, or its one right choice's
    outcome (which is then its expectation)."""
    if q.get("expect"):
        return q["expect"]
    right = [c for c in q.get("choices", []) if c.get("correct")]
    return right[0].get("outcome") or {} if len(right) == 1 else {}


def pick_question(kind: str, *, expect_key: str | None = None) -> str:
    """The id of the first CPU-runnable question of `kind` in the real bank (with that expect key)."""
    for path in sorted(BANK.glob("*.yaml")):
        for q in yaml.safe_load(path.read_text())["questions"]:
            runnable = q["kind"] == kind and q.get("code") and q.get("requires", "any") != "cuda"
            if runnable and (expect_key is None or expectation(q).get(expect_key)):
                return q["id"]
    raise AssertionError(f"the bank has no {kind} question with code")
