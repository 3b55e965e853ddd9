"""Applying the rules to a snippet: each applicable rule gives a `Mutant` (its code and its diff).

The mutant's code is the question's code with only the changed statements re-rendered
(`app.mutate.rerender`), so the diff shows the mistake and nothing else, and its line numbers are
the question's own.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from functools import lru_cache

from app.mutate.rerender import Lines, render
from app.mutate.rule import NotApplicable, Rule
from app.mutate.rules import RULES, with_variants
from app.verify.record import mutant_hash

DIFF_CONTEXT = 2


@dataclass(frozen=True)
class Mutant:
    """One rule applied to one snippet."""

    rule: Rule
    code: str
    """What runs: the original with the changed statements re-rendered."""
    diff: str
    """Unified diff, original → mutant."""
    hash: str
    """Of the original code, the rule and the mutant's code: what a recorded run of it proves."""
    normalised: bool = False
    """True when the diff is of `ast.unparse` of both (the fallback), not of the code as written."""


def mutants_of(code: str, rules: tuple[Rule, ...] = RULES) -> tuple[Mutant, ...]:
    """Every mutant of `code`, one per applicable rule, in the rules' order, each rule followed by
    its one-place variants where its pattern occurs twice or more (a variant whose code is the
    same as an earlier mutant's is left out). Code that does not parse has none."""
    return _mutants(code, rules)


@lru_cache(maxsize=512)
def _mutants(code: str, rules: tuple[Rule, ...]) -> tuple[Mutant, ...]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ()
    out: list[Mutant] = []
    original = ast.dump(ast.parse(ast.unparse(tree)))
    lines = Lines(code).remember(tree)
    for rule in with_variants(rules):
        try:
            mutated = rule.apply(tree)
        except NotApplicable:
            continue
        made = render(tree, mutated, original, lines)
        if made is None:
            continue
        text, normalised = made
        before = ast.unparse(tree) + "\n" if normalised else code
        diff = unified_diff(before, text, rule.name)
        if diff and all(m.code != text for m in out):
            out.append(Mutant(rule, text, diff, mutant_hash(code, rule.name, text), normalised))
    return tuple(out)


def unified_diff(before: str, after: str, rule_name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        "question",
        f"what if: {rule_name}",
        n=DIFF_CONTEXT,
        lineterm="",
    )
    return "\n".join(lines)
