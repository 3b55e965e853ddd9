"""Editing a question-set file the way an author would, keeping its comments, order and quoting
(ruamel.yaml's round trip), so a change made in the studio is a clean diff in the bank's history."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import LiteralScalarString

from app.bank.schema import STARTER_DESCRIPTION_END, STARTER_EXPLANATION
from app.bank.yaml_tree import yaml_problems

NEW_QUESTION = {
    "kind": "predict_output",
    "topic": "autocast-basics",
    "difficulty": 1,
    "prompt": "What does this print?",
    "code": 'import torch\nwith torch.autocast("cpu"):\n    y = torch.nn.Linear(4, 2)(torch.ones(1, 4))\nprint(y.dtype)\n',
    "requires": "cpu",
    "answer": "",
    "explanation": STARTER_EXPLANATION,  # refused as it is: the set stays out of the bank until it is written
    "source": "",  # lint refuses an empty source: the author says where the question comes from
}
"""What "New question" starts from: the author runs it, takes its output as the answer, writes."""


def _yaml() -> YAML:
    y = YAML()
    y.preserve_quotes = True
    # Never re-wrap: at 100 columns a round trip re-folded 1,158 of the bank's lines the author
    # never touched (the diff of one "use this output" ran over the whole file).
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def _dump(data: Any) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def _block(text: str) -> Any:
    """Multi-line text as a `|` block, as authors write code and answers."""
    return (
        LiteralScalarString(text if text.endswith("\n") else text + "\n")
        if "\n" in text.rstrip("\n")
        else text
    )


class NotASet(Exception):
    """The text is not (yet) a question set an edit can be made in; the message says why. The
    editor's text is often half-typed: that is a sentence for its author, never a crash."""


def _load(text: str) -> tuple[Any, list[Any]]:
    """The set's data and its questions (those that are mappings) from the editor's text."""
    # Read by libyaml first: ruamel's reader (pure Python) took 4 s to give up on 3,000 nested
    # brackets, and follows aliases wherever they lead.
    problems = yaml_problems(text, "the file")
    if problems:
        raise NotASet(f"Line {problems[0].line}: {problems[0].message}. Fix it, then try again.")
    try:
        data = _yaml().load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise NotASet(
            f"The file's YAML does not read yet{where}: fix it, then try again."
        ) from None
    except (RecursionError, TypeError, ValueError):  # nested too deep, a list as a key
        raise NotASet(
            "The file's YAML does not read as a question set: fix it, then try again."
        ) from None
    if not isinstance(data, dict):
        raise NotASet(
            "The file is not a question set yet: it needs `title:`, `description:` and `questions:`."
        )
    if data.get("questions") is None:
        data["questions"] = []
    if not isinstance(data["questions"], list):
        raise NotASet("`questions:` is not a list yet: each question starts with `- id: ...`.")
    return data, [q for q in data["questions"] if isinstance(q, dict)]


def set_answer(text: str, question_id: str, output: str) -> str:
    """The set's YAML with `question_id`'s key set to `output` (what its code printed): a
    predict-the-output question's `answer`; for a multiple-choice one, what its right choice says
    the run prints (its `outcome`'s `stdout`; `expect`'s where the question has its own). KeyError
    when there is no such question; ValueError when a multiple-choice one has not exactly one right
    choice and no expect block (which choice would it be?)."""
    data, questions = _load(text)
    for q in questions:
        if q.get("id") == question_id:
            printed = _block(output.rstrip("\n")) if output.strip() else ""
            if q.get("kind") != "multiple_choice":
                q["answer"] = printed
                return _dump(data)
            right = [
                c
                for c in q.get("choices") or []
                if isinstance(c, dict) and c.get("correct") is True
            ]
            if isinstance(q.get("expect"), dict):
                q["expect"]["stdout"] = printed
            elif len(right) == 1:
                if not isinstance(right[0].get("outcome"), dict):
                    right[0]["outcome"] = {}
                right[0]["outcome"]["stdout"] = printed
            else:
                raise ValueError(
                    f"{question_id}: mark the one right choice (correct: true) first; its outcome takes the output"
                )
            return _dump(data)
    raise KeyError(question_id)


def add_choice(
    text: str, question_id: str, choice_text: str, why: str, outcome: dict[str, str] | None = None
) -> str:
    """The set's YAML with a wrong choice appended to `question_id`'s choices (a distractor);
    KeyError when there is no such question, ValueError when it has no choices (`NotASet`, like
    every edit here, when the text is not a question set yet)."""
    data, questions = _load(text)
    for q in questions:
        if q.get("id") == question_id:
            if not isinstance(q.get("choices"), list):
                raise ValueError(f"{question_id} has no choices")
            choice: dict[str, Any] = {"text": choice_text, "correct": False, "why": why}
            if (
                outcome
            ):  # what its run showed, which the code as written must not do (checked by running)
                choice["outcome"] = {key: _block(value) for key, value in outcome.items()}
            q["choices"].append(choice)
            return _dump(data)
    raise KeyError(question_id)


def add_question(text: str, question_id: str, topic: str | None = None) -> str:
    """The set's YAML with a new question (from `NEW_QUESTION`) appended under `question_id`, in
    `topic`, or else the topic most of the set's questions have (a set's questions share one
    more often than not: another set's topic counted a question more in it on learners' pages)."""
    data, questions = _load(text)
    topics = Counter(q["topic"] for q in questions if isinstance(q.get("topic"), str))
    fresh: dict[str, Any] = {"id": question_id}
    for key, value in NEW_QUESTION.items():
        fresh[key] = _block(value) if isinstance(value, str) else value
    fresh["topic"] = topic or (topics.most_common(1)[0][0] if topics else NEW_QUESTION["topic"])
    data["questions"].append(fresh)
    return _dump(data)


def new_set(title: str) -> str:
    """A set file's start: its description is a placeholder the loader refuses (`Written`), so the
    file stays out of the bank, a draft, until its author says what the set asks about."""
    return _dump(
        {"title": title, "description": f"{title}{STARTER_DESCRIPTION_END}", "questions": []}
    )


def code_of(text: str, question_id: str) -> tuple[str, str]:
    """`question_id`'s code and where it runs (`requires`), from a set's YAML that need not be a
    valid set yet (a source or an explanation still to write): an author runs the code to write
    the answer from what it prints. KeyError when there is no such question or it has no code."""
    _, questions = _load(text)
    for q in questions:
        if q.get("id") == question_id and isinstance(q.get("code"), str) and q["code"].strip():
            requires = q.get("requires")
            return str(q["code"]), requires if requires in ("cpu", "cuda", "any") else "any"
    raise KeyError(question_id)
