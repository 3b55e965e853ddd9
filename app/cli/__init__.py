"""`ampquiz` command line. Each command is one module here with a `register(subparsers)`.

To add a command: write `app/cli/<name>.py` with `register()` and list it in `COMMANDS`.
Commands import what they need when they run, so `ampquiz lint` never starts torch.
"""

from __future__ import annotations

import argparse

from app.cli import (
    db,
    docs,
    export,
    instructor,
    interview,
    lint,
    mutate,
    run,
    schema,
    serve,
    status,
    verify,
    worker,
    workers,
)

COMMANDS = (
    lint,
    schema,
    export,
    run,
    verify,
    status,
    serve,
    worker,
    workers,
    instructor,
    interview,
    mutate,
    docs,
    db,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ampquiz",
        description="ampquiz command line: "
        + ", ".join(c.__name__.rsplit(".", 1)[1] for c in COMMANDS),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
