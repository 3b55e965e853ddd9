"""`ampquiz schema`: the JSON Schema of a question-set file, for editors."""

from __future__ import annotations

import argparse
import json


def _cmd_schema(args: argparse.Namespace) -> int:
    from app.bank.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of a question-set file")
    p.set_defaults(func=_cmd_schema)
