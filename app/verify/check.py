"""Check answer keys by executing their code in the sandbox.

Pure domain code (no web): given questions and a started `Sandbox`, it runs each question this host
can run, in parallel, and says of each key `pass`, `fail` (with a diff, the exception and the
explanation summary of the run) or `skip` (with why). The outcome of one check is a `KeyCheck`
(a learner's graded answer is a different thing: `app.grading.GradedAnswer`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.bank.load import AnyQuestion, LoadedQuestion
from app.bank.schema import Expect, MultipleChoiceQuestion, PredictOutputQuestion, on_device
from app.bank.torch_range import torch_in_range
from app.grading import normalise_output, spelled_otherwise
from sandbox import Limits, RunResult, Sandbox
from sandbox.result import TRANSIENT

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


def skip_reason(question: AnyQuestion, device_kind: str, torch_version: str = "") -> str | None:
    if not question.code:
        return "no code to run (conceptual question)"
    if question.requires == "cuda" and device_kind != "cuda":
        return "needs a CUDA GPU; this host has none"
    if not torch_in_range(question.torch_versions, torch_version):
        # A release changed what the code does: a run on another one says nothing of the key.
        return f"its key is what torch {question.torch_versions} does; this host runs torch {torch_version}"
    asked = question.device
    if asked is not None and asked != device_kind:
        # The question says which device it asks about: a run here says what this device does
        # (at best an answer shown after answering, never counted), not the key learners are
        # graded on. CUDA autocast on a CPU host even disables itself, warning, and the code
        # then prints what CPU float32 does: a key about CUDA written as that passed here.
        return f"its key is what the code does on {asked.upper() if asked == 'cuda' else asked}; this host runs {device_kind}"
    return None


def _diff(
    expected: str, actual: str, label: str, *, names: tuple[str, str] = ("expected", "actual")
) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(),
        actual.splitlines(),
        f"{names[0]} {label}",
        f"{names[1]} {label}",
        lineterm="",
    )
    return "\n".join(lines)


def _exception_text(run: RunResult) -> str:
    if run.exception:
        return f"{run.exception.type}: {run.exception.message}"
    return f"[{run.status}] {run.message}" if run.status != "ok" else ""


def _type_matches(expected: str, actual: str) -> bool:
    """`RuntimeError` matches `RuntimeError`; `OutOfMemoryError` matches `torch.OutOfMemoryError`."""
    return actual == expected or actual.endswith("." + expected) or expected.endswith("." + actual)


_NUMBER_LIKE = re.compile(r"(?:\d|inf\b|nan\b)", re.IGNORECASE)
"""A fragment that starts as a number does (a digit, `inf`, `nan`)."""
_BEFORE_NUMBER = r"(?<![\w.+-])"
"""What may not come just before a number-like fragment: a sign or a decimal point makes it
another number (`inf` is not in `-inf`, nor `1.0` in `-1.0`, nor `5` in `0.5`)."""


def printed_contains(printed: str, fragment: str) -> bool:
    """Whether `fragment` is in the printed text as a whole: not as part of a longer word or
    number. `float16` is not in `torch.bfloat16`, nor `float` (a key of `stdout_contains: [float]`
    passed for bfloat16 whatever its choice said), nor `1.0` in `1.05` or `-1.0`, nor `inf` in
    `-inf`."""
    edges = (
        _BEFORE_NUMBER
        if _NUMBER_LIKE.match(fragment)
        else r"(?<!\w)"
        if fragment[:1].isalnum() or fragment[:1] == "_"
        else ""
    )
    edges += re.escape(fragment)
    edges += r"(?!\w|\.\d)" if fragment[-1:].isalnum() or fragment[-1:] == "_" else ""
    return re.search(edges, printed) is not None


def check_expect(expect: Expect, run: RunResult) -> tuple[list[str], str]:
    """Problems of a run against an `expect` block, and a diff of printed text where that applies."""
    problems: list[str] = []
    diff = ""
    if expect.raises:
        if run.exception is None:
            problems.append(
                f"expected {expect.raises} to be raised, but the code {'finished' if run.ok else run.status}"
            )
        elif not _type_matches(expect.raises, run.exception.type):
            problems.append(
                f"expected {expect.raises}, got {run.exception.type}: {run.exception.message}"
            )
        elif expect.message and expect.message not in run.exception.message:
            problems.append(
                f"the {run.exception.type} message does not contain {expect.message!r}: {run.exception.message!r}"
            )
    elif run.status != "ok":
        problems.append(f"the code raised unexpectedly: {_exception_text(run)}")
    actual = normalise_output(run.stdout)
    if expect.stdout is not None and normalise_output(expect.stdout) != actual:
        problems.append("printed text differs")
        diff = _diff(normalise_output(expect.stdout), actual, "stdout")
    for fragment in expect.stdout_contains:
        if not printed_contains(run.stdout, fragment):
            problems.append(f"printed text does not contain {fragment!r}")
    if expect.warns:
        hits = [w for w in run.warnings if _type_matches(expect.warns, w.category)]
        if not hits:
            seen = ", ".join(sorted({w.category for w in run.warnings})) or "none"
            problems.append(f"expected a {expect.warns} warning; warnings seen: {seen}")
        elif expect.warning_message and not any(expect.warning_message in w.message for w in hits):
            problems.append(f"no {expect.warns} contains {expect.warning_message!r}")
    return problems, diff


def _choice_problems(
    q: MultipleChoiceQuestion, run: RunResult, device: str, expected: Expect
) -> list[str]:
    """Which choices are marked right, checked against the run: a right choice's outcome must hold
    and a wrong choice's must not. (A right choice whose outcome is the expectation itself was
    checked just before.)"""
    problems = []
    for number, choice in enumerate(q.choices, 1):
        claim = on_device(choice.device_outcome, device, choice.outcome)
        if claim is None or (choice.correct and claim is expected):
            continue
        unmet, _ = check_expect(claim, run)
        if choice.correct and unmet:
            problems.append(
                f"choice {number} is marked correct, but on {device} the run does not do what its outcome says: {unmet[0]}"
            )
        elif not choice.correct and not unmet:
            problems.append(
                f"choice {number} is marked wrong, but on {device} the run does what its outcome says"
            )
    return problems


AGAIN_THREADS = 2
"""How many threads torch computes with in a key's second proof run (the first uses one)."""


def again_limits(limits: Limits) -> Limits:
    """A key's second proof run's limits: the first's, with torch computing on `AGAIN_THREADS`
    threads. Learners run the code on machines with several cores, where a float32 sum of many
    values ends in other digits than on one thread (10 million 0.1s: 999999.4375 on one thread,
    999999.5625 on two); a key that holds only for the sandbox's one thread is not a key."""
    return replace(limits, torch_threads=AGAIN_THREADS)


def worth_running_again(run: RunResult) -> bool:
    """Whether a first run of a key's code says enough to be compared with a second
    (`same_each_time`): not when nothing could run it (`unavailable`), nor when it ended for a
    reason of the moment (`TRANSIENT`: a second may end otherwise, and the first proves nothing
    anyway; a timeout would cost its whole wall time again)."""
    return run.status != "unavailable" and run.status not in TRANSIENT


def same_each_time(run: RunResult, again: RunResult) -> bool:
    """Whether two runs of the same code did the same thing: how it ended, what it printed, what
    it raised. A key needs that; code that prints a random value has none."""
    return _what_it_did(run) == _what_it_did(again)


def _what_it_did(run: RunResult) -> tuple[str, str, str]:
    return run.status, normalise_output(run.stdout), run.exception.type if run.exception else ""


def check(
    loaded: LoadedQuestion, run: RunResult, device: str, again: RunResult | None = None
) -> KeyCheck:
    """What `run` says of the question's key; with `again` (a second run of the same code), also
    whether the code does the same thing each time: a key proved by one lucky run of code that
    prints a random value would grade learners on chance."""
    q = loaded.question
    out = KeyCheck(loaded.id, loaded.set_id, "pass", device=device, stdout=run.stdout)
    if run.status == "unavailable" or (again is not None and again.status == "unavailable"):
        out.result, out.reason = "skip", run.message or (again.message if again else "")
        return out
    if again is not None and not same_each_time(run, again):
        out.result = "fail"
        out.reason = ("the code does not do the same thing each time it runs, so no key can be proved by running it "
                      f"(the second run's torch computed on {AGAIN_THREADS} threads, as on a learner's machine with several "
                      "cores; the first on one): seed the random generators, and print nothing that depends on timing, "
                      "memory addresses or the number of threads (a float32 sum of many values ends in other digits)")  # fmt: skip
        out.diff = _diff(normalise_output(run.stdout), normalise_output(again.stdout), "output",
                         names=("a first run's (1 thread)", f"a second run's ({AGAIN_THREADS} threads)"))  # fmt: skip
        return out
    if isinstance(q, PredictOutputQuestion):
        expected = normalise_output(on_device(q.device_answers, device, q.answer))
        actual = normalise_output(run.stdout)
        problems = []
        if run.status != "ok":
            problems.append(f"the code did not finish: {_exception_text(run)}")
        if actual != expected:
            # `accept` lists other spellings learners may type; the answer itself is what the page
            # says the code prints, so a run printing an accepted spelling proves nothing of it
            # (an answer of float16 with bfloat16 accepted passed, and "It prints torch.float16"
            # stood above a run printing torch.bfloat16).
            problems.append(f"printed output differs from the answer on {device}")
            out.diff = _diff(expected, actual, "output")
        elif run.status == "ok":
            problems += [
                f"accept: {spelling!r} {why}"
                for spelling in q.accept
                if (why := spelled_otherwise(spelling, actual))
            ]
    else:
        assert isinstance(q, MultipleChoiceQuestion) and q.expect is not None
        expect = on_device(q.device_expect, device, q.expect)
        problems, out.diff = check_expect(expect, run)
        if problems:
            problems[0] = f"on {device}: {problems[0]}"
        problems += _choice_problems(q, run, device, expect)
    if problems:
        out.result = "fail"
        out.reason = "; ".join(problems)
        out.exception = (
            run.exception.traceback
            if run.exception
            else (run.message if run.status != "ok" else "")
        )
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
    torch_version = sandbox.environment.get("torch_version", "")

    def one(loaded: LoadedQuestion) -> KeyCheck:
        reason = skip_reason(loaded.question, device, torch_version)
        if reason:
            outcome = KeyCheck(loaded.id, loaded.set_id, "skip", device=device, reason=reason)
        else:
            assert loaded.question.code is not None
            run = sandbox.run(loaded.question.code, VERIFY_LIMITS)
            again = (
                sandbox.run(loaded.question.code, again_limits(VERIFY_LIMITS))
                if worth_running_again(run)
                else None
            )
            outcome = check(loaded, run, device, again)
            if outcome.result == "fail":  # explain only what failed: the passing path stays fast
                explained = sandbox.run(loaded.question.code, VERIFY_LIMITS, explain=True)
                outcome.summary = list((explained.explanation or {}).get("summary", []))
        if on_done:
            on_done(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, questions))
