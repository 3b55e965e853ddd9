"""The rule base: what a mutation rule is, and the syntax-tree patterns the rules share.

A rule is one classic AMP mistake, said as an edit of the snippet's syntax tree (Python's `ast`,
never text surgery): a `name` (a slug, stable: records key on it), a `title` (Markdown, read after
"What if you…"), an `explanation` (Markdown: why engineers make the mistake and what it does), and
`edit(tree) -> bool`, which changes the tree in place and says whether its pattern was there.
`applies` and `apply` follow from `edit`. A rule applies only where its pattern is present; an
edit that finds nothing to change leaves the tree alone and returns False.

**One run only.** Where the pattern is in a helper the snippet calls twice (two training runs
compared), the mistake made in the last call's copy of the helper only: `InLastCall(rule)`
(`drop-scale@last-call`, in `app.mutate.one_call`), for every rule.

To add a rule: one small class in `app.mutate.scaler_mistakes` or `app.mutate.autocast_mistakes`, listed in `RULES` in `app.mutate.rules`.

**One place only.** A rule changes every place its pattern appears. Where it appears in two or
more places (two losses, two optimizers, a fused and a plain run compared), the classic mistake is
often made in *one* of them, and only that breaks a printed comparison. So a rule that calls
`self.place(node)` at each place, before changing it (and leaves that place alone when it says
False), also gets the variants `OnePlace(rule, FIRST)` (`drop-scale@1`) and `OnePlace(rule, LAST)`
(`drop-scale@last`): the same edit, made only at the first (last) place in the source. They apply
only where the pattern occurs at least twice. A rule that never calls `place` has no variants.
"""

from __future__ import annotations

import ast
import copy
import pickle
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T", bound=ast.AST)


class NotApplicable(ValueError):
    """`Rule.apply` on a tree without the rule's pattern."""


class Rule:
    """One classic mistake as a tree edit. Subclasses set the three texts and write `edit`."""

    # Set on the class by a rule, on the instance by a variant (`OnePlace`, `InLastCall`).
    name: str
    title: str
    """Markdown, completing "What if you…": e.g. "drop `scaler.update()`"."""
    explanation: str
    base: Rule | None = None
    """The rule a variant (`OnePlace`, `InLastCall`) makes in one place only; None for a rule itself."""

    def edit(self, tree: ast.Module) -> bool:
        """Change `tree` in place into the mistake; True when the pattern was found (and changed)."""
        raise NotImplementedError

    def may_apply(self, tree: ast.Module) -> bool:
        """A quick test that leaves `tree` alone: False only where the rule surely does not apply
        (then no copy of the tree is made for it). True unless a variant knows better."""
        return True

    def applies(self, tree: ast.Module) -> bool:
        return self.may_apply(tree) and self.edit(clone(tree))

    def apply(self, tree: ast.Module) -> ast.Module:
        """A mutated copy of `tree` (the original is untouched); `NotApplicable` without the pattern."""
        if not self.may_apply(tree):
            raise NotApplicable(f"{self.name}: its pattern is not in this code")
        mutant = clone(tree)
        if not self.edit(mutant):
            raise NotApplicable(f"{self.name}: its pattern is not in this code")
        return ast.fix_missing_locations(mutant)

    def place(self, node: ast.AST) -> bool:
        """Called by `edit` at each place its pattern appears (`node`: the statement or expression
        it is about to change), before changing it: False means leave this place alone. True
        always, except while a one-place variant is editing."""
        pick = _PICK.get()
        return pick is None or pick(node)

    def places(self, tree: ast.Module) -> list[Span]:
        """Where the pattern appears, in source order (for rules that call `place`). The tree is
        left as it is: every place is noted and declined, so the edit changes nothing (and no
        copy is needed)."""
        found: list[Span] = []

        def record(node: ast.AST) -> bool:
            found.append(span(node))
            return False

        token = _PICK.set(record)
        try:
            self.edit(tree)
        finally:
            _PICK.reset(token)
        return sorted(set(found))

    def variants(self) -> tuple[Rule, ...]:
        """The one-place variants of this rule (see the module's note)."""
        return (OnePlace(self, FIRST), OnePlace(self, LAST))

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


def clone(tree: T) -> T:
    """A deep copy of a syntax tree, for a rule to edit. A pickle round trip: the same tree as
    `copy.deepcopy` (positions included), three times faster, and every rule is tried on a copy of
    every snippet."""
    return pickle.loads(pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))


Span = tuple[int, int, int, int]
FIRST, LAST = "1", "last"
_PICK: ContextVar[Callable[[ast.AST], bool] | None] = ContextVar("mutate_pick", default=None)


def span(node: ast.AST) -> Span:
    """Where a node is in the original code (-1s for a node a rule made)."""

    def at(field: str) -> int:
        return getattr(node, field, None) or -1

    return at("lineno"), at("col_offset"), at("end_lineno"), at("end_col_offset")


class OnePlace(Rule):
    """A rule's mistake made at one place only (the first or the last of two or more): named
    `<rule>@1` or `<rule>@last`; applies only where the rule's pattern occurs at least twice."""

    base: Rule

    def __init__(self, base: Rule, which: str) -> None:
        self.base, self.which = base, which
        where = "the first" if which == FIRST else "the last"
        self.name = f"{base.name}@{which}"
        self.title = f"{base.title}, in one place only ({where} of several)"
        self.explanation = (
            f"{base.explanation} Here the mistake is made in one place only ({where} where the "
            "pattern appears), as it usually is: the other places stay right, so anything that "
            "compares them sees the difference."
        )

    def may_apply(self, tree: ast.Module) -> bool:
        return len(self.base.places(tree)) >= 2

    def edit(self, tree: ast.Module) -> bool:
        places = self.base.places(tree)
        if len(places) < 2:
            return False
        target = places[0] if self.which == FIRST else places[-1]
        token = _PICK.set(lambda node: span(node) == target)
        try:
            return self.base.edit(tree)
        finally:
            _PICK.reset(token)

    def variants(self) -> tuple[Rule, ...]:
        return ()


# ---- names and calls ------------------------------------------------------------------------

AUTOCAST_DEVICE = {"torch.cuda.amp.autocast": "cuda", "torch.cpu.amp.autocast": "cpu"}
CLIP_FUNCTIONS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


def dotted(node: ast.AST) -> str | None:
    """`torch.amp.GradScaler` for that attribute chain, `scaler` for a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def is_autocast(node: ast.AST) -> bool:
    """A call that makes an autocast context: `torch.autocast(...)`, `torch.amp.autocast(...)`,
    the deprecated `torch.cuda.amp.autocast(...)`, or a bare imported `autocast(...)`."""
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func) or ""
    return name == "autocast" or name.endswith(".autocast")


def autocast_device(call: ast.Call) -> str | None:
    """The device an autocast call names, when the code says it literally."""
    known = AUTOCAST_DEVICE.get(dotted(call.func) or "")
    if known:
        return known
    arg = call.args[0] if call.args else keyword(call, "device_type")
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def is_grad_scaler(node: ast.AST) -> bool:
    """A call that builds a GradScaler (`torch.amp.GradScaler(...)`, `GradScaler(...)`, …)."""
    return isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "GradScaler"


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def scaler_names(tree: ast.AST) -> set[str]:
    """Names (or attribute chains) bound to a GradScaler in this code: `scaler`, `self.scaler`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and node.value is not None
            and is_grad_scaler(node.value)
        ):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if dotted(target):
                    names.add(dotted(target) or "")
    return names


class Scalers:
    """Tells whether an expression is a GradScaler: bound to one here, or named like one (a
    scaler passed in as a parameter)."""

    def __init__(self, tree: ast.AST) -> None:
        self.names = scaler_names(tree)

    def __call__(self, node: ast.AST) -> bool:
        name = dotted(node)
        return name is not None and (name in self.names or "scaler" in name.split(".")[-1].lower())

    def method_call(self, node: ast.AST, method: str) -> bool:
        """`scaler.<method>(...)`."""
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == method
            and self(node.func.value)
        )

    def statement(self, stmt: ast.stmt, method: str) -> bool:
        """A statement that is just `scaler.<method>(...)` (its value, if any, unused)."""
        return isinstance(stmt, ast.Expr) and self.method_call(stmt.value, method)


def is_backward_call(node: ast.AST) -> bool:
    """`<something>.backward(...)`: `loss.backward()`, `scaler.scale(loss).backward()`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "backward"
    )


def is_clip_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] in CLIP_FUNCTIONS


def contains(node: ast.AST, predicate: Callable[[ast.AST], bool]) -> bool:
    return any(predicate(n) for n in ast.walk(node))


def torch_attr(name: str, like: ast.expr | None = None) -> ast.Attribute:
    """`torch.<name>`, on the same base as `like` (`torch.float16` → `torch.bfloat16`)."""
    base = like.value if isinstance(like, ast.Attribute) else ast.Name("torch", ast.Load())
    return ast.Attribute(copy.deepcopy(base), name, ast.Load())


# ---- statement lists ------------------------------------------------------------------------

BLOCK_FIELDS = ("body", "orelse", "finalbody")


def statement_lists(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of statements in the tree (bodies, else-blocks, handlers' bodies), outermost
    first. Lists are yielded live: a rule edits them in place."""
    for node in ast.walk(tree):
        for name in BLOCK_FIELDS:  # an except handler or a match case is a node with a body too
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield value


def remove_statements(tree: ast.AST, predicate: Callable[[ast.stmt], bool]) -> bool:
    """Removes every statement `predicate` picks; a block left empty gets a `pass`."""
    changed = False
    for body in list(statement_lists(tree)):
        kept = [s for s in body if not predicate(s)]
        if len(kept) != len(body):
            changed = True
            body[:] = kept or [ast.Pass()]
    return changed


def position(stmt: ast.stmt) -> tuple[int, int]:
    return (getattr(stmt, "lineno", 0), getattr(stmt, "col_offset", 0))
