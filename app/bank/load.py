"""Load the question bank from YAML, with every problem pointing at `file:line:col`.

Pure Python (no web framework): the CLI, the verifier and the web app all read the bank through
`load_bank`. A file with any problem is left out whole, so a bad edit never half-loads a set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from app.bank import lint
from app.bank.problem import Problem
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion, QuestionSet

AnyQuestion = MultipleChoiceQuestion | PredictOutputQuestion
KINDS = ("multiple_choice", "predict_output")


@dataclass
class LoadedQuestion:
    set_id: str
    question: AnyQuestion
    path: str
    line: int
    col: int = 1

    @property
    def id(self) -> str:
        return self.question.id

    @property
    def fingerprint(self) -> str:
        """`QuestionBase.fingerprint`, computed once per loaded question."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = self.__dict__["_fingerprint"] = self.question.fingerprint()
        return cached


@dataclass
class LoadedSet:
    id: str
    path: str
    model: QuestionSet
    questions: list[LoadedQuestion]


@dataclass
class Bank:
    sets: list[LoadedSet] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    """Errors: each left its file out."""
    warnings: list[Problem] = field(default_factory=list)
    """Worth an author's look; nothing was left out for them."""

    @property
    def questions(self) -> list[LoadedQuestion]:
        return [q for s in self.sets for q in s.questions]

    def question(self, question_id: str) -> LoadedQuestion | None:
        return self._by_id.get(question_id)

    def set(self, set_id: str) -> LoadedSet | None:
        return next((s for s in self.sets if s.id == set_id), None)

    @property
    def _by_id(self) -> dict[str, LoadedQuestion]:
        cache = self.__dict__.get("_by_id_cache")
        if cache is None:
            cache = {q.id: q for q in self.questions}
            self.__dict__["_by_id_cache"] = cache
        return cache

    @property
    def topics(self) -> list[str]:
        return sorted({q.question.topic for q in self.questions})


class _Parsed:
    """A file's YAML node tree and the data built from it, so errors can be mapped back to lines."""

    def __init__(self, node: yaml.Node, data: Any) -> None:
        self.node = node
        self.data = data

    def locate(self, loc: Iterable[Any], *, key: bool = False) -> tuple[int, int]:
        """Line and column (1-based) of the node at a pydantic error location.

        Walks as deep as the location exists in the file: for a missing field that is the mapping
        which should hold it. With `key`, points at the last key rather than its value.
        """
        node: yaml.Node = self.node
        target = node
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                pair = next((p for p in node.value if p[0].value == part), None)
                if pair is None:
                    if part in KINDS:  # the discriminated union's tag in pydantic's path
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


def _parse(text: str, path: str) -> tuple[_Parsed | None, list[Problem]]:
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
        return _Parsed(node, _construct_document(node, loader)), []
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


def _describe(error: dict, data: Any) -> str:
    parts = [p for p in error["loc"] if p not in KINDS]
    # Name the question by its id rather than its index: authors search files by id.
    who = ""
    if len(parts) >= 2 and parts[0] == "questions" and isinstance(parts[1], int):
        questions = data.get("questions") if isinstance(data, dict) else None
        item = questions[parts[1]] if isinstance(questions, list) and parts[1] < len(questions) else None
        qid = item.get("id") if isinstance(item, dict) else None
        if isinstance(qid, str):
            who, parts = f"[{qid}] ", parts[2:]
    loc = ".".join(str(p) for p in parts)
    kind = error["type"]
    if kind == "missing":
        return f"{who}missing required field {loc!r}"
    if kind == "extra_forbidden":
        return f"{who}unknown field {loc!r}"
    if kind == "union_tag_invalid":
        return f"{who}{loc or 'question'}: kind must be one of {', '.join(KINDS)}"
    if kind == "union_tag_not_found":
        return f"{who}{loc or 'question'}: missing required field 'kind' ({' or '.join(KINDS)})"
    msg = error["msg"].removeprefix("Value error, ")
    if kind == "string_type" and isinstance(error.get("input"), (bool, int, float)):
        msg += f" (YAML read {error['input']!r}: put the text in quotes)"
    return f"{who}{loc}: {msg}" if loc else f"{who}{msg}"


def load_file(path: Path, display: str | None = None) -> tuple[LoadedSet | None, list[Problem]]:
    """Validate one question-set file; returns the set only when it has no problem at all."""
    shown = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(shown, 1, 1, f"cannot read file: {exc}")]
    return load_text(text, path.stem, shown)


def yaml_problems(text: str, shown: str) -> list[Problem]:
    """What keeps `text` from reading as YAML a question file could be (syntax, a key written
    twice, a list or mapping shared through an alias, a character that is not text); [] when it
    reads. libyaml's, in C: a few milliseconds, and 3,000 nested brackets fail at once."""
    return _parse(text, shown)[1]


def load_text(text: str, set_id: str, shown: str) -> tuple[LoadedSet | None, list[Problem]]:
    """Validate a question set's YAML text (a file's, or one being edited in the studio)."""
    parsed, problems = _parse(text, shown)
    if parsed is None:
        return None, problems
    if not isinstance(parsed.data, dict):
        return None, [Problem(shown, 1, 1, "expected a mapping with title, description and questions")]
    try:
        model = QuestionSet.model_validate(parsed.data)
    except ValidationError as exc:
        for err in exc.errors():
            line, col = parsed.locate(err["loc"], key=err["type"] == "extra_forbidden")
            problems.append(Problem(shown, line, col, _describe(err, parsed.data)))
        return None, sorted(set(problems))
    questions = []
    for i, q in enumerate(model.questions):
        line, col = parsed.locate(("questions", i, "id"), key=True)
        questions.append(LoadedQuestion(set_id, q, shown, line, col))
    return LoadedSet(set_id, shown, model, questions), []


def question_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))


FileCache = dict[Path, tuple[tuple[int, int], "LoadedSet | None", list[Problem]]]
"""A file's (mtime_ns, size) and what loading it gave: `load_bank` re-reads only files that changed."""


def load_bank(
    root: Path | str, *, incumbents: Mapping[str, str] | None = None, cache: FileCache | None = None
) -> Bank:
    """Load every set under `root` (a folder of YAML files, or one file), checking ids across files.

    When two files define the same id, the file that *introduced* the conflict is left out whole,
    whatever the files are called: the one that did not serve the id before (`incumbents`: id ->
    path, from the bank a live server was serving), else the one modified last. So a new file that
    reuses an id never takes down the set already served, and `ampquiz lint` blames the same file.
    """
    root = Path(root)
    bank = Bank()
    if not root.exists():
        bank.problems.append(Problem(str(root), 1, 1, "no such file or folder"))
        return bank
    served_before = set((incumbents or {}).values())
    candidates: list[tuple[tuple, LoadedSet]] = []
    for path in question_files(root):
        loaded, problems = _load_cached(path, cache)
        bank.problems += problems
        if loaded is None:
            continue
        inner = duplicate_ids(loaded)
        bank.problems += inner
        if not inner:
            candidates.append(((loaded.path not in served_before, _mtime_ns(path), loaded.path), loaded))
    taken: dict[str, LoadedQuestion] = {}
    for _rank, loaded in sorted(candidates, key=lambda c: c[0]):
        clashes = [q for q in loaded.questions if q.id in taken]
        for q in clashes:
            first = taken[q.id]
            bank.problems.append(
                Problem(q.path, q.line, q.col, f"duplicate id {q.id!r} (first defined at {first.path}:{first.line}); "
                        "this file is left out until one of them is renamed")
            )  # fmt: skip
        if not clashes:
            taken.update({q.id: q for q in loaded.questions})
            bank.sets.append(loaded)
    bank.sets.sort(key=lambda s: s.path)
    bank.warnings = sorted(w for s in bank.sets for w in _set_warnings(s))
    return bank


def duplicate_ids(loaded: LoadedSet) -> list[Problem]:
    """An id used twice in one file (the file is then left out whole)."""
    ids = [q.id for q in loaded.questions]
    problems = []
    for i, q in enumerate(loaded.questions):
        if q.id in ids[:i]:
            first = loaded.questions[ids.index(q.id)]
            problems.append(Problem(q.path, q.line, q.col, f"duplicate id {q.id!r} (first defined at {first.path}:{first.line})"))
    return problems


def ids_taken_elsewhere(loaded: LoadedSet, bank: Bank, path: Path) -> list[Problem]:
    """The file's ids (it is `path`, being edited) that another file of `bank` already serves:
    saved, the file would be left out whole, set and all, until one of them is renamed."""
    problems = []
    for q in loaded.questions:
        other = bank.question(q.id)
        if other is not None and Path(other.path).resolve() != path.resolve():
            problems.append(Problem(q.path, q.line, q.col, f"the id {q.id!r} is taken (by {Path(other.path).name}:{other.line}): "
                                    "a file that reuses one is left out whole, so rename it"))  # fmt: skip
    return problems


def _set_warnings(loaded: LoadedSet) -> list[Problem]:
    """`lint.warnings` of one set, kept on it: a reload lints only the files it read again."""
    cached = loaded.__dict__.get("_warnings")
    if cached is None:
        cached = loaded.__dict__["_warnings"] = lint.warnings(loaded.questions)
    return cached


def _load_cached(path: Path, cache: FileCache | None) -> tuple[LoadedSet | None, list[Problem]]:
    if cache is None:
        return load_file(path)
    try:
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
    except OSError:
        return load_file(path)
    hit = cache.get(path)
    if hit is not None and hit[0] == key:
        return hit[1], list(hit[2])
    loaded, problems = load_file(path)
    cache[path] = (key, loaded, list(problems))
    return loaded, problems


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
