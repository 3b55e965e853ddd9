"""Check answer keys by executing their code in the sandbox.

Pure domain code (no web): given questions and a started `Sandbox`, it runs each question this host
can run, in parallel, and says of each key `pass`, `fail` (with a diff, the exception and the
explanation summary of the run) or `skip` (with why). The outcome of one check is a `KeyCheck`
(a learner's graded answer is a different thing: `app.grading.GradedAnswer`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from app.bank.load import AnyQuestion, LoadedQuestion
from app.bank.schema import Expect, MultipleChoiceQuestion, PredictOutputQuestion
from app.grading import normalise_output
from sandbox import Limits, RunResult, Sandbox

VERIFY_LIMITS = Limits(wall_s=60, cpu_s=60)


@dataclass
class KeyCheck:
    """What running one question's code said of its answer key."""

    id: str
    set_id: str
    result: str
    """`pass`, `fail` or `skip`."""
    device: str = ""
    reason: str = ""
    diff: str = ""
    exception: str = ""
    summary: list[str] = field(default_factory=list)
    stdout: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def skip_reason(question: AnyQuestion, device_kind: str) -> str | None:
    if not question.code:
        return "no code to run (conceptual question)"
    if question.requires == "cuda" and device_kind != "cuda":
        return "needs a CUDA GPU; this host has none"
    return None


def _diff(expected: str, actual: str, label: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), f"expected {label}", f"actual {label}", lineterm=""
    )
    return "\n".join(lines)


def _exception_text(run: RunResult) -> str:
    if run.exception:
        return f"{run.exception.type}: {run.exception.message}"
    return f"[{run.status}] {run.message}" if run.status != "ok" else ""


def _type_matches(expected: str, actual: str) -> bool:
    """`RuntimeError` matches `RuntimeError`; `OutOfMemoryError` matches `torch.OutOfMemoryError`."""
    return actual == expected or actual.endswith("." + expected) or expected.endswith("." + actual)


def check_expect(expect: Expect, run: RunResult) -> tuple[list[str], str]:
    """Problems of a run against an `expect` block, and a diff of printed text where that applies."""
    problems: list[str] = []
    diff = ""
    if expect.raises:
        if run.exception is None:
            problems.append(f"expected {expect.raises} to be raised, but the code {'finished' if run.ok else run.status}")
        elif not _type_matches(expect.raises, run.exception.type):
            problems.append(f"expected {expect.raises}, got {run.exception.type}: {run.exception.message}")
        elif expect.message and expect.message not in run.exception.message:
            problems.append(f"the {run.exception.type} message does not contain {expect.message!r}: {run.exception.message!r}")
    elif run.status != "ok":
        problems.append(f"the code raised unexpectedly: {_exception_text(run)}")
    actual = normalise_output(run.stdout)
    if expect.stdout is not None and normalise_output(expect.stdout) != actual:
        problems.append("printed text differs")
        diff = _diff(normalise_output(expect.stdout), actual, "stdout")
    for fragment in expect.stdout_contains:
        if fragment not in run.stdout:
            problems.append(f"printed text does not contain {fragment!r}")
    if expect.warns:
        hits = [w for w in run.warnings if _type_matches(expect.warns, w.category)]
        if not hits:
            seen = ", ".join(sorted({w.category for w in run.warnings})) or "none"
            problems.append(f"expected a {expect.warns} warning; warnings seen: {seen}")
        elif expect.warning_message and not any(expect.warning_message in w.message for w in hits):
            problems.append(f"no {expect.warns} contains {expect.warning_message!r}")
    return problems, diff


def check(loaded: LoadedQuestion, run: RunResult, device: str) -> KeyCheck:
    q = loaded.question
    out = KeyCheck(loaded.id, loaded.set_id, "pass", device=device, stdout=run.stdout)
    if run.status == "unavailable":
        out.result, out.reason = "skip", run.message
        return out
    if isinstance(q, PredictOutputQuestion):
        expected = normalise_output(q.device_answers.get(device, q.answer))
        actual = normalise_output(run.stdout)
        problems = []
        if run.status != "ok":
            problems.append(f"the code did not finish: {_exception_text(run)}")
        if actual != expected and actual not in [normalise_output(a) for a in q.accept]:
            problems.append(f"printed output differs from the answer on {device}")
            out.diff = _diff(expected, actual, "output")
    else:
        assert isinstance(q, MultipleChoiceQuestion) and q.expect is not None
        problems, out.diff = check_expect(q.device_expect.get(device, q.expect), run)
        if problems:
            problems[0] = f"on {device}: {problems[0]}"
    if problems:
        out.result = "fail"
        out.reason = "; ".join(problems)
        out.exception = run.exception.traceback if run.exception else (run.message if run.status != "ok" else "")
    return out


def verify_questions(
    questions: list[LoadedQuestion],
    sandbox: Sandbox,
    *,
    jobs: int = 2,
    on_done: Callable[[KeyCheck], None] | None = None,
) -> list[KeyCheck]:
    """Run and check each question; outcomes come back in the bank's order."""
    device = sandbox.environment.get("device_kind", "cpu")

    def one(loaded: LoadedQuestion) -> KeyCheck:
        reason = skip_reason(loaded.question, device)
        if reason:
            outcome = KeyCheck(loaded.id, loaded.set_id, "skip", device=device, reason=reason)
        else:
            assert loaded.question.code is not None
            run = sandbox.run(loaded.question.code, VERIFY_LIMITS)
            outcome = check(loaded, run, device)
            if outcome.result == "fail":  # explain only what failed: the passing path stays fast
                explained = sandbox.run(loaded.question.code, VERIFY_LIMITS, explain=True)
                outcome.summary = list((explained.explanation or {}).get("summary", []))
        if on_done:
            on_done(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, questions))
