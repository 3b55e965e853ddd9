"""Running mutants: the original and every mutant of a snippet through the sandbox, in parallel
(a thread pool as wide as the pool's workers, as `app.verify.check` does), and what each showed.

A mutant has a *visible effect* when what it printed or raised differs from the original's run
(printed text compared as answers are: line endings and trailing whitespace normalised). The
original runs twice: a line that differs between those two runs (an unseeded random number) is
noise, and is not counted as an effect in any mutant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from app.explain_text import what_happened
from app.grading import normalise_output
from app.mutate.apply import Mutant, mutants_of
from app.mutate.freshness import rules_version
from app.mutate.rule import Rule
from app.mutate.rules import RULES
from app.verify.record import code_hash
from sandbox import Limits, RunResult, Sandbox

MUTANT_LIMITS = Limits(wall_s=20, cpu_s=20)
STDOUT_KEPT = 4000
"""Characters of a run's printed text a record keeps (the cards show the start of it)."""


@dataclass
class MutantRun:
    mutant: Mutant
    run: RunResult
    visible_effect: bool

    def to_dict(self) -> dict[str, Any]:
        rule = self.mutant.rule
        return {
            "rule": rule.name,
            "title": rule.title,
            "explanation": rule.explanation,
            "diff": self.mutant.diff,
            "run": self.run.to_dict(),
            "visible_effect": self.visible_effect,
        }


@dataclass
class MutationReport:
    """A snippet, its run, and each mutant's run."""

    code: str
    original: RunResult
    mutants: list[MutantRun] = field(default_factory=list)
    noisy_lines: list[int] = field(default_factory=list)
    """0-based lines of the printed text that differed between two runs of the original."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "original": {"run": self.original.to_dict()},
            "noisy_lines": self.noisy_lines,
            "mutants": [m.to_dict() for m in self.mutants],
        }

    def record_entry(self) -> dict[str, Any]:
        """What `ampquiz mutate --record` keeps of this report: enough to show the cards."""
        return {
            "code_hash": code_hash(self.code),
            "rules": rules_version(),
            "original": recorded_run(self.original),
            "mutants": [
                {
                    "rule": m.mutant.rule.name,
                    "hash": m.mutant.hash,
                    "diff": m.mutant.diff,
                    "visible_effect": m.visible_effect,
                    "run": recorded_run(m.run),
                }
                for m in self.mutants
            ],
        }


def recorded_run(run: RunResult) -> dict[str, Any]:
    """A run as a record keeps it: its status, printed text (the start of it), exception,
    warnings and the summary a learner reads first; not the op trace."""
    exc = run.exception
    stdout = run.stdout if len(run.stdout) <= STDOUT_KEPT else run.stdout[:STDOUT_KEPT] + "\n…"
    return {
        "status": run.status,
        "stdout": stdout,
        "exception": {"type": exc.type, "message": exc.message[:500], "line": exc.line, "source_line": exc.source_line}
        if exc else None,
        "warnings": [{"category": w.category, "message": w.message[:300], "line": w.line} for w in run.warnings[:5]],
        "message": run.message,
        "summary": what_happened(run.to_dict())[:6],
    }  # fmt: skip


def outcome(run: RunResult | dict[str, Any]) -> tuple[str, list[str], str, str]:
    """What a learner sees of a run: status, printed lines, exception type and message."""
    data = run.to_dict() if isinstance(run, RunResult) else run
    exc = data.get("exception") or {}
    return (
        str(data.get("status")),
        normalise_output(str(data.get("stdout") or "")).split("\n"),
        str(exc.get("type") or ""),
        str(exc.get("message") or ""),
    )


def noisy_lines(first: RunResult, second: RunResult) -> list[int] | None:
    """Printed lines that differ between two runs of the same code; None when even the number of
    lines or how the run ended differs (then only how a run ends can be compared)."""
    a, b = outcome(first), outcome(second)
    if a[0] != b[0] or a[2] != b[2] or len(a[1]) != len(b[1]):
        return None
    return [i for i, (x, y) in enumerate(zip(a[1], b[1], strict=True)) if x != y]


def has_visible_effect(original: RunResult, mutant: RunResult, noisy: list[int] | None) -> bool:
    o, m = outcome(original), outcome(mutant)
    if o[0] != m[0] or o[2] != m[2] or o[3] != m[3]:
        return True
    if noisy is None:
        return False
    if len(o[1]) != len(m[1]):
        return True
    return any(x != y for i, (x, y) in enumerate(zip(o[1], m[1], strict=True)) if i not in noisy)


@dataclass(frozen=True)
class Snippet:
    """One snippet to mutate: its code, the device it must run on (None: wherever), and the
    rules to apply (all of them unless said)."""

    code: str
    device: str | None = None
    rules: tuple[Rule, ...] = RULES


def run_mutants(
    snippets: Sequence[Snippet],
    sandbox: Sandbox,
    *,
    workers: int | None = None,
    limits: Limits = MUTANT_LIMITS,
    explain: bool = True,
    on_done: Callable[[int, MutationReport], None] | None = None,
) -> list[MutationReport]:
    """The report of each snippet, in order. Every run of every snippet goes into one thread
    pool, as wide as the sandbox's workers, so the pool stays busy across snippets."""
    mutants = [mutants_of(s.code, s.rules) for s in snippets]
    tasks: list[
        tuple[int, int, str, bool]
    ] = []  # snippet, slot (-2 original, -1 again, k mutant), code, explain
    for i, snippet in enumerate(snippets):
        tasks += [(i, -2, snippet.code, explain), (i, -1, snippet.code, False)]
        tasks += [(i, k, m.code, explain) for k, m in enumerate(mutants[i])]
    runs: dict[tuple[int, int], RunResult] = {}
    reports: list[MutationReport | None] = [None] * len(snippets)

    def one(task: tuple[int, int, str, bool]) -> None:
        i, slot, code, explained = task
        runs[(i, slot)] = sandbox.run(code, limits, explain=explained, device=snippets[i].device)

    def finish(i: int) -> MutationReport:
        mutant_runs = [runs[(i, k)] for k in range(len(mutants[i]))]
        return report_of(snippets[i].code, runs[(i, -2)], runs[(i, -1)], mutants[i], mutant_runs)

    with ThreadPoolExecutor(max_workers=max(1, workers or sandbox.workers)) as pool:
        futures = {pool.submit(one, t): t[0] for t in tasks}
        done_count = [0] * len(snippets)
        for future in as_completed(futures):
            future.result()
            i = futures[future]
            done_count[i] += 1
            if done_count[i] == len(mutants[i]) + 2:
                report = reports[i] = finish(i)
                if on_done:
                    on_done(i, report)
    return [r for r in reports if r is not None]


def report_of(
    code: str,
    original: RunResult,
    again: RunResult,
    mutants: Sequence[Mutant],
    runs: Sequence[RunResult],
) -> MutationReport:
    """The report from the runs, however they were run (this module's pool, or the web's run
    queue in the studio): the original twice (`again` tells noise from effect), then each mutant."""
    noisy = noisy_lines(original, again)
    report = MutationReport(code, original, noisy_lines=noisy or [])
    for mutant, run in zip(mutants, runs, strict=True):
        report.mutants.append(MutantRun(mutant, run, has_visible_effect(original, run, noisy)))
    return report


def as_choices(report: MutationReport) -> list[dict[str, Any]]:
    """The mutants with a visible effect as multiple-choice distractors, one per distinct
    outcome: the text says what the mistaken code does (and which mistake), the `why` what its
    run showed and what the code as written does instead."""
    return [choice for _mutant, choice in distractors(report)]


def distractors(report: MutationReport) -> list[tuple[MutantRun, dict[str, Any]]]:
    """`as_choices`, each with the mutant it comes from."""
    seen = {_outcome_key(report.original)}
    choices: list[tuple[MutantRun, dict[str, Any]]] = []
    for m in report.mutants:
        key = _outcome_key(m.run)
        if not m.visible_effect or key in seen:
            continue
        seen.add(key)
        summary = what_happened(m.run.to_dict())
        why = f"That is what it does if you {_plain(m.mutant.rule.title)} (proved by running that change)"
        why += f": {summary[0]}" if summary else "."
        if not why.endswith("."):
            why += "."
        why += f" The code as written {describe(report.original)}."
        # The text says what the run does, never which mistake: "(as if you forget
        # scaler.update())" told a learner which choice was the mistake (a newcomer's walk).
        choice: dict[str, Any] = {"text": f"It {describe(m.run)}", "correct": False, "why": why}
        if (claimed := _outcome_claim(m.run, steady=not report.noisy_lines)) is not None:
            choice["outcome"] = (
                claimed  # checked by running: it must not hold for the code as written
            )
        choices.append((m, choice))
    return choices


def _outcome_claim(run: RunResult, *, steady: bool) -> dict[str, str] | None:
    """What a distractor says the run does, as a choice's `outcome` (the bank's `Expect` fields):
    the exception and its message's first line, or what it printed where the code prints the same
    each time (`steady`); None where neither can be said (a run that did not finish)."""
    if run.exception:
        first = run.exception.message.strip().split("\n")[0].strip()
        return {"raises": run.exception.type, **({"message": first} if first else {})}
    if run.status == "ok" and steady:
        return {"stdout": normalise_output(run.stdout)}
    return None


def _outcome_key(run: RunResult) -> tuple[str, str, str, str]:
    status, lines, exc_type, message = outcome(run)
    return status, "\n".join(lines), exc_type, message


def _plain(markdown: str) -> str:
    return markdown.replace("`", "")


def describe(run: RunResult) -> str:
    """What a run did, as a predicate: "prints `x`", "raises `AssertionError`: …"."""
    if run.exception:
        message = run.exception.message.strip().split("\n")[0]
        # Torch's messages go on with advice: keep what happened.
        if len(message) > 80 and ". " in message:
            message = message[: message.index(". ") + 1]
        message = message if len(message) <= 120 else message[:119] + "…"
        return (
            f"raises `{run.exception.type}`: {message}"
            if message
            else f"raises `{run.exception.type}`"
        )
    if run.status != "ok":
        return f"does not finish ({run.status})"
    printed = normalise_output(run.stdout)
    if not printed:
        return "prints nothing"
    if "\n" not in printed and "`" not in printed and len(printed) <= 160:
        return f"prints `{printed}`"
    return "prints " + " / ".join(f"`{line}`" for line in printed.split("\n")[:6] if line)
