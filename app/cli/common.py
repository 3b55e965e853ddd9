"""What several commands share: the default bank folder, and loading a bank that must be clean."""

from __future__ import annotations

import sys
from pathlib import Path

from app.bank.load import Bank, load_bank

DEFAULT_BANK = Path("questions")


def load_clean_bank(path: Path) -> Bank | None:
    """The bank, or None after printing its problems: commands that run questions need all of it."""
    bank = load_bank(path)
    if not bank.problems:
        return bank
    for problem in sorted(bank.problems):
        print(problem, file=sys.stderr)
    print(f"{len(bank.problems)} errors in the bank: fix them first (ampquiz lint)", file=sys.stderr)
    return None
