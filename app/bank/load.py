"""Load the question bank from YAML, with every problem pointing at `file:line:col`.

Pure Python (no web framework): the CLI, the verifier and the web app all read the bank through
`load_bank`. A file with any problem is left out whole, so a bad edit never half-loads a set.

One file can never take the bank down: whatever fails in reading one (its name, what it is, its
size, its bytes, its YAML, its data) is a problem at its `file:line` that leaves it out, and
nothing raises out of `load_bank`. The bank's files are the plain files of its folder named
`FILE_NAME` (`read_set_file` says what else is there: a folder, a link, a pipe).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.bank import lint
from app.bank.files import MAX_FILE_BYTES, Unreadable, name_problem, read_set_file, shown_path
from app.bank.problem import Problem
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion, QuestionSet
from app.bank.yaml_tree import parse_yaml

log = logging.getLogger("ampquiz.bank")

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


def _describe(error: Mapping[str, Any], data: Any) -> str:
    parts = [p for p in error["loc"] if p not in KINDS]
    # Name the question by its id rather than its index: authors search files by id.
    who = ""
    if len(parts) >= 2 and parts[0] == "questions" and isinstance(parts[1], int):
        questions = data.get("questions") if isinstance(data, dict) else None
        item = (
            questions[parts[1]]
            if isinstance(questions, list) and parts[1] < len(questions)
            else None
        )
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
    shown = display or shown_path(path)
    named = name_problem(path.name)
    if named:
        return None, [Problem(shown, 1, 1, named)]
    try:
        text = read_set_file(path)
    except Unreadable as exc:
        return None, [Problem(shown, exc.line, exc.col, exc.message)]
    return load_text(text, path.stem, shown)


def load_text(text: str, set_id: str, shown: str) -> tuple[LoadedSet | None, list[Problem]]:
    """Validate a question set's YAML text (a file's, or one being edited in the studio). Never
    raises: whatever fails is a problem at `shown`."""
    try:
        return _load_text(text, set_id, shown)
    except Exception as exc:  # a fault of ours; one text must never take the bank or a request down
        log.exception("question bank: reading %s failed", shown)
        return None, [_fault(shown, exc)]


def _fault(shown: str, exc: BaseException) -> Problem:
    return Problem(shown, 1, 1, f"could not be read ({type(exc).__name__}: {exc}); this is ampquiz's fault, "
                   "and the file is left out until it reads")  # fmt: skip


def _load_text(text: str, set_id: str, shown: str) -> tuple[LoadedSet | None, list[Problem]]:
    if (
        len(text) > MAX_FILE_BYTES // 4
        and len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES
    ):
        return None, [
            Problem(
                shown, 1, 1, f"the file is over {MAX_FILE_BYTES // 1024} KiB: split it into sets"
            )
        ]
    parsed, problems = parse_yaml(text, shown)
    if parsed is None:
        return None, problems
    if parsed.odd_keys:
        return None, parsed.odd_keys
    if not isinstance(parsed.data, dict):
        return None, [
            Problem(shown, 1, 1, "expected a mapping with title, description and questions")
        ]
    try:
        model = QuestionSet.model_validate(parsed.data)
    except ValidationError as exc:
        for err in exc.errors():
            # A kind that is none of the kinds: at its own line, not at the question's first.
            where = (*err["loc"], "kind") if err["type"] == "union_tag_invalid" else err["loc"]
            line, col = parsed.locate(where, key=err["type"] == "extra_forbidden", skip=KINDS)
            problems.append(Problem(shown, line, col, _describe(err, parsed.data)))
        return None, sorted(set(problems))
    questions = []
    for i, q in enumerate(model.questions):
        line, col = parsed.locate(("questions", i, "id"), key=True, skip=KINDS)
        questions.append(LoadedQuestion(set_id, q, shown, line, col))
    return LoadedSet(set_id, shown, model, questions), []


def question_files(root: Path) -> list[Path]:
    """The files of the bank at `root` (a folder, or one file): in a folder, every entry whose
    name ends in .yaml or .yml, but hidden ones (an editor's `.#x.yaml`, the studio's temporary
    files). One that is no set file (its name, or what it is) is a problem of `load_bank`'s."""
    if root.is_file():  # the file named, through a link if it is one
        return [root.resolve() if root.is_symlink() else root]
    try:
        names = [entry.name for entry in os.scandir(root)]
    except OSError:
        return []
    return sorted(
        root / name
        for name in names
        if not name.startswith(".") and name.lower().endswith((".yaml", ".yml"))
    )


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
        try:
            loaded, problems = _load_cached(path, cache)
            inner = duplicate_ids(loaded) if loaded is not None else []
        except Exception as exc:  # the last line of defence: one file never takes the bank down
            log.exception("question bank: reading %s failed", path)
            bank.problems.append(_fault(shown_path(path), exc))
            continue
        bank.problems += problems
        if loaded is None:
            continue
        bank.problems += inner
        if not inner:
            candidates.append(
                ((loaded.path not in served_before, _mtime_ns(path), loaded.path), loaded)
            )
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
            problems.append(
                Problem(
                    q.path,
                    q.line,
                    q.col,
                    f"duplicate id {q.id!r} (first defined at {first.path}:{first.line})",
                )
            )
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
        try:
            cached = lint.warnings(loaded.questions)
        except Exception as exc:  # a fault of ours: said, and the set still served
            log.exception("question bank: linting %s failed", loaded.path)
            cached = [
                Problem(
                    loaded.path, 1, 1, f"warning: could not be linted ({type(exc).__name__}: {exc})"
                )
            ]
        loaded.__dict__["_warnings"] = cached
    return cached


def _load_cached(path: Path, cache: FileCache | None) -> tuple[LoadedSet | None, list[Problem]]:
    if cache is None:
        return load_file(path)
    try:
        st = path.lstat()  # a link's own: it is left out, whatever it points at
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
        return path.lstat().st_mtime_ns
    except OSError:
        return 0
