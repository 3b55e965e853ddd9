"""Writing a mutated tree back as the question's code: **only the changed statements
re-rendered** (`ast.unparse` of those statements, at their block's indentation); every statement
the rule left alone keeps its text, comments and blank lines. The re-rendered code is checked: it
must parse to exactly the mutated tree, or the mutant falls back to `ast.unparse` of the whole
tree, diffed against `ast.unparse` of the original (both normalised the same way, so formatting
never shows up as a change). A comment inside a re-rendered statement is lost; one between
statements is kept.
"""

from __future__ import annotations

import ast
import copy
import difflib
import itertools
import textwrap

from app.mutate.one_call import marked
from app.mutate.quotes import double_quoted, prefers_double_quotes
from app.mutate.rule import BLOCK_FIELDS


def _dump_of(lines: list[str]) -> str | None:
    try:
        return ast.dump(ast.parse(textwrap.dedent("".join(lines))))
    except SyntaxError:
        return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def render(
    tree: ast.Module, mutated: ast.Module, original: str, lines: Lines
) -> tuple[str, bool] | None:
    """The mutant's code and whether it is the normalised fallback; None when the mutant is no
    change at all (after normalising) or does not compile. `original`: the dump of the original
    normalised as the mutant is; `lines`: the original's text."""
    try:
        reference = ast.dump(ast.parse(ast.unparse(mutated)))
        if reference == original:
            return None
        compile(mutated, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return None
    try:
        text = "".join(
            lines.block(tree.body, mutated.body, lines.head(tree.body), lines.tail(tree.body))
        )
        if ast.dump(ast.parse(text)) == reference:
            return text, False
    except (_CannotRender, SyntaxError, ValueError):
        pass
    return ast.unparse(mutated) + "\n", True


class _CannotRender(Exception):
    """Statements share a line, or a block's text is not where the tree says: use the fallback."""


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno, *(d.lineno for d in decorators)])


def _last_line(node: ast.stmt | ast.expr) -> int:
    """Where a node of the original ends: parsed, it has an end (only a node made by hand has
    none, and the lines asked for are the original's)."""
    assert node.end_lineno is not None
    return node.end_lineno


class Lines:
    """The original's lines, and re-rendering a mutated statement list into them."""

    def __init__(self, code: str) -> None:
        self.lines = code.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
        self.double_quotes = prefers_double_quotes(code)
        self.originals: dict[str, ast.stmt] = {}
        """One-line statements of the original by their dump: a statement a rule moved keeps its text."""

    def remember(self, tree: ast.Module) -> Lines:
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and node.lineno == node.end_lineno:
                self.originals.setdefault(ast.dump(node), node)
        self.functions = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
        return self

    def copied(self, stmt: ast.stmt, indent: str) -> list[str] | None:
        """A helper's copy (`app.mutate.one_call`) in the helper's own text: its header with the
        new name, its body kept except where the rule changed it; after a blank line."""
        if not isinstance(stmt, ast.FunctionDef):
            return None
        for helper in self.functions:
            if stmt.name == helper.name or not stmt.name.startswith(helper.name):
                continue
            renamed = copy.copy(stmt)
            renamed.name = helper.name
            if not _recursable(helper, renamed) or self.indent([helper]) != indent:
                continue
            unmarked = self.compound(helper, renamed)
            lines = marked(self.statement(helper), unmarked)
            # A comment landed inside a string: leave it out.
            if _dump_of(lines) != _dump_of(unmarked):
                lines = unmarked
            header = f"def {helper.name}("
            at = next(i for i, line in enumerate(lines) if header in line)
            lines[at] = lines[at].replace(header, f"def {stmt.name}(", 1)
            return ["\n", *lines]
        return None

    def span(self, first: int, last: int) -> list[str]:
        """Lines `first`..`last`, 1-based, inclusive."""
        return self.lines[first - 1 : last]

    def head(self, body: list[ast.stmt]) -> list[str]:
        return self.span(1, _first_line(body[0]) - 1) if body else self.lines

    def tail(self, body: list[ast.stmt]) -> list[str]:
        return self.span(_last_line(body[-1]) + 1, len(self.lines)) if body else []

    def indent(self, body: list[ast.stmt]) -> str:
        line = self.lines[_first_line(body[0]) - 1]
        indent = line[: len(line) - len(line.lstrip())]
        if body[0].col_offset != len(indent) and not getattr(body[0], "decorator_list", None):
            raise _CannotRender("a statement does not start its line")
        return indent

    def rendered(self, stmts: list[ast.stmt], indent: str) -> list[str]:
        out = []
        for stmt in stmts:
            moved = self.originals.get(ast.dump(stmt))
            if moved is not None:
                out.append(indent + self.statement(moved)[0].lstrip())
                continue
            copied = self.copied(stmt, indent)
            if copied is not None:
                out += copied
                continue
            text = ast.unparse(stmt)
            if self.double_quotes:
                text = double_quoted(text)
            out += [indent + line + "\n" for line in text.splitlines()]
        return out

    def block(
        self, old: list[ast.stmt], new: list[ast.stmt], before: list[str], after: list[str]
    ) -> list[str]:
        """The text of `new`, a mutated version of the block `old`: unchanged statements keep
        their lines, the text between statements is kept, the rest is re-rendered."""
        for a, b in itertools.pairwise(old):
            if _first_line(b) <= _last_line(a):
                raise _CannotRender("two statements share a line")
        indent = self.indent(old)
        gaps = [
            self.span(_last_line(old[i - 1]) + 1, _first_line(old[i]) - 1) if i else []
            for i in range(len(old))
        ]
        out = list(before)
        matcher = difflib.SequenceMatcher(
            None, [ast.dump(s) for s in old], [ast.dump(s) for s in new], autojunk=False
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for i in range(i1, i2):
                    out += gaps[i] + self.statement(old[i])
            elif tag == "delete":
                for i in range(i1, i2):
                    out += gaps[i]
            elif tag == "insert":
                out += self.rendered(new[j1:j2], indent)
            else:
                out += self.replaced(old[i1:i2], new[j1:j2], gaps[i1:i2], indent)
        return out + list(after)

    def replaced(
        self, old: list[ast.stmt], new: list[ast.stmt], gaps: list[list[str]], indent: str
    ) -> list[str]:
        """Statements that changed. A compound statement whose header is still there (a loop
        that lost or gained a statement) keeps its text and recurses into its blocks; a statement
        whose shape is still there gets only its changed expressions replaced; a block that was
        unwrapped (a `with` left out) keeps its body's text, one level less indented; the rest
        is re-rendered."""
        out: list[str] = []
        matcher = difflib.SequenceMatcher(
            None, [_header(s) for s in old], [_header(s) for s in new], autojunk=False
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "delete":
                for i in range(i1, i2):
                    out += gaps[i]
            elif tag == "insert":
                out += self.rendered(new[j1:j2], indent)
            elif (
                i2 - i1 == 1
                and isinstance(with_ := old[i1], ast.With)
                and _same_list(with_.body, new[j1:j2])
            ):
                out += gaps[i1] + (
                    self.unwrapped(with_, indent) or self.rendered(new[j1:j2], indent)
                )
            elif i2 - i1 == j2 - j1:
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    if _recursable(old[i], new[j]):
                        out += gaps[i] + self.compound(old[i], new[j])
                    else:
                        out += gaps[i] + (
                            self.spliced(old[i], new[j]) or self.rendered([new[j]], indent)
                        )
            else:
                out += self.realigned(old[i1:i2], new[j1:j2], gaps[i1:i2], indent)
        return out

    def realigned(
        self, old: list[ast.stmt], new: list[ast.stmt], gaps: list[list[str]], indent: str
    ) -> list[str]:
        """Statements that changed and whose number changed too (a helper's copy inserted before
        a changed call): paired by kind of statement, so a call whose argument changed keeps its
        text; the rest re-rendered."""
        out: list[str] = []
        kinds = difflib.SequenceMatcher(
            None, [type(s).__name__ for s in old], [type(s).__name__ for s in new], autojunk=False
        )
        for tag, i1, i2, j1, j2 in kinds.get_opcodes():
            if tag == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    kept = (
                        self.compound(old[i], new[j])
                        if _recursable(old[i], new[j])
                        else self.spliced(old[i], new[j])
                    )
                    out += gaps[i] + (kept or self.rendered([new[j]], indent))
            elif tag == "insert":
                out += self.rendered(new[j1:j2], indent)
            else:
                out += (gaps[i1] if i1 < i2 else []) + self.rendered(new[j1:j2], indent)
        return out

    def spliced(self, old: ast.stmt, new: ast.stmt) -> list[str] | None:
        """`old`'s text with each changed expression replaced by the new one's rendering, when
        that is the only kind of change (checked by parsing the result); else None."""
        splices = _splices(old, new)
        if not splices:
            return None
        first = _first_line(old)
        lines = self.statement(old)
        for parenthesise in (False, True):
            text = [line.encode() for line in lines]
            for a, b in sorted(
                splices, key=lambda pair: (pair[0].lineno, pair[0].col_offset), reverse=True
            ):
                rendered = ast.unparse(b)
                rendered = double_quoted(rendered) if self.double_quotes else rendered
                if parenthesise and not isinstance(b, _ATOMS):
                    rendered = f"({rendered})"
                start, end = a.lineno - first, _last_line(a) - first
                merged = (
                    text[start][: a.col_offset] + rendered.encode() + text[end][a.end_col_offset :]
                )
                text[start : end + 1] = [merged]
            decoded = [t.decode() for t in text]
            try:
                parsed = ast.parse(textwrap.dedent("".join(decoded))).body
            except SyntaxError:
                continue
            if len(parsed) == 1 and _same(parsed[0], new):
                return decoded
        return None

    def unwrapped(self, old: ast.With, indent: str) -> list[str] | None:
        """The text of a `with` statement's body (comments included), moved out to the
        statement's own indentation."""
        body = old.body
        inner = self.indent(body)
        if not inner.startswith(indent) or inner == indent:
            return None
        header_end = max(
            n.end_lineno or 0
            for item in old.items
            for n in ast.walk(item)
            if hasattr(n, "end_lineno")
        )
        lines = self.span(header_end + 1, _last_line(body[-1]))
        extra = len(inner) - len(indent)
        if any(line.strip() and not line.startswith(inner) for line in lines):
            return None  # a line (a comment) less indented than the body: re-render instead
        return [line[extra:] if line.strip() else line for line in lines]

    def statement(self, stmt: ast.stmt) -> list[str]:
        return self.span(_first_line(stmt), _last_line(stmt))

    def compound(self, old: ast.stmt, new: ast.stmt) -> list[str]:
        """A compound statement whose header is unchanged: its header and the text between its
        blocks kept, each changed block re-rendered."""
        blocks = [(getattr(old, f), getattr(new, f)) for f in BLOCK_FIELDS if getattr(old, f, None)]
        out: list[str] = []
        cursor = _first_line(old)
        for old_block, new_block in blocks:
            start, end = _first_line(old_block[0]), _last_line(old_block[-1])
            header = self.span(cursor, start - 1)
            if _same_list(old_block, new_block):
                out += header + self.span(start, end)
            else:
                out += self.block(old_block, new_block, header, [])
            cursor = end + 1
        return out + self.span(cursor, _last_line(old))


_ATOMS = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Constant,
    ast.Subscript,
    ast.List,
    ast.Dict,
    ast.Set,
)
"""Expressions that need no parentheses wherever another expression stood."""


def _splices(old: ast.AST, new: ast.AST) -> list[tuple[ast.expr, ast.expr]] | None:
    """The smallest expressions of `old` to replace by those of `new` to make one the other,
    when the two differ only in expressions; None when they differ in shape (a statement or a
    list of statements added or removed)."""
    if _same(old, new):
        return []
    if type(old) is type(new):
        found: list[tuple[ast.expr, ast.expr]] = []
        differs = False  # in more than expressions
        for name in old._fields:
            a, b = getattr(old, name), getattr(new, name)
            pairs = (
                list(zip(a, b, strict=False))
                if isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                else [(a, b)]
            )
            for x, y in pairs:
                if isinstance(x, ast.AST) and isinstance(y, ast.AST):
                    sub = _splices(x, y)
                elif (
                    isinstance(x, list)
                    or isinstance(y, list)
                    or isinstance(x, ast.AST)
                    or isinstance(y, ast.AST)
                ):
                    sub = None if x != y else []
                else:
                    sub = [] if x == y else None
                if sub is None:
                    differs = True
                    break
                found += sub
            if differs:
                break
        if not differs:
            return found
    if (
        isinstance(old, ast.expr)
        and isinstance(new, ast.expr)
        and getattr(old, "end_col_offset", None) is not None
    ):
        return [(old, new)]
    return None


def _same_list(a: list[ast.stmt], b: list[ast.stmt]) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


def _recursable(old: ast.stmt, new: ast.stmt) -> bool:
    """Same kind of compound statement with the same header (everything but its blocks), and
    every block still there: only the blocks' statements changed."""
    if type(old) is not type(new) or not any(getattr(old, f, None) for f in BLOCK_FIELDS):
        return False
    if any(bool(getattr(old, f, None)) != bool(getattr(new, f, None)) for f in BLOCK_FIELDS):
        return False
    if isinstance(old, ast.Try | ast.TryStar) or (isinstance(old, ast.If) and old.orelse):
        return False  # handlers, and `elif` chains, have headers of their own between the blocks
    header_old, header_new = _without_blocks(old), _without_blocks(new)
    return _same(header_old, header_new)


def _header(stmt: ast.stmt) -> str:
    """What identifies a statement across an edit of its blocks: its kind and its header."""
    if any(getattr(stmt, f, None) for f in BLOCK_FIELDS):
        return type(stmt).__name__ + ":" + ast.dump(_without_blocks(stmt))
    return ast.dump(stmt)


def _without_blocks(stmt: ast.stmt) -> ast.stmt:
    fields = {f: [] if f in BLOCK_FIELDS else getattr(stmt, f) for f in stmt._fields}
    return type(stmt)(**fields)
