"""GIFT read back with a strict reader written from GIFT's documentation (`tests/support/gift.py`;
no maintained GIFT parser installs here): every set a category, every question with its title,
text, code, answers, weights, feedback and proof line, and nothing GIFT would misread."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bank.load import Bank
from app.export.gift import to_gift
from tests.app.export import tricky
from tests.support.gift import GiftError, GiftQuestion, read_gift


def _read(bank: Bank, proof_line=tricky.proof_for) -> dict[str, GiftQuestion]:
    questions = read_gift(to_gift(bank, proof_line))
    by_id = {}
    for q in questions:
        ids = [c.removeprefix("question: ") for c in q.comments if c.startswith("question: ")]
        assert len(ids) == 1, q.comments
        by_id[ids[0]] = q
    assert len(by_id) == len(questions)
    return by_id


def test_every_question_reads_back_in_its_sets_category(bank: Bank) -> None:
    questions = _read(bank)
    assert set(questions) == {q.id for q in bank.questions}
    assert questions["plain-cuda-only"].category == "$course$/top/ampquiz/Plain set"
    for q in bank.set("tricky").questions:
        assert (
            questions[q.id].category
            == "$course$/top/ampquiz/Braces {and} colons: a//b ~ = # — ünïcode"
        )
    assert all(q.format == "html" for q in questions.values())


def test_multiple_choice_text_code_choices_and_feedback_survive_the_escaping(bank: Bank) -> None:
    q = _read(bank)["mc-single-tricky"]
    assert q.kind == "multichoice"
    assert q.title == "Title with :: colons {braces} = ~ #"
    assert tricky.text_of(q.text).startswith(tricky.PROMPT_A_TEXT)
    assert tricky.code_blocks(q.text) == [
        tricky.CODE_BRACES.rstrip()
    ]  # the blank line, `//` and `\t` too
    assert tricky.html_fragment(q.text).find(".//script") is None
    assert [
        (tricky.text_of(a.text), tricky.text_of(a.feedback or "")) for a in q.answers
    ] == tricky.CHOICES_A_TEXT
    assert [(a.marker, a.weight) for a in q.answers] == [("=", 100), ("~", 0), ("~", 0)]
    assert (
        tricky.text_of(q.general_feedback or "")
        == f"{tricky.EXPLANATION_A_TEXT} Proof for mc-single-tricky <&> {{:}}"
    )


def test_several_right_choices_are_weighted(bank: Bank) -> None:
    q = _read(bank)["mc-multiple-conceptual"]
    assert q.kind == "multichoice"
    assert [a.weight for a in q.answers] == [50, -50, 50, -50]
    assert [a.text for a in q.answers] == [t for t, _ in tricky.CHOICES_MULTI]
    assert [a.feedback for a in q.answers] == ["why " + t for t, _ in tricky.CHOICES_MULTI]


def test_predict_output_is_short_answer(bank: Bank) -> None:
    questions = _read(bank)
    star = questions["7-star-output"]
    assert star.kind == "shortanswer"
    assert [a.text for a in star.answers] == [
        tricky.SHORT_STAR.replace("*", "\\*")
    ]  # Moodle's wildcard, escaped
    assert "Type the output on one line" in tricky.text_of(star.text)
    tolerance = questions["tolerance-output"]
    assert [(a.text, a.weight) for a in tolerance.answers] == [
        (tricky.ANSWER_TOL, 100),
        (tricky.ACCEPT_TOL, 100),
    ]
    assert all("0.2 %" in (a.feedback or "") for a in tolerance.answers)
    assert tricky.CUDA_TOL in tricky.code_blocks(tolerance.general_feedback or "")
    assert tricky.text_of(questions["plain-cuda-only"].general_feedback or "").endswith(
        "Proof for plain-cuda-only <&> {:}"
    )


def test_the_default_proof_line_comes_from_the_committed_record(bank: Bank) -> None:
    tricky.write_record(Path(bank.sets[0].path).parent, bank, {"tolerance-output"})
    questions = _read(bank, proof_line=None)
    assert tricky.text_of(questions["tolerance-output"].general_feedback or "").endswith(
        tricky.PROOF_PASS
    )


@pytest.mark.parametrize("text", [
    "Q {=a\\tb}",         # an escape GIFT does not have
    "Q = 1 {=a}",         # an unescaped special character in the text
    "Q {=a ~b} after",    # a missing-word question
    "Q {=a -> b}",        # matching
    "Q {T}",
])  # fmt: skip
def test_the_reader_is_strict(text: str) -> None:
    with pytest.raises(GiftError):
        read_gift(text)


def test_the_real_bank_exports_whole(real_bank: Bank) -> None:
    questions = _read(real_bank, proof_line=None)
    assert len(questions) == len(real_bank.questions)
    assert {q.category for q in questions.values()} == {
        f"$course$/top/ampquiz/{s.model.title}" for s in real_bank.sets
    }
    proofs = []
    for loaded in real_bank.questions:
        q = questions[loaded.id]
        if loaded.question.code:
            assert loaded.question.code.rstrip() in tricky.code_blocks(q.text)
        if loaded.question.kind == "multiple_choice":
            assert q.kind == "multichoice"
            assert len(q.answers) == len(loaded.question.choices)
            assert [a.weight > 0 for a in q.answers] == [c.correct for c in loaded.question.choices]
            for answer, choice in zip(q.answers, loaded.question.choices, strict=True):
                assert tricky.words(choice.why) <= tricky.words(answer.feedback or "")
        else:
            assert q.kind == "shortanswer" and q.answers
        proofs.append(tricky.last_paragraph(q.general_feedback or ""))
    assert all(p.startswith(tricky.PROOF_STARTS) for p in proofs)
    assert any(p.startswith("Answer verified by running on CPU · torch ") for p in proofs)
