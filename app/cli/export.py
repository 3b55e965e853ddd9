"""`ampquiz export [PATH] --format json`: the whole normalised bank, one object per question."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.cli.common import DEFAULT_BANK, load_clean_bank


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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="print the whole normalised bank")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.add_argument("--format", choices=["json"], default="json")
    p.set_defaults(func=_cmd_export)
