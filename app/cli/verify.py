"""`ampquiz verify`: prove the bank's answer keys by running them; optionally keep the record."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import DEFAULT_BANK, load_clean_bank, remote_settings

if TYPE_CHECKING:
    from app.bank.load import Bank
    from app.verify.check import KeyCheck


class Progress:
    """A one-line progress bar on a terminal; silent when stderr is not one (CI logs stay clean)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.lock = threading.Lock()

    def step(self, check: KeyCheck) -> None:
        with self.lock:
            self.done += 1
            if self.enabled:
                width = 30
                filled = width * self.done // self.total
                mark = {"pass": "✓", "fail": "✗", "skip": "·"}[check.result]
                sys.stderr.write(
                    f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {mark} {check.id[:40]:<40}"
                )
                sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 90 + "\r")


def _show(args: argparse.Namespace, bank: Bank) -> int:
    from sandbox import Sandbox

    loaded = bank.question(args.show)
    if loaded is None or not loaded.question.code:
        print(f"no question with code has the id {args.show!r}", file=sys.stderr)
        return 2
    with Sandbox(workers=1) as sb:
        run = sb.run(
            loaded.question.code, device="cuda" if loaded.question.requires == "cuda" else None
        )
    sys.stdout.write(run.stdout)
    if run.exception:
        print(f"# raises {run.exception.type}: {run.exception.message}", file=sys.stderr)
    for w in run.warnings:
        print(f"# warns {w.category}: {w.message}", file=sys.stderr)
    if run.status not in ("ok", "error"):
        print(f"# [{run.status}] {run.message}", file=sys.stderr)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from app.verify.check import verify_questions
    from app.verify.record import load_records, stale_entries
    from sandbox import Sandbox

    bank = load_clean_bank(args.path)
    if bank is None:
        return 1
    if args.show:
        return _show(args, bank)
    questions = bank.questions
    if args.only:
        unknown = sorted(set(args.only) - {q.id for q in questions})
        if unknown:
            print(f"unknown question id(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        questions = [q for q in questions if q.id in set(args.only)]
    questions = [q for q in questions if q.question.code]
    records = load_records(args.path)
    stale_before = stale_entries(records, bank)
    if args.remote:
        return _verify_remote(args, bank, questions, records, stale_before)
    progress = Progress(len(questions), sys.stderr.isatty() and not args.json)
    with Sandbox(workers=args.jobs) as sb:
        checks = verify_questions(questions, sb, jobs=args.jobs, on_done=progress.step)
        environment = dict(sb.environment)
    progress.finish()
    return _report(args, bank, checks, environment, records, stale_before)


def _verify_remote(
    args: argparse.Namespace, bank: Bank, questions: list, records: list, stale_before: list[str]
) -> int:
    """The bank on whatever workers are online, one record per environment (device kind)."""
    from app.runs.blocking import MixedWorkers, NoWorkerOnline, remote_pools
    from app.verify.check import verify_questions

    settings = remote_settings("verify --remote")
    if settings is None:
        return 2
    url = settings.workers_url
    worst = 0
    try:
        with remote_pools(url) as pools:
            for pool in pools:
                progress = Progress(len(questions), sys.stderr.isatty() and not args.json)
                checks = verify_questions(
                    questions,
                    pool,  # type: ignore[arg-type]
                    jobs=max(args.jobs, pool.workers),
                    on_done=progress.step,
                )
                progress.finish()
                worst = max(
                    worst,
                    _report(args, bank, checks, dict(pool.environment), records, stale_before),
                )
    except (MixedWorkers, NoWorkerOnline) as exc:
        print(f"ampquiz verify --remote: {exc}", file=sys.stderr)
        return 2
    return worst


def _report(
    args: argparse.Namespace,
    bank: Bank,
    checks: list[KeyCheck],
    environment: dict,
    records: list,
    stale_before: list[str],
) -> int:
    """Writes the record (with --record) and prints what one environment's checks found."""
    from app.verify.record import write_record

    counts = {k: sum(o.result == k for o in checks) for k in ("pass", "fail", "skip")}
    if args.record:
        record = write_record(
            args.path, environment, checks, bank, records=records, partial=bool(args.only)
        )
        environment = record.environment
    if args.json:
        report = {
            "environment": environment,
            "counts": counts,
            "stale": stale_before,
            "questions": [o.to_dict() for o in checks],
        }
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 1 if counts["fail"] else 0
    for o in checks:
        if o.result == "fail":
            found = bank.question(o.id)
            where = f"{found.path}:{found.line}: " if found is not None else ""
            print(f"{where}FAIL {o.id} ({o.set_id}, on {o.device}): {o.reason}")
            if o.diff:
                print("  " + o.diff.replace("\n", "\n  "))
            if o.exception:
                print("  " + o.exception.strip().replace("\n", "\n  "))
            for sentence in o.summary:
                print(f"  explanation: {sentence}")
    skipped = [o for o in checks if o.result == "skip"]
    if skipped:
        print(f"skipped {len(skipped)}:")
        for o in skipped:
            print(f"  skip {o.id}: {o.reason}")
    for line in stale_before:
        print(f"stale record: {line}")
    env = f"{environment.get('device_kind')} {environment.get('device_name')}, torch {environment.get('torch_version')}"
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped on {env}")
    if args.record:
        print(f"record written: {record.path}")
    return 1 if counts["fail"] else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every answer key by running its code")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (default 2)")
    p.add_argument("--only", nargs="+", metavar="ID", help="verify only these question ids")
    p.add_argument("--record", action="store_true", help="write the result to questions/verified/")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--remote",
        action="store_true",
        help="run on the workers online at AMPQUIZ_WORKERS_URL (NATS): one record per device kind",
    )
    p.add_argument(
        "--show", metavar="ID", help="print what a question's code prints, to paste as its answer"
    )
    p.set_defaults(func=_cmd_verify)
