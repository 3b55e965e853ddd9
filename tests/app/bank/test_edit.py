"""The studio's rewrites of a set's YAML (`app.bank.edit`): "use this output" puts what the code
printed where the question's kind keeps its key, and the result still loads."""

from __future__ import annotations

import pytest

from app.bank import edit
from app.bank.load import load_text

SET = """title: T
description: D
questions:
  - id: po
    kind: predict_output
    topic: t
    difficulty: 1
    prompt: What prints?
    code: print(1)
    answer: "2"
    explanation: E
    source: S
  - id: mc
    kind: multiple_choice
    topic: t
    difficulty: 1
    prompt: What prints?
    code: print(1)
    choices:
      - text: one
        correct: true
        why: W
      - text: two
        correct: false
        why: W
    explanation: E
    source: S
"""


def _question(text: str, question_id: str):
    loaded, problems = load_text(text, "t", "t.yaml")
    assert loaded is not None and not problems, problems
    return next(q.question for q in loaded.questions if q.id == question_id)


def test_the_output_becomes_a_predict_output_questions_answer() -> None:
    with_mc_keyed = edit.set_answer(SET, "mc", "1\n")
    assert _question(edit.set_answer(with_mc_keyed, "po", "1\n"), "po").answer == "1"


def test_the_output_becomes_what_the_right_choice_says_the_run_prints() -> None:
    """A multiple-choice question keeps its key in which choice is right: the output goes to that
    choice's outcome (an `answer:` there made the file fail to load)."""
    assert (
        load_text(SET, "t", "t.yaml")[0] is None
    )  # with code, its right choice must say what the run does
    q = _question(edit.set_answer(SET, "mc", "1\n"), "mc")
    assert q.choices[0].outcome is not None and q.choices[0].outcome.stdout == "1"
    assert q.expect is not None and q.expect.stdout == "1"


def test_with_no_single_right_choice_it_says_what_to_do() -> None:
    both_right = SET.replace("correct: false", "correct: true")
    with pytest.raises(ValueError, match="mark the one right choice"):
        edit.set_answer(both_right, "mc", "1\n")


def test_an_edit_leaves_every_line_it_did_not_change_as_the_author_wrote_it() -> None:
    """Adding a question to each of the bank's files removes or rewrites none of its lines (at
    100 columns the round trip re-folded 1,158 of them; a blank line at the end may go)."""
    import difflib
    from pathlib import Path

    for path in sorted((Path(__file__).parents[3] / "questions").glob("*.yaml")):
        text = path.read_text()
        changed = [line for line in difflib.unified_diff(text.splitlines(), edit.add_question(text, "brand-new").splitlines(),
                                                         lineterm="", n=0)
                   if line.startswith("-") and not line.startswith("---") and line[1:].strip()]  # fmt: skip
        assert changed == [], (path.name, changed[:5])
