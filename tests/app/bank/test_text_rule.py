"""The bank's text rule, in the schema (so lint, the loader, the studio and the exports share it):
no control character but tab and newline, and no lone surrogate, in any string of a set file. A
`"\\x01"` in a YAML escape passed lint, then made the Moodle XML export ill-formed and the QTI
export die with a traceback."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.bank.load import load_text
from app.bank.schema import QuestionSet

EVERY_STRING = """\
title: "SetMARK"
description: "A set about thingsMARK"
questions:
  - id: mc-q
    title: "A titleMARK"
    kind: multiple_choice
    topic: t
    difficulty: 1
    prompt: "Which?MARK"
    code: "print(1)MARK"
    requires: cpu
    torch_versions: ">=2.0MARK"
    choices:
      - text: "RightMARK"
        correct: true
        why: "BecauseMARK"
        outcome:
          stdout: "1MARK"
          stdout_contains: ["1MARK"]
        device_outcome:
          cuda:
            stdout: "2MARK"
      - text: "WrongMARK"
        correct: false
        why: "NoMARK"
        outcome:
          raises: "RuntimeErrorMARK"
          message: "badMARK"
          warns: "UserWarningMARK"
          warning_message: "oopsMARK"
    explanation: "It printsMARK"
    source: "docsMARK"
  - id: po-q
    kind: predict_output
    topic: t
    difficulty: 1
    prompt: "What prints?"
    code: "print(1)MARK"
    answer: "1MARK"
    accept: ["1.0MARK"]
    device_answers:
      cuda: "2MARK"
    explanation: "It prints 1"
    source: "docs"
"""

MARKED = [i for i, line in enumerate(EVERY_STRING.splitlines(), 1) if "MARK" in line]


def test_the_file_is_valid_without_the_characters() -> None:
    loaded, problems = load_text(EVERY_STRING.replace("MARK", ""), "s", "s.yaml")
    assert loaded is not None, problems
    tabs = EVERY_STRING.replace("MARK", "").replace('"Which?"', '"Which?\\tA\\nB"')
    assert load_text(tabs, "s", "s.yaml")[0] is not None  # tab and newline are text


@pytest.mark.parametrize("line", MARKED)
@pytest.mark.parametrize(
    ("escape", "named"),
    [("\\x01", "U+0001"), ("\\0", "U+0000"), ("\\e", "U+001B"), ("\\r", "U+000D"), ("\\x7f", "U+007F"),
     ("\\x85", "U+0085"), ("\\x9f", "U+009F")],
)  # fmt: skip
def test_a_control_character_in_any_string_is_a_problem_at_its_line(
    line: int, escape: str, named: str
) -> None:
    lines = EVERY_STRING.splitlines(keepends=True)
    text = "".join(s.replace("MARK", escape if i == line else "") for i, s in enumerate(lines, 1))
    loaded, problems = load_text(text, "s", "s.yaml")
    assert loaded is None
    assert [p.line for p in problems] == [line], problems
    # a version range is refused as one first: not a version range, at its line all the same
    assert named in problems[0].message or "is not a version range" in problems[0].message, problems


def test_a_lone_surrogate_is_refused_by_the_schema() -> None:
    """YAML cannot carry one, but a model built from JSON or typed text can: the rule is the
    models', not the YAML reader's."""
    data = {"title": "T", "description": "D", "questions": [{
        "id": "q", "kind": "predict_output", "topic": "t", "difficulty": 1, "prompt": "half \ud83d of a smile",
        "code": "print(1)", "answer": "1", "explanation": "e", "source": "s"}]}  # fmt: skip
    with pytest.raises(
        ValidationError, match="surrogate|unicode string"
    ):  # pydantic's own str refuses it
        QuestionSet.model_validate(data)
