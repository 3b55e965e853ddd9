"""The mistake in one of two runs of a helper (`<rule>@last-call`): on a snippet that compares
two calls of one training function, a mistake made in the function hits both runs and the
comparison still prints True; made in the last call's copy only, the comparison shows it, as the
run proves. The copy keeps the helper's own text, and the call keeps its own."""

from __future__ import annotations

import ast

from app.mutate.apply import mutants_of
from app.mutate.rules import rule
from app.mutate.run import Snippet, run_mutants
from sandbox import Sandbox

TWO_RUNS = """\
import torch


def train(lr):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
    opt = torch.optim.SGD([w], lr=lr)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((w * torch.tensor([3.0, 4.0])).sum()).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)  # clip the true gradients
    scaler.step(opt)
    scaler.update()
    return w.detach()


print(torch.equal(train(0.1), train(lr=1e-1)))
"""

ONE_RUN = TWO_RUNS.replace("print(torch.equal(train(0.1), train(lr=1e-1)))", "print(train(0.1))")

NO_PATTERN_IN_HELPER = """\
import torch


def data():
    return torch.ones(2)


w = torch.nn.Parameter(torch.ones(2))
scaler = torch.amp.GradScaler("cpu")
scaler.scale((w * data()).sum() + (w * data()).sum()).backward()
print(w.grad)
"""


def mutant_codes(code: str, name: str) -> dict[str, str]:
    return {m.rule.name: m.code for m in mutants_of(code, (rule(name),))}  # type: ignore[arg-type]


def test_the_last_call_runs_a_copy_of_the_helper_with_the_mistake() -> None:
    codes = mutant_codes(TWO_RUNS, "clip-before-unscale")
    assert list(codes) == ["clip-before-unscale", "clip-before-unscale@last-call"]
    mutant = codes["clip-before-unscale@last-call"]
    # the original helper is untouched, the copy follows it, and only the last call uses it
    assert TWO_RUNS.split("\n\n\nprint")[0] in mutant
    assert (
        "print(torch.equal(train(0.1), train_mistaken(lr=1e-1)))\n" in mutant
    )  # as written: not 0.1
    copy_text = mutant.split("def train_mistaken(lr):\n")[1].split("\n\n")[0]
    assert copy_text.index("clip_grad_norm_") < copy_text.index("scaler.unscale_(opt)")
    assert "# clip the true gradients" in copy_text  # the helper's own text, comments included
    # a comment points at the mistake, where the copy differs from the helper
    assert "    # the mistake:\n    torch.nn.utils.clip_grad_norm_" in copy_text
    assert (
        "    # the mistake: no `torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)` here\n    scaler.step(opt)"
        in copy_text
    )
    tree = ast.parse(mutant)
    assert [f.name for f in tree.body if isinstance(f, ast.FunctionDef)] == [
        "train",
        "train_mistaken",
    ]


def test_its_diff_adds_the_copy_and_changes_only_the_call() -> None:
    (mutant,) = [
        m
        for m in mutants_of(TWO_RUNS, (rule("clip-before-unscale"),))
        if m.rule.name.endswith("@last-call")
    ]  # type: ignore[arg-type]
    removed = [
        line
        for line in mutant.diff.splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    assert removed == ["-print(torch.equal(train(0.1), train(lr=1e-1)))"]
    assert "+def train_mistaken(lr):" in mutant.diff and not mutant.normalised


def test_a_left_out_statement_is_marked_where_it_was() -> None:
    (mutant,) = [
        m
        for m in mutants_of(TWO_RUNS, (rule("drop-update"),))
        if m.rule.name.endswith("@last-call")
    ]  # type: ignore[arg-type]
    copy_text = mutant.code.split("def train_mistaken(lr):\n")[1]
    assert (
        "    scaler.step(opt)\n    # the mistake: no `scaler.update()` here\n    return w.detach()\n"
        in copy_text
    )
    assert "scaler.update()" not in copy_text.replace("no `scaler.update()` here", "")


def test_it_does_not_apply_to_a_helper_called_once_or_without_the_pattern() -> None:
    assert list(mutant_codes(ONE_RUN, "clip-before-unscale")) == ["clip-before-unscale"]
    assert list(mutant_codes(NO_PATTERN_IN_HELPER, "drop-scale")) == ["drop-scale"]
    variant = rule("drop-scale@last-call")
    assert variant is not None and not variant.applies(ast.parse(NO_PATTERN_IN_HELPER))
    assert variant.base is not None and variant.base.name == "drop-scale"
    assert variant.variants() == ()


def test_in_one_run_only_the_mistake_shows_in_the_comparison(sandbox_pool: Sandbox) -> None:
    (report,) = run_mutants([Snippet(TWO_RUNS, rules=(rule("clip-before-unscale"),))], sandbox_pool)  # type: ignore[arg-type]
    assert report.original.stdout == "True\n"
    runs = {m.mutant.rule.name: m for m in report.mutants}
    assert (
        runs["clip-before-unscale"].run.stdout == "True\n"
        and not runs["clip-before-unscale"].visible_effect
    )
    in_one = runs["clip-before-unscale@last-call"]
    assert in_one.run.stdout == "False\n" and in_one.visible_effect
