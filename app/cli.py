"""`ampquiz` command line: lint, schema, export, run, verify, serve."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_BANK = "questions"


def _cmd_lint(args: argparse.Namespace) -> int:
    from app.bank import load_bank

    bank = load_bank(args.path)
    for problem in sorted(bank.problems):
        print(problem)
    n_q = len(bank.questions)
    n_s = len(bank.sets)
    n_e = len(bank.problems)
    print(f"{n_q} questions in {n_s} sets, {n_e} error{'s' if n_e != 1 else ''}")
    return 1 if bank.problems else 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from app.bank_schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def load_clean_bank(path: Path):
    """The bank, or None after printing its problems: commands that run questions need all of it."""
    from app.bank import load_bank

    bank = load_bank(path)
    if not bank.problems:
        return bank
    for problem in sorted(bank.problems):
        print(problem, file=sys.stderr)
    print(f"{len(bank.problems)} errors in the bank: fix them first (ampquiz lint)", file=sys.stderr)
    return None


def _cmd_export(args: argparse.Namespace) -> int:
    bank = load_clean_bank(args.path)
    if bank is None:
        return 1
    rows = [
        {"set_id": q.set_id, "set_title": s.model.title, **q.question.model_dump(mode="json")}
        for s in bank.sets
        for q in s.questions
    ]
    print(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ampquiz", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("lint", help="check question files; every problem as file:line:col")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.set_defaults(func=_cmd_lint)

    p = sub.add_parser("schema", help="print the JSON Schema of a question-set file")
    p.set_defaults(func=_cmd_schema)

    p = sub.add_parser("export", help="print the whole normalised bank")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.add_argument("--format", choices=["json"], default="json")
    p.set_defaults(func=_cmd_export)

    from app import cli_run, cli_serve, cli_verify

    cli_run.register(sub)
    cli_verify.register(sub)
    cli_serve.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
