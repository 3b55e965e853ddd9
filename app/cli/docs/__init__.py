"""`ampquiz docs [--check] [--dir DOCS]`: the reference pages made from the code, so they cannot
drift from it: the settings (`app.settings.Settings`), the command line (this package's argparse
parsers) and the question-set YAML (the bank's JSON Schema, `app.bank.schema.json_schema`).

Without `--check` it writes them under `docs/reference/`; with it, it writes nothing and exits 1
naming each page that differs from what the code makes now (`make docs` and the tests check so).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from app.cli.docs.cli_page import cli_page
from app.cli.docs.markdown import REGENERATE
from app.cli.docs.questions_page import questions_yaml_page
from app.cli.docs.settings_page import settings_page

PAGES: dict[str, Callable[[], str]] = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/questions-yaml.md": questions_yaml_page,
}


def generated_pages() -> dict[str, str]:
    """Each page's path under the docs folder, and its text as the code makes it now."""
    return {path: make() for path, make in PAGES.items()}


def stale_pages(docs: Path) -> list[str]:
    """The generated pages under `docs` that differ from what the code makes now (or are missing)."""
    stale = []
    for path, text in generated_pages().items():
        target = docs / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def _cmd_docs(args: argparse.Namespace) -> int:
    docs = Path(args.dir)
    if args.check:
        stale = stale_pages(docs)
        for path in stale:
            print(f"{docs / path} is out of date: run `{REGENERATE}`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated_pages().items():
        target = docs / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "docs", help="write the reference pages made from the code (settings, CLI, question YAML)"
    )
    p.add_argument("--dir", default="docs", help="the docs folder (default: docs)")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming each page that is out of date",
    )
    p.set_defaults(func=_cmd_docs)
