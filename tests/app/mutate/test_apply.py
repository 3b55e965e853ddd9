"""Applying rules: the mutant keeps the question's text (comments, blank lines, quotes, line
numbers) outside the change; the fallback to normalised code; hashes; the rule base."""

from __future__ import annotations

import ast

import pytest

from app.mutate.apply import mutants_of
from app.mutate.rule import NotApplicable, Rule
from app.mutate.rules import RULES, rule
from app.verify.record import mutant_hash

LOOP = """\
import torch

# a model, its optimizer and a scaler
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")  # on the CPU
for step in range(2):
    opt.zero_grad()
    with torch.autocast("cpu"):
        # forward
        out = model(torch.ones(1, 2))  # bfloat16
        loss = out.float().sum()

    # backward
    scaler.scale(loss).backward()  # scaled
    scaler.step(opt)
    scaler.update()
print(out.dtype, loss.dtype, scaler.get_scale())
"""


def by_rule(code: str) -> dict[str, str]:
    return {m.rule.name: m.code for m in mutants_of(code)}


def test_text_outside_the_change_is_kept_as_written() -> None:
    mutants = by_rule(LOOP)
    assert set(mutants) == {
        "drop-scale", "drop-update", "optimizer-step", "scaler-disabled", "swap-scaler-device", "deprecated-cuda-scaler",
        "drop-autocast",
        "swap-autocast-dtype", "swap-autocast-device", "backward-inside-autocast", "drop-float-casts",
    }  # fmt: skip
    for name, code in mutants.items():
        assert "# a model, its optimizer and a scaler\n" in code, name
        assert "# forward\n" in code and "# backward\n" in code, name
        assert "print(out.dtype, loss.dtype, scaler.get_scale())\n" in code, name
    # a changed expression keeps the rest of its line, the trailing comment and double quotes included
    assert "    loss.backward()  # scaled\n" in mutants["drop-scale"]
    assert (
        'scaler = torch.amp.GradScaler("cpu", enabled=False)  # on the CPU\n'
        in mutants["scaler-disabled"]
    )
    assert (
        '    with torch.autocast("cpu", dtype=torch.float16):\n' in mutants["swap-autocast-dtype"]
    )
    assert (
        "scaler = torch.cuda.amp.GradScaler()  # on the CPU\n" in mutants["deprecated-cuda-scaler"]
    )
    # an unwrapped block keeps its comments, one level out
    assert (
        "    # forward\n    out = model(torch.ones(1, 2))  # bfloat16\n" in mutants["drop-autocast"]
    )
    # a moved statement keeps its text
    assert (
        "        loss = out.float().sum()\n        scaler.scale(loss).backward()  # scaled\n"
        in mutants["backward-inside-autocast"]
    )


def test_unchanged_lines_keep_their_numbers() -> None:
    """So an exception's line in a mutant's run is the line the learner sees in the question."""
    original = LOOP.splitlines()
    for name, code in by_rule(LOOP).items():
        if name in ("drop-update", "drop-autocast", "backward-inside-autocast"):
            continue  # these remove or move lines
        lines = code.splitlines()
        assert len(lines) == len(original), name
        assert sum(a != b for a, b in zip(lines, original, strict=True)) == 1, name


def test_statements_sharing_a_line_fall_back_to_normalised_code() -> None:
    code = "import torch\nscaler = torch.amp.GradScaler('cpu'); scaler.update()\n"
    (mutant,) = mutants_of(code, (rule("drop-update"),))  # type: ignore[arg-type]
    assert mutant.normalised
    assert mutant.code == "import torch\nscaler = torch.amp.GradScaler('cpu')\n"
    # both sides normalised: the diff shows the removed call, not the reformatted line
    assert [line for line in mutant.diff.splitlines()[2:] if line[:1] in "+-"] == [
        "-scaler.update()"
    ]
    assert ast.dump(ast.parse(mutant.code)) == ast.dump(rule("drop-update").apply(ast.parse(code)))  # type: ignore[union-attr]


def test_the_hash_names_the_code_the_rule_and_the_mutant() -> None:
    (a,) = mutants_of(LOOP, (rule("drop-update"),))  # type: ignore[arg-type]
    (b,) = mutants_of(LOOP.replace("lr=0.1", "lr=0.2"), (rule("drop-update"),))  # type: ignore[arg-type]
    assert a.hash == mutant_hash(LOOP, "drop-update", a.code)
    assert a.hash != b.hash
    assert a.hash != mutant_hash(LOOP, "drop-scale", a.code)


def test_code_that_does_not_parse_has_no_mutants() -> None:
    assert mutants_of("with torch.autocast('cpu'):\nprint(1)\n") == ()


def test_apply_leaves_the_original_tree_alone() -> None:
    tree = ast.parse(LOOP)
    before = ast.dump(tree)
    for r in RULES:
        if r.applies(tree):
            assert ast.dump(r.apply(tree)) != before
        else:
            with pytest.raises(NotApplicable):
                r.apply(tree)
    assert ast.dump(tree) == before


def test_a_new_rule_is_one_small_class() -> None:
    class DropZeroGrad(Rule):
        name = "drop-zero-grad"
        title = "forget `optimizer.zero_grad()`"
        explanation = "Gradients accumulate across iterations."

        def edit(self, tree: ast.Module) -> bool:
            from app.mutate.rule import remove_statements

            return remove_statements(
                tree, lambda s: isinstance(s, ast.Expr) and "zero_grad" in ast.unparse(s)
            )

    (mutant,) = mutants_of(LOOP, (DropZeroGrad(),))
    assert "-    opt.zero_grad()" in mutant.diff and mutant.rule.name == "drop-zero-grad"
