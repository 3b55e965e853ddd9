"""A question file's YAML as a node tree with line and column marks, and the data built from it.

The loader (`app.bank.load`) validates the data against the schema and maps each problem back to
`file:line:col` through `ParsedYaml.locate`. What can be wrong with the YAML itself is found
here: syntax, an empty file, a duplicate or non-scalar key, a list or mapping shared through
an alias (walking one over and over took seconds for a few hundred bytes), nesting deeper than a
question file goes (`MAX_DEPTH`: 600 brackets raised RecursionError out of the loader), aliases
that multiply a file's text (`MAX_TEXT`), and a value its type cannot be built from (a number of
5,000 digits, the 45th of a month).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

import yaml

from app.bank.problem import Problem

MAX_DEPTH = 16
"""Lists and mappings inside each other, at most. A question file needs 8 (the set, its
questions, a question, its choices, a choice, its device_outcome, an outcome, its
stdout_contains); the walk recurses once per level, so this also bounds the recursion."""
MAX_TEXT = 512 * 1024
"""Characters of text (keys and values) a file's data may hold, at most: the largest file the
bank reads holds no more, unless aliases (`*name`) repeat a text, which multiplied a 100 KB file
into 100 MB for every reader and export of it."""


class ParsedYaml:
    """A file's YAML node tree and the data built from it, so errors can be mapped back to lines."""

    def __init__(self, node: yaml.Node, data: Any, odd_keys: list[Problem] | None = None) -> None:
        self.node = node
        self.data = data
        self.odd_keys = odd_keys or []
        """Keys that are scalars but not text (`1:`, `null:`, `on:`): the data has them, as PyYAML
        builds it; a question file cannot (`app.bank.load` says so at their lines)."""

    def locate(
        self, loc: Iterable[Any], *, key: bool = False, skip: Collection[Any] = ()
    ) -> tuple[int, int]:
        """Line and column (1-based) of the node at a pydantic error location.

        Walks as deep as the location exists in the file: for a missing field that is the mapping
        which should hold it. With `key`, points at the last key rather than its value. Parts in
        `skip` are the validator's own (a discriminated union's tags), not the file's.
        """
        node: yaml.Node = self.node
        target = node
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                pair = next((p for p in node.value if p[0].value == part), None)
                if pair is None:
                    if part in skip:
                        continue
                    break
                target = pair[0] if key else pair[1]
                node = pair[1]
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and part < len(node.value)
            ):
                node = target = node.value[part]
            else:
                break
        mark = target.start_mark
        return mark.line + 1, mark.column + 1


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_OWN_KEY_TAGS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
_Scalar, _Sequence, _Mapping = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
_RESOLVED: dict[str, str] = {}
"""Tags of short plain scalars already resolved, shared by every file read (bounded: `_Loader.resolve`)."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's loader where PyYAML was built with it: ~11x faster here (1.9 ms against 23 ms for a
    set file), with the same nodes and line/column marks, so problems still point at file:line:col.

    Its tags are resolved as PyYAML's own `resolve` does for a safe loader (which has no path
    resolvers), with fewer steps: libyaml calls it once for every node, from Python, and it was a
    sixth of reading a file. A plain word seen before (keys, mostly) is looked up, not matched."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is _Scalar:
            if not implicit[0]:
                return _STR
            tag = _RESOLVED.get(value)
            if tag is not None:
                return tag
            tag = _STR
            for candidate, pattern in self.yaml_implicit_resolvers.get(value[:1], ()):
                if pattern.match(value):
                    tag = candidate
                    break
            if len(value) <= 40 and len(_RESOLVED) < 4096:
                _RESOLVED[value] = tag
            return tag
        return _SEQ if kind is _Sequence else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:  # no path resolvers
        pass

    def ascend_resolver(self) -> None:
        pass


class _Shared(Exception):
    """A list or mapping the document reaches a second time (through an alias)."""

    def __init__(self, node: yaml.Node) -> None:
        self.node = node


class _Refused(Exception):
    """What stops the walk at a node: the problem is said there, and the file is no question file."""

    def __init__(self, node: yaml.Node, message: str) -> None:
        self.node = node
        self.message = message


class _Walk:
    """One pass over a document's nodes that builds its data as `loader.construct_document` would,
    and finds what keeps it from being a question file's tree: a key that is not a plain word, a
    key written twice, and a list or mapping reached twice through an alias (raises `_Shared`: a
    question file is a tree, and walking a shared one over and over, `a: &a [*a]` or aliases
    nested a few levels each doubling what a walk sees, took seconds for a few hundred bytes).

    Data is built for the plain trees question files are (mappings of string keys, sequences,
    scalars) without PyYAML's per-node generators and dispatch, a third of reading a file. A
    scalar of another type (a number, a boolean, null, a date) is built by the loader's own
    constructor for its tag. Anything else (a merge key, a collection's own tag, a scalar its
    constructor refuses) sets `unusual`: PyYAML's constructor then builds the whole document."""

    def __init__(self, loader: Any, path: str) -> None:
        self.loader = loader
        self.path = path
        self.seen: set[int] = set()
        self.problems: list[Problem] = []
        self.odd_keys: list[Problem] = []
        self.unusual = False
        self.text = 0
        """Characters of scalar text met so far, an alias's each time it is met (`MAX_TEXT`)."""

    def _problem(self, node: yaml.Node, message: str, into: list[Problem] | None = None) -> None:
        m = node.start_mark
        (self.problems if into is None else into).append(
            Problem(self.path, m.line + 1, m.column + 1, message)
        )

    def node(self, node: yaml.Node, depth: int = 1) -> Any:
        kind = type(node)
        if kind is _Scalar:
            self.text += len(node.value)
            if self.text > MAX_TEXT:
                raise _Refused(node, f"aliases (*name) repeat this text until the file holds over {MAX_TEXT // 1024}K "
                                     "characters of text: write each text once")  # fmt: skip
            if node.tag == _STR:
                return node.value
            try:
                return self.loader.construct_object(node, deep=True)
            except yaml.YAMLError:
                self.unusual = True
                return None
            except Exception as exc:  # noqa: BLE001 - `int` of 5,000 digits, month 13, `!!timestamp z`
                raise _Refused(node, f"{node.value[:40]!r} does not read as the value it looks like ({exc}): "
                                     "put it in quotes if it is text") from None  # fmt: skip
        if depth > MAX_DEPTH:
            raise _Refused(node, f"lists and mappings nested more than {MAX_DEPTH} deep here: a question file "
                                 "nests 8 at most")  # fmt: skip
        if id(node) in self.seen:
            raise _Shared(node)
        self.seen.add(id(node))
        if kind is _Mapping:
            self.unusual |= node.tag != _MAP
            out: dict[Any, Any] = {}
            keys: set[str] = set()
            for key_node, value_node in node.value:
                if type(key_node) is not _Scalar:
                    self._problem(key_node, "a key must be a plain word, not a list or mapping")
                    # walked all the same: an alias may share a list through it
                    self.node(key_node, depth + 1)
                    self.node(value_node, depth + 1)
                    continue
                if key_node.value in keys:
                    self._problem(key_node, f"duplicate key {key_node.value!r}")
                keys.add(key_node.value)
                own = key_node.tag in _OWN_KEY_TAGS
                self.unusual |= own
                key = self.node(key_node, depth)
                if not own and not isinstance(key, str):
                    self._problem(key_node, f"the key {key_node.value!r} reads as {type(key).__name__}, not as a word: "
                                            "put it in quotes, or fix its name", self.odd_keys)  # fmt: skip
                try:
                    value = self.node(value_node, depth + 1)
                except _Refused as refused:
                    if refused.node is value_node and isinstance(key, str):  # said with its key
                        refused.message = f"{key}: {refused.message}"
                    raise
                try:
                    out[key] = value
                except TypeError:  # a key its constructor made unhashable: PyYAML says so
                    self.unusual = True
            return out
        if kind is _Sequence:
            self.unusual |= node.tag != _SEQ
            return [self.node(item, depth + 1) for item in node.value]
        self.unusual = True
        return None


_KEY_WITHOUT_SPACE = re.compile(r"^(\s*(?:-\s+)?[A-Za-z_][\w-]*):(\S.*)$")


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str, path: str) -> Problem:
    """The parser's error, at the line the author must change, with what to do there. libyaml
    names where it gave up, often the line after the mistake: `answer:torch.bfloat16` (no space)
    was reported at the next line as "could not find expected ':'", and a dedented code line at
    the key below it."""
    problem, context = exc.problem or "", exc.context or ""
    mark = exc.problem_mark or exc.context_mark
    lines = text.splitlines()
    hint = ""
    if "could not find expected ':'" in problem and exc.context_mark is not None:
        mark = exc.context_mark  # the line whose key the parser could not finish
        said = lines[mark.line] if mark.line < len(lines) else ""
        if found := _KEY_WITHOUT_SPACE.match(said):
            hint = f"put a space after the colon: `{found.group(1).strip()}: {found.group(2)}`"
        else:
            hint = ("this line is not `key: value`; if it belongs to the code above, indent it as far as the code's "
                    "first line (a line indented less ends the `|` block)")  # fmt: skip
    elif "tab character" in problem or "'\\t'" in problem:
        hint = "indent with spaces: YAML does not allow tabs in indentation"
    elif "mapping values are not allowed" in problem:
        hint = ("a value with ': ' in it must be in quotes (`prompt: \"…\"`), or this line is indented differently "
                "from the keys around it")  # fmt: skip
    elif "quoted scalar" in context and exc.context_mark is not None:
        mark = exc.context_mark
        hint = "the quote that opens here is never closed"
    elif "cannot start any token" in problem:
        hint = "a value that starts with ` or @ must be in quotes"
    elif (
        context
        and exc.context_mark
        and exc.problem_mark
        and exc.context_mark.line != exc.problem_mark.line
    ):
        context += f" (opened at line {exc.context_mark.line + 1})"  # where the author must look
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = " ".join(filter(None, [context, problem]))
    return Problem(path, line, col, f"YAML syntax error: {what}" + (f": {hint}" if hint else ""))


def parse_yaml(text: str, path: str) -> tuple[ParsedYaml | None, list[Problem]]:
    """The file's node tree and data, or the problems that stop it being a question file's tree."""
    try:
        loader = _Loader(text)
    except UnicodeEncodeError as exc:  # a lone surrogate: only text typed in the studio has one
        return None, [
            Problem(
                path,
                1,
                1,
                f"the text has a character that is not Unicode text at position {exc.start}",
            )
        ]
    try:
        node = loader.get_single_node()
        if node is None:
            return None, [
                Problem(path, 1, 1, "file is empty: expected title, description and questions")
            ]
        walk = _Walk(loader, path)
        try:
            data = walk.node(node)
        except _Shared as shared:
            m = shared.node.start_mark
            return None, [Problem(path, m.line + 1, m.column + 1,
                                  "this list or mapping is used again through an alias (*name): write it out where it is needed")]  # fmt: skip
        except _Refused as refused:
            m = refused.node.start_mark
            return None, [Problem(path, m.line + 1, m.column + 1, refused.message)]
        if walk.problems:
            return None, walk.problems
        if walk.unusual:  # PyYAML's constructor builds it all, and raises its own errors
            loader.constructed_objects, loader.recursive_objects, loader.state_generators = (
                {},
                {},
                [],
            )
            try:
                data = loader.construct_document(node)
            except yaml.YAMLError:
                raise
            except Exception as exc:  # noqa: BLE001 - a value PyYAML's constructor fails on
                return None, [Problem(path, 1, 1, f"a value does not read as its type: {exc}")]
        return ParsedYaml(node, data, walk.odd_keys), []
    except yaml.MarkedYAMLError as exc:
        return None, [_syntax_problem(exc, text, path)]
    except yaml.reader.ReaderError as exc:  # a character YAML does not take (a NUL): at its line
        line, col = _line_col(text, exc.position)
        code = exc.character if isinstance(exc.character, int) else ord(exc.character or "\0")
        return None, [Problem(path, line, col, f"YAML error: the character U+{code:04X} (a control character, "
                                               "or one YAML does not take) is not text: remove it")]  # fmt: skip
    except yaml.YAMLError as exc:
        return None, [Problem(path, 1, 1, f"YAML error: {exc}")]
    except Exception as exc:  # noqa: BLE001 - whatever else the reader raises: a problem, never a crash
        return None, [Problem(path, 1, 1, f"the YAML does not read ({type(exc).__name__}: {exc})")]
    finally:
        loader.dispose()


def _line_col(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of the character at `position`, a byte offset in `text` as UTF-8
    (libyaml's reader counts bytes)."""
    before = text.encode("utf-8", "surrogatepass")[:position]
    start = before.rfind(b"\n") + 1
    return before.count(b"\n") + 1, len(before[start:].decode("utf-8", "replace")) + 1


def yaml_problems(text: str, shown: str) -> list[Problem]:
    """What keeps `text` from reading as YAML a question file could be (syntax, a key written
    twice, a list or mapping shared through an alias, a character that is not text); [] when it
    reads. libyaml's, in C: a few milliseconds, and 3,000 nested brackets fail at once."""
    return parse_yaml(text, shown)[1]
