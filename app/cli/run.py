"""`ampquiz run FILE|-`: run one snippet in the sandbox and print what it printed (or the whole result)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from sandbox import Limits, Sandbox

EXIT_CODES = {
    "ok": 0,
    "error": 1,
    "timeout": 2,
    "memory": 2,
    "output_limit": 2,
    "killed": 2,
    "unavailable": 3,
}


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        code = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"ampquiz run: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    limits = Limits(wall_s=args.wall_s, memory_bytes=args.memory_mb << 20)
    with Sandbox(workers=1) as sb:
        result = sb.run(code, limits=limits, explain=args.explain, device=args.device)
    if args.json:
        print(result.to_json(indent=2))
        return EXIT_CODES[result.status]
    if args.explain and result.explanation:
        from app.explain_text import format_explanation, lead_findings

        lead = lead_findings([w.__dict__ for w in result.warnings])
        print(
            format_explanation(
                result.explanation, shutil.get_terminal_size((100, 24)).columns, lead
            )
        )
        print("-" * 72)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    for w in result.warnings:
        where = f"line {w.line}: " if w.line else ""
        print(f"{where}{w.category}: {w.message}", file=sys.stderr)
    if result.exception:
        sys.stderr.write(result.exception.traceback)
    if result.status not in ("ok", "error"):
        print(f"[{result.status}] {result.message}", file=sys.stderr)
    return EXIT_CODES[result.status]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a snippet in the sandbox")
    p.add_argument("file", help="a Python file, or - for standard input")
    p.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    p.add_argument(
        "--explain", action="store_true", help="trace dtypes, GradScaler events and hazards"
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="require a device")
    p.add_argument(
        "--wall-s", type=float, default=10.0, help="wall-time limit in seconds (default 10)"
    )
    p.add_argument(
        "--memory-mb", type=int, default=1024, help="memory allowance in MiB (default 1024)"
    )
    p.set_defaults(func=_cmd_run)
