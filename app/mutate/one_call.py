"""The mistake made in one call of a helper only: `<rule>@last-call`.

Snippets that compare two runs often put the training step in a helper and call it twice
(`train(foreach=True)` against `train(fused=True)`, `run(amp=False)` against `run(amp=True)`).
A rule changes the helper's body, so its mistake hits both calls and a printed comparison
(`torch.allclose(a, b)`) stays True: the mutant says nothing about the mistake. In a real codebase
the two paths are usually two copies of the loop, and the mistake is made in one of them.

`InLastCall(rule)` says that: the helper is copied (named `<helper>_mistaken`, placed right after
it), the rule is applied to the copy only, and the **last** call of the helper calls the copy.
The last, because in `compare(baseline(), variant())` the last call is the variant under study;
the first would give the mirror image of the same comparison, twice the runs for the same lesson.

It applies where a function defined at the top of the snippet holds the rule's pattern and is
called by name at two or more places outside itself; the diff shows the copy and the changed call.
The copy is all new lines in a diff, so `marked` puts a comment where it differs from the helper
(`# the mistake: …`): a learner reading the card sees where to look.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize

from app.mutate.rule import Rule, clone

SUFFIX = "_mistaken"


def _calls_to(tree: ast.Module, name: str, outside: ast.FunctionDef) -> list[ast.Call]:
    """Calls of `name(...)` in the code, not counting those inside the function itself, in
    source order."""
    inside = {id(n) for n in ast.walk(outside)}
    calls = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name and id(n) not in inside
    ]  # fmt: skip
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


class InLastCall(Rule):
    """A rule's mistake made in a copy of a helper that only the helper's last call uses."""

    base: Rule

    def __init__(self, base: Rule) -> None:
        self.base = base
        self.name = f"{base.name}@last-call"
        self.title = f"{base.title}, in the last of several runs of the same helper only"
        self.explanation = (
            f"{base.explanation} Here the mistake is made in one run only: the helper is copied, the "
            "copy has the mistake, and the last call uses the copy, as when two training paths "
            "are compared and only one of them has the bug. Made in both, the comparison would "
            "not show it."
        )

    def _helper(self, tree: ast.Module) -> tuple[int, ast.FunctionDef, list[ast.Call]] | None:
        """The first top-level function that holds the rule's pattern and is called twice or more."""
        for index, stmt in enumerate(tree.body):
            if not isinstance(stmt, ast.FunctionDef):
                continue
            calls = _calls_to(tree, stmt.name, stmt)
            if len(calls) >= 2 and self.base.applies(ast.Module(body=[stmt], type_ignores=[])):
                return index, stmt, calls
        return None

    def may_apply(self, tree: ast.Module) -> bool:
        return any(isinstance(stmt, ast.FunctionDef) for stmt in tree.body)

    def edit(self, tree: ast.Module) -> bool:
        found = self._helper(tree)
        if found is None:
            return False
        index, helper, calls = found
        taken = _names(tree)
        name = helper.name + SUFFIX
        while name in taken:
            name += "_"
        mistaken = clone(helper)
        mistaken.name = name
        if not self.base.edit(ast.Module(body=[mistaken], type_ignores=[])):
            return False
        for node in ast.walk(mistaken):  # a recursive helper calls its own copy
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == helper.name
            ):
                node.func = ast.Name(name, ast.Load())
        tree.body.insert(index + 1, mistaken)
        calls[-1].func = ast.Name(name, ast.Load())
        return True

    def variants(self) -> tuple[Rule, ...]:
        return ()


MARK = "# the mistake"


def marked(helper: list[str], copy_lines: list[str]) -> list[str]:
    """The copy's lines (same header as the helper's) with a comment line before each place it
    differs from the helper: `# the mistake:` above a changed line, `# the mistake: no … here`
    where a line of the helper is missing. Comments only: the code is the same."""
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, helper, copy_lines, autojunk=False
    ).get_opcodes():
        if tag == "delete":
            gone = _without_comment(helper[i1]).strip()
            out.append(_indent(helper[i1]) + f"{MARK}: no `{gone}` here\n")
        elif tag in ("insert", "replace"):
            out.append(_indent(copy_lines[j1]) + f"{MARK}:\n")
        out += copy_lines[j1:j2]
    return out


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _without_comment(line: str) -> str:
    """The line without its trailing `# comment` (a `#` inside a string stays)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return line
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return line.strip()[: comment.start[1]].rstrip() if comment else line
