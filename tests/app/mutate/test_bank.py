"""The rules on the real bank (picked by property: the bank is rewritten often): every mutant is
the question's own text with only the mistake changed, and a GradScaler training loop without
`scaler.scale()` raises on its first iteration, as its run shows."""

from __future__ import annotations

import ast

import pytest

from app.bank.load import LoadedQuestion, load_bank
from app.mutate.apply import mutants_of
from app.mutate.rules import rule
from app.mutate.run import Snippet, run_mutants
from sandbox import Sandbox
from tests.support.cli import BANK


def questions_with_code() -> list[LoadedQuestion]:
    return [q for q in load_bank(BANK).questions if q.question.code]


def training_loop(code: str) -> ast.For | None:
    """The first `for` loop that scales a loss, steps the scaler and calls backward."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.For):
            text = ast.unparse(node)
            if "scaler.scale(" in text and "scaler.step(" in text and ".backward(" in text:
                return node
    return None


def test_every_mutant_of_the_bank_keeps_the_question_text() -> None:
    found = 0
    for loaded in questions_with_code():
        for mutant in mutants_of(loaded.question.code or ""):
            found += 1
            assert not mutant.normalised, (loaded.id, mutant.rule.name)
            compile(mutant.code, loaded.id, "exec")
            assert mutant.diff.count("\n-") + mutant.diff.count("\n+") >= 1
    assert found


def test_a_bank_training_loop_without_scale_raises_on_its_first_iteration(
    sandbox_pool: Sandbox,
) -> None:
    picked = next(
        (
            q
            for q in questions_with_code()
            if q.question.requires != "cuda" and training_loop(q.question.code or "")
        ),
        None,
    )
    if picked is None:
        pytest.skip(
            "the bank has no CPU GradScaler training loop (test_rules covers a written one)"
        )
    code = picked.question.code or ""
    loop = training_loop(code)
    assert loop is not None
    (report,) = run_mutants([Snippet(code, rules=(rule("drop-scale"),))], sandbox_pool)  # type: ignore[arg-type]
    assert report.original.status == "ok", (picked.id, report.original)
    (ran,) = report.mutants
    exc = ran.run.exception
    assert exc is not None and exc.type == "AssertionError" and "_scale is None" in exc.message, (
        picked.id,
        ran.run,
    )
    assert loop.lineno <= (exc.line or 0) <= (loop.end_lineno or 0), (
        "it raises inside the loop: its first iteration"
    )
    assert ran.visible_effect
    assert (
        "-" + ast.get_source_segment(code, loop).splitlines()[0] not in ran.mutant.diff
    )  # only the scale call changed
