"""Grading a learner's answer: pure functions, no server (milliseconds)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from app.bank.load import LoadedQuestion
from app.bank.public import choice_order, picked_at
from app.bank.schema import Choice, MultipleChoiceQuestion, PredictOutputQuestion, Tolerance
from app.grading import (
    AnswerError,
    grade,
    normalise_output,
    regrade,
    spelled_otherwise,
    within_tolerance,
)
from app.store import Attempt

COMMON = {"topic": "t", "difficulty": 1, "prompt": "p", "explanation": "E", "source": "s"}

SECRET = "a server secret for the tests"


def predict(**fields: object) -> LoadedQuestion:
    values = {
        "id": "po",
        "kind": "predict_output",
        "code": "print(1)",
        "answer": "torch.float16",
        **COMMON,
        **fields,
    }
    q = PredictOutputQuestion(**values)
    return LoadedQuestion("set", q, "set.yaml", 1)


def choice(*correct: bool) -> LoadedQuestion:
    choices = [Choice(text=f"c{i}", correct=c, why=f"w{i}") for i, c in enumerate(correct)]
    q = MultipleChoiceQuestion(id="mc", kind="multiple_choice", choices=choices, **COMMON)
    return LoadedQuestion("set", q, "set.yaml", 1)


def test_a_prediction_wrong_only_in_spacing_or_capitals_is_told_so() -> None:
    """Side by side, `torch.float32  torch.float16` (two spaces) and what the code prints looked
    the same, and "Not quite" said nothing more (a newcomer's walk). Still wrong (the output is
    exact), but the result says where."""
    loaded = predict(answer="torch.float32 torch.float16\nTrue")
    spaced = grade(loaded, output="torch.float32  torch.float16\nTrue")
    assert not spaced.correct and "only in spacing" in spaced.near_miss
    assert "only in spacing" in grade(loaded, output="torch.float32\ntorch.float16 True").near_miss
    capitals = grade(loaded, output="torch.float32 torch.float16\ntrue")
    assert not capitals.correct and "only in capitals" in capitals.near_miss
    assert (
        grade(loaded, output="torch.float16 torch.float16\nTrue").near_miss
        == "Only line 1 differs; the other line is right."
    )
    assert grade(loaded, output="torch.float32 torch.float16\nTrue").near_miss == ""  # right


def test_a_near_miss_says_which_line_or_which_number_spelling() -> None:
    """Side by side with what the code prints, "Not quite" left the learner hunting: a number
    written 60000 where Python prints 60000.0, or one line of four wrong (a newcomer's walk)."""
    loaded = predict(answer="60000.0\n65504.0\ninf\ninf")
    numbers = grade(loaded, output="60000\n65504\ninf\ninf")
    assert not numbers.correct
    assert numbers.near_miss == ("Your numbers are right; Python writes them differently: it prints 60000.0 where you "
                                 "wrote 60000 (a float prints with its decimal point).")  # fmt: skip
    assert (
        "it prints 1e-05 where you wrote 1e-5."
        in grade(predict(answer="1e-05"), output="1e-5").near_miss
    )
    one_line = grade(loaded, output="60000.0\n65504.0\ninf\nnan")
    assert one_line.near_miss == "Only line 4 differs; the other 3 are right."
    assert (
        grade(loaded, output="60000.0\n0.0\ninf\nnan").near_miss
        == "Lines 2 and 4 differ; the other 2 are right."
    )
    assert (
        grade(loaded, output="60000.0\n65504.0\ninf").near_miss == "It prints 4 lines; you wrote 3."
    )
    assert (
        grade(loaded, output="1\n2\n3\n4").near_miss == ""
    )  # nothing in common: nothing to point at
    assert (
        grade(predict(answer="60000.0"), output="60001.0").near_miss == ""
    )  # a wrong number is just wrong


def test_printed_output_is_compared_after_normalising_line_ends_and_trailing_space() -> None:
    assert normalise_output("a  \r\nb\t\n\n\n") == "a\nb"
    assert grade(predict(), output="torch.float16  \n\n").correct
    assert not grade(predict(), output="torch.float32").correct


def test_accepted_spellings_count_as_right() -> None:
    loaded = predict(accept=["float16"])
    assert grade(loaded, output="float16").correct
    assert grade(loaded, output="float16").accepted == ["float16"]


def test_multiple_choice_is_right_only_with_exactly_the_correct_choices() -> None:
    loaded = choice(True, True, False)
    assert grade(loaded, picked=[1, 0]).correct
    assert not grade(loaded, picked=[0]).correct
    assert not grade(loaded, picked=[0, 1, 2]).correct
    feedback = grade(loaded, picked=[2]).choices
    assert [(f.index, f.picked, f.correct) for f in feedback] == [
        (0, False, True),
        (1, False, True),
        (2, True, False),
    ]


@pytest.mark.parametrize(
    ("loaded", "answer", "message"),
    [
        (choice(True, False), {"picked": []}, "Pick an answer first."),
        (choice(True, False), {"picked": [5]}, "Choice 5 does not exist (this question has 2)."),
        (
            choice(True, False),
            {"output": "x"},
            "This is a multiple-choice question: send the picked choices.",
        ),
        (predict(), {"picked": [0]}, "This question asks what the code prints: send the output."),
    ],
)
def test_an_answer_that_does_not_fit_is_refused_in_one_sentence(
    loaded: LoadedQuestion, answer: dict, message: str
) -> None:
    with pytest.raises(AnswerError) as info:
        grade(loaded, **answer)
    assert str(info.value) == message


def test_a_stored_attempt_is_shown_as_graded_then() -> None:
    loaded = predict()
    attempt = Attempt(learner_id="l", question_id="po", set_id="set", topic="t", kind="predict_output",
                      answer=json.dumps("torch.float32"), correct=True)  # fmt: skip
    shown = regrade(loaded, attempt)
    assert shown is not None and shown.correct is True and shown.output == "torch.float32"
    changed_kind = Attempt(learner_id="l", question_id="po", set_id="set", topic="t", kind="multiple_choice",
                           answer=json.dumps([0]), correct=False)  # fmt: skip
    assert regrade(loaded, changed_kind) is None


def test_numbers_within_the_tolerance_count_and_the_text_around_them_must_match() -> None:
    loaded = predict(answer="tensor([9.1553e-06, 1.2207e-05])", tolerance={"rel": 0.01})
    assert grade(loaded, output="tensor([9.2e-06, 1.22e-05])").correct
    assert not grade(loaded, output="tensor([9.2e-05, 1.22e-05])").correct  # ten times off
    assert not grade(loaded, output="array([9.2e-06, 1.22e-05])").correct  # other text
    assert not grade(loaded, output="tensor([9.2e-06])").correct  # a number missing
    assert not grade(predict(answer="1.5"), output="1.50001").correct  # no tolerance: exact


def test_digits_inside_a_name_are_not_numbers_to_compare() -> None:
    """With a loose tolerance (which a bank can no longer have, see below), `float32` counted as
    `float16` (32 is within 50 % of 16)."""
    loose = Tolerance.model_construct(rel=0.9, abs=0.0)
    assert within_tolerance(
        "tensor(9.5, dtype=torch.float16)", "tensor(9., dtype=torch.float16)", loose
    )
    assert not within_tolerance(
        "tensor(9., dtype=torch.float32)", "tensor(9., dtype=torch.float16)", loose
    )
    assert not within_tolerance("layer2 1.0", "layer1 1.0", loose)


def test_a_tolerance_that_counts_the_classic_mistakes_right_is_refused() -> None:
    """A key of 32768.0 with 60 % either way graded 65536.0, a scale that never backed off, as
    right; an absolute one as wide as the number graded 0 right. Refused with why (lint shows it
    at the question's line)."""
    with pytest.raises(ValidationError, match="less than or equal to 0.05"):
        predict(answer="32768.0", tolerance={"rel": 0.6})
    with pytest.raises(
        ValidationError,
        match="abs 20000 would count 0, half or twice the printed 32768.0 as right; keep it below 16384",
    ):
        predict(answer="32768.0", tolerance={"abs": 20000})
    with pytest.raises(ValidationError, match="the printed 0.004 as right"):
        predict(answer="0.5", device_answers={"cuda": "0.004"}, tolerance={"abs": 0.002})
    # Nor one printed number for another (both mix-ups were right with "1.0 1.1" and abs 0.11):
    with pytest.raises(ValidationError, match="would count the printed 1.0 as the printed 1.1"):
        predict(answer="1.0 1.1", tolerance={"abs": 0.11})
    with pytest.raises(ValidationError, match="would count the printed 1.0 as the printed 1.04"):
        predict(answer="1.0 1.04", tolerance={"rel": 0.05})
    # A printed 0 is exact, whatever the absolute tolerance: a scale that collapsed to 0.0 is not
    # one with a floor at 1.5e-05.
    collapsed = predict(answer="1.0 0.0625 0.0 1.0", tolerance={"abs": 0.03})
    assert not grade(collapsed, output="1.0 0.0625 1.52587890625e-05 1.0").correct
    assert (
        grade(collapsed, output="1.0 0.0625 0.0 1.0").correct
        and grade(collapsed, output="1.01 0.07 0 1.0").correct
    )
    tight = predict(answer="32768.0", tolerance={"rel": 0.05, "abs": 1})
    assert grade(tight, output="33000.0").correct
    assert not any(grade(tight, output=wrong).correct for wrong in ("65536.0", "16384.0", "0.0"))


@pytest.mark.parametrize(("spelling", "printed", "same"), [
    ("float32", "torch.float32", True), ("torch.half", "torch.float16", True), ("true", "True", True),
    ("0.33", "tensor(0.3333)", True), ("1e-05", "1.0000e-05", True), ("inf", "tensor(inf)", True),
    ("Tensor cpu", "<class 'torch.Tensor'> cpu", True), ("1.5e-05", "1.52587890625e-05", True), ("65536", "65536.0", True),
    ("torch.float16", "torch.float32", False), ("0.34", "tensor(0.3333)", False), ("False", "True", False),
    ("tensor(1.)", "tensor(1.) tensor(2.)", False),
    # A name the output lacks, another device, a number rounded away to nothing or to one digit:
    ("Parameter cpu", "Tensor cpu", False), ("Tensor cuda", "Tensor cpu", False), ("RuntimeError", "ValueError: x", False),
    ("0.0", "1.52587890625e-05", False), ("0", "0.4", False), ("2e-05", "1.52587890625e-05", False), ("0.3", "0.3333", False),
    ("tensor(inf, dtype=torch.float16)", "tensor(-inf, dtype=torch.float16)", False), ("-inf", "tensor(-inf)", True),
])  # fmt: skip
def test_an_accepted_spelling_must_say_what_the_code_prints(
    spelling: str, printed: str, same: bool
) -> None:
    assert (spelled_otherwise(spelling, printed) is None) == same


def test_a_phones_curly_quotes_mean_plain_ones() -> None:
    """Phone keyboards type ‘ ’ “ ” for quotes: Python prints none of them for a repr."""
    loaded = predict(answer="<class 'torch.Tensor'> \"x\"")
    assert grade(loaded, output="<class \u2018torch.Tensor\u2019> \u201cx\u201d").correct
    assert not grade(loaded, output='<class `torch.Tensor`> "x"').correct


def test_a_per_device_answer_counts_only_on_the_device_the_question_asks_about() -> None:
    about_cpu = predict(requires="any", answer="False 1.0", device_answers={"cuda": "True 65536.0"})
    assert grade(about_cpu, output="False 1.0").correct
    assert not grade(about_cpu, output="True 65536.0").correct
    about_cuda = predict(
        requires="any", device="cuda", answer="True 65536.0", device_answers={"cpu": "False 1.0"}
    )
    assert grade(about_cuda, output="True 65536.0").correct
    assert not grade(about_cuda, output="False 1.0").correct


def test_the_device_asked_about_has_one_answer_and_one_outcome() -> None:
    """A per-device answer for the device the question asks about replaced `answer` in the proof,
    so a wrong `answer` was never checked, and a learner who typed it was graded right (an AMP
    expert's planted key). Likewise a vacuous `device_outcome` on a choice. Refused with why; the
    same text again is harmless."""
    with pytest.raises(
        ValidationError,
        match="device_answers.cpu differs from answer, which is what the code prints on cpu",
    ):
        predict(
            answer="tensor([1.0001], dtype=torch.float16)",
            device_answers={"cpu": "tensor([1.], dtype=torch.float16)"},
        )
    assert predict(
        answer="torch.float16", device_answers={"cpu": "torch.float16", "cuda": "torch.float32"}
    )
    right = {
        "text": "It prints `torch.float16`",
        "correct": True,
        "why": "w",
        "outcome": {"stdout": "torch.float16"},
    }
    wrong = {"text": "It prints `torch.float32`", "correct": False, "why": "w"}
    vacuous = {**right, "device_outcome": {"cpu": {"stdout_contains": ["torch."]}}}
    with pytest.raises(
        ValidationError, match="choice 1: device_outcome.cpu differs from its outcome"
    ):
        MultipleChoiceQuestion(
            id="mc", kind="multiple_choice", code="print(1)", choices=[vacuous, wrong], **COMMON
        )
    other_device = {**right, "device_outcome": {"cuda": {"stdout": "torch.float32"}}}
    assert MultipleChoiceQuestion(
        id="mc", kind="multiple_choice", code="print(1)", choices=[other_device, wrong], **COMMON
    )


def test_an_empty_prediction_is_refused_not_graded() -> None:
    with pytest.raises(AnswerError, match="Type what you think it prints first"):
        grade(predict(), output="  \n")


def test_each_learner_has_a_stable_order_and_identity_decides() -> None:
    loaded = choice(True, False, False, False, False)
    q = loaded.question
    orders = {
        learner: choice_order(q, learner, SECRET) for learner in ("ann", "bob", "cy", "dee", "eve")
    }
    assert all(sorted(o) == [0, 1, 2, 3, 4] for o in orders.values())
    assert orders["ann"] == choice_order(q, "ann", SECRET)
    assert len({tuple(o) for o in orders.values()}) > 1
    assert len({o[0] for o in orders.values()}) > 1  # the right choice is not always first
    graded = grade(loaded, picked=[0], order=orders["bob"])
    assert graded.correct and [c.index for c in graded.choices] == orders["bob"]
    assert [c.position for c in graded.choices] == [0, 1, 2, 3, 4]
    fixed = MultipleChoiceQuestion(**{**q.model_dump(), "shuffle": False})
    assert choice_order(fixed, "ann", SECRET) == [0, 1, 2, 3, 4]


def test_an_answer_sends_positions_that_say_nothing_of_the_yaml_without_the_secret() -> None:
    """A form or an API answer sends the position of a choice in the learner's order. The order
    is drawn with the server's secret: a learner who knows their id and the code cannot work out
    which position holds the bank's first choice (where banks tend to write the right one)."""
    loaded = choice(True, False, False, False, False)
    q = loaded.question
    learners = [f"learner-{n}" for n in range(40)]
    ours = [choice_order(q, who, SECRET) for who in learners]
    theirs = [choice_order(q, who, "another server's secret") for who in learners]
    assert sum(a != b for a, b in zip(ours, theirs)) > 30  # the secret changes the orders
    right_at = {o.index(0) for o in ours}
    assert len(right_at) == 5  # the right choice is found at every position, learner by learner
    order = ours[0]
    position = order.index(0)
    assert grade(loaded, picked=picked_at([position], order), order=order).correct
    assert not grade(loaded, picked=picked_at([(position + 1) % 5], order), order=order).correct
    outcome = grade(loaded, picked=picked_at([position], order), order=order).to_dict()
    assert outcome["picked"] == outcome["correct_choices"] == [position]  # positions, outward too
    assert [c["index"] for c in outcome["choices"]] == [0, 1, 2, 3, 4]
    with pytest.raises(AnswerError, match="Choice 7 does not exist"):
        grade(loaded, picked=picked_at([7], order), order=order)


def test_a_key_about_another_device_is_not_proved_by_a_run_here() -> None:
    """A question about CUDA, with a CPU answer beside it or not: a CPU run says at best what CPU
    does (shown, never counted), so it proves nothing of the key learners are graded on."""
    from app.verify.check import skip_reason

    about_cuda = predict(
        requires="any",
        device="cuda",
        answer="torch.float16",
        device_answers={"cpu": "torch.bfloat16"},
    )
    assert "its key is what the code does on CUDA" in (
        skip_reason(about_cuda.question, "cpu") or ""
    )
    assert skip_reason(about_cuda.question, "cuda") is None
    about_cpu = predict(
        requires="any", answer="torch.bfloat16", device_answers={"cuda": "torch.float16"}
    )
    assert (
        skip_reason(about_cpu.question, "cpu") is None
        and skip_reason(about_cpu.question, "cuda") is None
    )
    # With no answer for CPU beside it too: a CPU run, where CUDA autocast turns itself off and
    # the code prints float32, once passed a key of float32 for a question about CUDA.
    cuda_only = predict(requires="any", device="cuda", answer="torch.float32")
    assert "its key is what the code does on CUDA" in (skip_reason(cuda_only.question, "cpu") or "")


def test_a_key_with_a_no_break_space_is_matched_by_one_typed_or_pasted() -> None:
    """Code printing a no-break space was proved; a learner's (even the key pasted) became a plain
    space and was graded wrong, "differs only in spacing"."""
    from app.bank.schema import PredictOutputQuestion
    from app.grading import grade_output

    q = PredictOutputQuestion(id="q", topic="t", difficulty=1, prompt="p", explanation="e", source="s",
                              kind="predict_output", code="print(1)", answer="scale:\u00a065536.0")  # fmt: skip
    assert grade_output(q, "scale:\u00a065536.0") and grade_output(q, "scale: 65536.0")


def test_an_accepted_spelling_may_not_drop_a_negation() -> None:
    """`accept: [skipped]` for code printing `not skipped` was graded right (a review's plant)."""
    from app.grading import spelled_otherwise

    assert spelled_otherwise("skipped", "not skipped") is not None
    assert spelled_otherwise("not skipped", "step not skipped") is None
