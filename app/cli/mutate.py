"""`ampquiz mutate ID|FILE…`: apply each classic AMP mistake to a snippet and run every mutant.

Prints each mutant's diff against the original and what its run did (printed text, exception,
the explanation's summary), and marks a mutant whose output equals the original's "no visible
effect". `--json` prints the whole runs; `--as-choices` prints multiple-choice distractors proved
by those runs, as YAML to paste under a question's `choices:`; `--record` keeps the runs in
`questions/verified/mutants/<device>-torch<version>.json`, which the "What if…" cards read;
`--check` runs nothing and says whether those records still match the bank and the rules.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import DEFAULT_BANK, load_clean_bank

if TYPE_CHECKING:
    from app.mutate.run import MutationReport


def _targets(args: argparse.Namespace) -> tuple[list[tuple[str, str, str | None]], list[str]] | int:
    """(label, code, device) per snippet and the ids among them that are bank questions; or an exit code."""
    bank = None
    wanted_bank = args.all or any(not Path(t).is_file() for t in args.targets)
    if wanted_bank:
        bank = load_clean_bank(args.bank)
        if bank is None:
            return 1
    out: list[tuple[str, str, str | None]] = []
    ids: list[str] = []
    if args.all:
        questions = [q for q in bank.questions if q.question.code]  # type: ignore[union-attr]
    else:
        questions = []
        for target in args.targets:
            path = Path(target)
            if path.is_file():
                try:
                    out.append((str(path), path.read_text(encoding="utf-8"), None))
                except (OSError, UnicodeDecodeError) as exc:
                    print(f"ampquiz mutate: cannot read {target}: {exc}", file=sys.stderr)
                    return 2
                continue
            loaded = bank.question(target)  # type: ignore[union-attr]
            if loaded is None or not loaded.question.code:
                print(
                    f"ampquiz mutate: {target!r} is neither a file nor a question with code in {args.bank}",
                    file=sys.stderr,
                )
                return 2
            questions.append(loaded)
    for loaded in questions:
        q = loaded.question
        assert q.code is not None
        out.append((loaded.id, q.code, "cuda" if q.requires == "cuda" else None))
        ids.append(loaded.id)
    return out, ids


def _cmd_mutate(args: argparse.Namespace) -> int:
    from app.mutate.freshness import belongs_in
    from app.mutate.run import Snippet, describe, run_mutants
    from app.verify.record import load_mutant_records, write_mutant_record
    from sandbox import Sandbox

    if args.check:
        return _check(args.bank)
    if not args.targets and not args.all:
        print("ampquiz mutate: name a question id or a file, or pass --all", file=sys.stderr)
        return 2
    found = _targets(args)
    if isinstance(found, int):
        return found
    targets, ids = found
    if args.record and len(ids) != len(targets):
        print("ampquiz mutate: --record keeps bank questions only (not files)", file=sys.stderr)
        return 2
    with Sandbox(workers=args.jobs) as sb:
        environment = dict(sb.environment)
        device_kind = str(
            environment.get("device_kind")
        )  # CUDA code cannot run without one: say so, run the rest
        skipped = [t[0] for t in targets if not belongs_in(device_kind, t[2])]
        targets = [t for t in targets if t[0] not in skipped]
        ids = [i for i in ids if i not in skipped]
        for label in skipped:
            print(f"skip {label}: needs a CUDA GPU; this host has none", file=sys.stderr)
        reports = run_mutants(
            [Snippet(code, device) for _label, code, device in targets], sb, workers=args.jobs
        )
    labels = [t[0] for t in targets]
    if args.record:
        entries = {qid: r.record_entry() for qid, r in zip(ids, reports, strict=True)}
        record = write_mutant_record(
            args.bank,
            environment,
            entries,
            records=load_mutant_records(args.bank),
            partial=not args.all,
        )
        print(f"mutant record written: {record.path} ({len(entries)} questions)", file=sys.stderr)
    if args.as_choices:
        _print_choices(labels, reports, environment)
    elif args.json:
        _print_json(labels, reports)
    else:
        for label, report in zip(labels, reports, strict=True):
            _print_report(label, report, describe)
        if len(reports) > 1:
            _print_tally(reports)
    return 0


def _print_json(labels: list[str], reports: list[MutationReport]) -> None:
    if len(reports) == 1:
        print(
            json.dumps({"target": labels[0], **reports[0].to_dict()}, indent=2, ensure_ascii=False)
        )
        return
    body = {
        "questions": [
            {"target": label, **r.to_dict()} for label, r in zip(labels, reports, strict=True)
        ],
        "rules": _tally(reports),
    }
    print(json.dumps(body, indent=2, ensure_ascii=False))


def _print_report(label: str, report: MutationReport, describe: Any) -> None:
    visible = sum(m.visible_effect for m in report.mutants)
    print(f"== {label}: {len(report.mutants)} mutants, {visible} with a visible effect")
    print(f"original: {describe(report.original)}")
    if report.noisy_lines:
        print(
            f"  (printed lines {', '.join(str(i + 1) for i in report.noisy_lines)} differ from run to run: not compared)"
        )
    for m in report.mutants:
        effect = "changes the output" if m.visible_effect else "no visible effect"
        print(
            f"\n[{m.mutant.rule.name}] what if you {m.mutant.rule.title.replace('`', '')}? ({effect})"
        )
        print(textwrap.indent(m.mutant.diff, "  "))
        print(f"  → it {describe(m.run)}")
        summary = (m.run.explanation or {}).get("summary") or []
        for sentence in summary[:2]:
            print(f"  explanation: {sentence}")
    print()


def _tally(reports: list[MutationReport]) -> dict[str, dict[str, int]]:
    """Per rule, and per variant that applied anywhere (`drop-scale@1`, `…@last-call`): on how
    many snippets it applied and how many of those mutants changed the output."""
    from app.mutate.rules import RULES, with_variants

    applied: Counter[str] = Counter()
    visible: Counter[str] = Counter()
    for r in reports:
        for m in r.mutants:
            applied[m.mutant.rule.name] += 1
            visible[m.mutant.rule.name] += m.visible_effect
    return {
        rule.name: {"applied": applied[rule.name], "visible": visible[rule.name]}
        for rule in with_variants(RULES) if rule.base is None or applied[rule.name]
    }  # fmt: skip


def _print_tally(reports: list[MutationReport]) -> None:
    print(
        f"{len(reports)} snippets; per rule (and variant), how many it applied to and how many changed the output:"
    )
    for name, counts in _tally(reports).items():
        label = name if "@" not in name else "  " + name
        print(
            f"  {label:<36} applied {counts['applied']:>3}  changed the output {counts['visible']:>3}"
        )


def _check(bank_root: Path) -> int:
    """`--check`: whether the committed mutant records still match the bank and the rules
    (hashes only, nothing runs); exit 1, naming each stale question, when one does not."""
    from app.mutate.freshness import record_problems
    from app.verify.record import load_mutant_records

    bank = load_clean_bank(bank_root)
    if bank is None:
        return 1
    records = load_mutant_records(bank_root)
    if not records:
        print("no mutant record: run `ampquiz mutate --all --record`")
        return 1
    stale = 0
    for record in records:
        problems = record_problems(bank, record)
        stale += bool(problems)
        print(
            f"{record.path.name}: "
            + ("fresh" if not problems else f"stale, {len(problems)} questions")
        )
        for line in problems:
            print(f"  {line}")
    if stale:
        print("run `ampquiz mutate --all --record` again")
    return 1 if stale else 0


def _print_choices(
    labels: list[str], reports: list[MutationReport], environment: dict[str, Any]
) -> None:
    import yaml

    from app.mutate.run import as_choices

    where = f"{environment.get('device_kind')} · torch {environment.get('torch_version')}"
    for label, report in zip(labels, reports, strict=True):
        choices = as_choices(report)
        print(
            f"      # {label}: {len(choices)} distractors proved by running each mistake ({where})"
        )
        if choices:
            text = yaml.safe_dump(choices, sort_keys=False, allow_unicode=True, width=100)
            print(textwrap.indent(text, "      "), end="")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mutate", help="apply the classic AMP mistakes to a snippet and run each one"
    )
    p.add_argument(
        "targets", nargs="*", metavar="ID|FILE", help="question ids of the bank, or Python files"
    )
    p.add_argument(
        "--bank", type=Path, default=DEFAULT_BANK, help="the question bank (default questions/)"
    )
    p.add_argument("--all", action="store_true", help="every question of the bank that has code")
    p.add_argument("--json", action="store_true", help="print each original and mutant run as JSON")
    p.add_argument(
        "--as-choices", action="store_true", help="print distractors as YAML choices to paste"
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="keep the runs in questions/verified/mutants/ (bank questions only)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="only check that the mutant records match the bank and the rules (nothing runs)",
    )
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (default 2)")
    p.set_defaults(func=_cmd_mutate)
