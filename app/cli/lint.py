"""`ampquiz lint [PATH]`: check question files; every problem as `file:line:col: message`."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.bank.load import load_bank
from app.cli.common import DEFAULT_BANK


def _cmd_lint(args: argparse.Namespace) -> int:
    bank = load_bank(args.path)
    for problem in sorted(bank.problems):
        print(problem)
    n_e = len(bank.problems)
    print(f"{len(bank.questions)} questions in {len(bank.sets)} sets, {n_e} error{'s' if n_e != 1 else ''}")
    return 1 if bank.problems else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="check question files; every problem as file:line:col")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.set_defaults(func=_cmd_lint)
