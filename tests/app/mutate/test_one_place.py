"""One-place variants: where a rule's pattern occurs twice or more, the mistake made at the first
(or the last) place only, next to the rule's everywhere mutant. On a snippet that compares two
losses, forgetting `scaler.scale` on both leaves the comparison as it was; forgetting it on one
breaks it, and the run shows it."""

from __future__ import annotations

import ast

from app.mutate.apply import mutants_of
from app.mutate.rules import rule
from app.mutate.run import Snippet, run_mutants
from sandbox import Sandbox

TWO_LOSSES = """\
import torch

w1 = torch.nn.Parameter(torch.ones(2))
w2 = torch.nn.Parameter(torch.ones(2))
scaler = torch.amp.GradScaler("cpu")
loss1 = (w1 * 2).sum()
loss2 = (w2 * 2).sum()
scaler.scale(loss1).backward()
scaler.scale(loss2).backward()
print(torch.equal(w1.grad, w2.grad))
"""

ONE_LOSS = """\
import torch

w = torch.nn.Parameter(torch.ones(2))
scaler = torch.amp.GradScaler("cpu")
scaler.scale(w.sum()).backward()
"""


def drop_scale_mutants(code: str) -> dict[str, str]:
    return {m.rule.name: m.code for m in mutants_of(code, (rule("drop-scale"),))}  # type: ignore[arg-type]


def test_two_places_give_the_everywhere_mutant_and_one_per_place() -> None:
    codes = drop_scale_mutants(TWO_LOSSES)
    assert list(codes) == ["drop-scale", "drop-scale@1", "drop-scale@last"]
    assert "loss1.backward()\nloss2.backward()\n" in codes["drop-scale"]
    assert "loss1.backward()\nscaler.scale(loss2).backward()\n" in codes["drop-scale@1"]
    assert "scaler.scale(loss1).backward()\nloss2.backward()\n" in codes["drop-scale@last"]


def test_one_place_has_no_variants() -> None:
    assert list(drop_scale_mutants(ONE_LOSS)) == ["drop-scale"]
    variant = rule("drop-scale@1")
    assert variant is not None and not variant.applies(ast.parse(ONE_LOSS))


def test_a_variant_is_named_and_titled_as_one_place_only() -> None:
    first, last = rule("drop-scale@1"), rule("drop-scale@last")
    assert first is not None and last is not None
    assert first.title.endswith("in one place only (the first of several)")
    assert last.title.endswith("in one place only (the last of several)")
    assert first.explanation.endswith(".") and rule("drop-scale@2") is None
    assert first.variants() == ()


def test_places_are_in_source_order() -> None:
    base = rule("drop-scale")
    assert base is not None
    assert [line for line, *_ in base.places(ast.parse(TWO_LOSSES))] == [8, 9]


def test_the_one_place_mistake_changes_the_comparison_the_everywhere_one_does_not(
    sandbox_pool: Sandbox,
) -> None:
    (report,) = run_mutants([Snippet(TWO_LOSSES, rules=(rule("drop-scale"),))], sandbox_pool)  # type: ignore[arg-type]
    assert report.original.stdout == "True\n"
    runs = {m.mutant.rule.name: m for m in report.mutants}
    assert runs["drop-scale"].run.stdout == "True\n" and not runs["drop-scale"].visible_effect
    for name in ("drop-scale@1", "drop-scale@last"):
        assert runs[name].run.stdout == "False\n" and runs[name].visible_effect
