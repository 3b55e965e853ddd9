"""A question file's YAML as a node tree with line and column marks, and the data built from it.

The loader (`app.bank.load`) validates the data against the schema and maps each problem back to
`file:line:col` through `ParsedYaml.locate`. What can be wrong with the YAML itself is found
here: syntax, an empty file, a duplicate or non-scalar key, and a list or mapping shared through
an alias (walking one over and over took seconds for a few hundred bytes).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import yaml

from app.bank.problem import Problem


class ParsedYaml:
    """A file's YAML node tree and the data built from it, so errors can be mapped back to lines."""

    def __init__(self, node: yaml.Node, data: Any) -> None:
        self.node = node
        self.data = data

    def locate(self, loc: Iterable[Any], *, key: bool = False, skip: Collection[Any] = ()) -> tuple[int, int]:
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
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = target = node.value[part]
            else:
                break
        mark = target.start_mark
        return mark.line + 1, mark.column + 1


def _shared_collection(root: yaml.Node) -> yaml.Node | None:
    """A list or mapping the document reaches twice (through an alias), if any. A question file
    is a tree: walking a shared one over and over (`a: &a [*a]`, or aliases nested a few levels,
    each doubling what a walk sees) took seconds for a few hundred bytes."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            continue
        if id(node) in seen:
            return node
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return None


def _duplicate_keys(node: yaml.Node, path: str) -> list[Problem]:
    problems = []
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                m = key.start_mark
                problems.append(Problem(path, m.line + 1, m.column + 1, "a key must be a plain word, not a list or mapping"))
                continue
            if key.value in seen:
                m = key.start_mark
                problems.append(Problem(path, m.line + 1, m.column + 1, f"duplicate key {key.value!r}"))
            seen.add(key.value)
            problems += _duplicate_keys(value, path)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            problems += _duplicate_keys(item, path)
    return problems


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader where PyYAML was built with it: ~11x faster here (1.9 ms against 23 ms for a
set file), with the same nodes and line/column marks, so problems still point at file:line:col."""


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class _Unusual(Exception):
    """A node `_construct` leaves to PyYAML's constructor: the whole document goes to it."""


def _construct(node: yaml.Node, loader: Any, seen: set[int]) -> Any:
    """What `loader.construct_document(node)` gives, for the plain trees question files are
    (mappings of string keys, sequences, scalars), without its per-node generators and dispatch:
    a third of the time spent reading a file went there. A scalar of another type (a number, a
    boolean, null, a date) is built by the loader's own constructor for its tag; anything else
    (an alias to a mapping or sequence, a merge key, a tag of a collection's own) raises `_Unusual`."""
    tag = node.tag
    if tag == _STR and type(node) is yaml.ScalarNode:
        return node.value
    if type(node) is yaml.ScalarNode:
        return loader.construct_object(node, deep=True)
    if id(node) in seen:  # an anchored collection used twice (or within itself)
        raise _Unusual
    seen.add(id(node))
    if tag == _MAP and type(node) is yaml.MappingNode:
        out = {}
        for key_node, value_node in node.value:
            if type(key_node) is not yaml.ScalarNode or key_node.tag in ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"):
                raise _Unusual
            out[_construct(key_node, loader, seen)] = _construct(value_node, loader, seen)
        return out
    if tag == _SEQ and type(node) is yaml.SequenceNode:
        return [_construct(item, loader, seen) for item in node.value]
    raise _Unusual


def _construct_document(node: yaml.Node, loader: Any) -> Any:
    try:
        return _construct(node, loader, set())
    except (_Unusual, yaml.YAMLError):  # PyYAML's constructor then does it all, its errors included
        loader.constructed_objects, loader.recursive_objects, loader.state_generators = {}, {}, []
    return loader.construct_document(node)


def parse_yaml(text: str, path: str) -> tuple[ParsedYaml | None, list[Problem]]:
    """The file's node tree and data, or the problems that stop it being a question file's tree."""
    try:
        loader = _LOADER(text)
    except UnicodeEncodeError as exc:  # a lone surrogate: only text typed in the studio has one
        return None, [Problem(path, 1, 1, f"the text has a character that is not Unicode text at position {exc.start}")]
    try:
        node = loader.get_single_node()
        if node is None:
            return None, [Problem(path, 1, 1, "file is empty: expected title, description and questions")]
        shared = _shared_collection(node)
        if shared is not None:
            m = shared.start_mark
            return None, [Problem(path, m.line + 1, m.column + 1,
                                  "this list or mapping is used again through an alias (*name): write it out where it is needed")]  # fmt: skip
        dupes = _duplicate_keys(node, path)
        if dupes:
            return None, dupes
        return ParsedYaml(node, _construct_document(node, loader)), []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        context = exc.context
        if context and exc.context_mark and exc.problem_mark and exc.context_mark.line != exc.problem_mark.line:
            context += f" (opened at line {exc.context_mark.line + 1})"  # where the author must look
        what = " ".join(filter(None, [context, exc.problem]))
        return None, [Problem(path, line, col, f"YAML syntax error: {what}")]
    except yaml.YAMLError as exc:
        return None, [Problem(path, 1, 1, f"YAML error: {exc}")]
    finally:
        loader.dispose()


def yaml_problems(text: str, shown: str) -> list[Problem]:
    """What keeps `text` from reading as YAML a question file could be (syntax, a key written
    twice, a list or mapping shared through an alias, a character that is not text); [] when it
    reads. libyaml's, in C: a few milliseconds, and 3,000 nested brackets fail at once."""
    return parse_yaml(text, shown)[1]
