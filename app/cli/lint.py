"""`ampquiz lint [PATH]`: check question files; every problem as `file:line:col: message`, and
warnings (`file:line:col: warning: …`) that do not fail it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.common import DEFAULT_BANK


def _cmd_lint(args: argparse.Namespace) -> int:
    from app.bank.load import load_bank

    bank = load_bank(args.path)  # never raises: whatever one file holds is a problem at its line
    if hasattr(sys.stdout, "reconfigure"):  # a problem is said whatever the terminal can print
        sys.stdout.reconfigure(errors="backslashreplace")
    for problem in sorted([*bank.problems, *bank.warnings]):
        print(problem)
    n_e, n_w = len(bank.problems), len(bank.warnings)
    counts = f"{n_e} error{'s' if n_e != 1 else ''}" + (
        f", {n_w} warning{'s' if n_w != 1 else ''}" if n_w else ""
    )
    print(f"{len(bank.questions)} questions in {len(bank.sets)} sets, {counts}")
    return 1 if bank.problems else 0  # warnings never fail the lint


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="check question files; every problem as file:line:col")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.set_defaults(func=_cmd_lint)
