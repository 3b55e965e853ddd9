"""Moodle XML read back with the standard library's ElementTree (Moodle publishes no schema):
every set a category, every question with its text, code, choices, feedback and proof line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.bank.load import Bank
from app.export.moodle import to_moodle
from tests.app.export import tricky


def _read(
    bank: Bank, proof_line=tricky.proof_for
) -> tuple[list[str], dict[str, ET.Element], dict[str, str]]:
    """Categories in order, questions by idnumber, and each question's category."""
    root = ET.fromstring(to_moodle(bank, proof_line))
    assert root.tag == "quiz"
    categories, questions, category_of = [], {}, {}
    for element in root:
        assert element.tag == "question"
        if element.get("type") == "category":
            categories.append(element.findtext("category/text"))
            continue
        qid = element.findtext("idnumber")
        assert qid not in questions
        questions[qid] = element
        category_of[qid] = categories[-1]
    return categories, questions, category_of


def _html(element: ET.Element, path: str) -> str:
    node = element.find(path)
    assert node is not None, path
    assert node.get("format") == "html", path
    return node.findtext("text") or ""


def test_every_set_is_a_category_and_every_question_is_in_its_own(bank: Bank) -> None:
    categories, questions, category_of = _read(bank)
    assert categories == ["$course$/top/ampquiz/Plain set",
                          "$course$/top/ampquiz/Braces {and} colons: a//b ~ = # — ünïcode"]  # fmt: skip
    assert set(questions) == {q.id for q in bank.questions}
    assert category_of["plain-cuda-only"].endswith("/Plain set")
    assert all(category_of[q.id] == categories[1] for q in bank.set("tricky").questions)


def test_multiple_choice_keeps_text_code_choices_and_feedback(bank: Bank) -> None:
    q = _read(bank)[1]["mc-single-tricky"]
    assert q.get("type") == "multichoice"
    assert q.findtext("name/text") == "Title with :: colons {braces} = ~ #"
    text = _html(q, "questiontext")
    assert tricky.text_of(text).startswith(tricky.PROMPT_A_TEXT)
    assert tricky.code_blocks(text) == [tricky.CODE_BRACES.rstrip()]
    assert tricky.html_fragment(text).find(".//script") is None  # shown as text, never markup
    assert q.findtext("single") == "true"
    answers = q.findall("answer")
    assert [(tricky.text_of(a.findtext("text")), tricky.text_of(a.findtext("feedback/text"))) for a in answers] \
        == tricky.CHOICES_A_TEXT  # fmt: skip
    assert [a.get("fraction") for a in answers] == ["100", "0", "0"]
    assert all(
        a.get("format") == "html" and a.find("feedback").get("format") == "html" for a in answers
    )
    general = tricky.text_of(_html(q, "generalfeedback"))
    assert general == f"{tricky.EXPLANATION_A_TEXT} Proof for mc-single-tricky <&> {{:}}"


def test_several_right_choices_share_100_and_the_wrong_ones_lose_it(bank: Bank) -> None:
    q = _read(bank)[1]["mc-multiple-conceptual"]
    assert q.findtext("single") == "false"
    assert q.findtext("shuffleanswers") == "false"  # the question keeps its written order
    fractions = [float(a.get("fraction")) for a in q.findall("answer")]
    assert fractions == [50.0, -50.0, 50.0, -50.0]
    assert sum(f for f in fractions if f > 0) == pytest.approx(100)
    assert [tricky.text_of(a.findtext("text")) for a in q.findall("answer")] == [
        t for t, _ in tricky.CHOICES_MULTI
    ]
    assert tricky.code_blocks(_html(q, "questiontext")) == []


def test_predict_output_is_short_answer_with_every_accepted_spelling(bank: Bank) -> None:
    questions = _read(bank)[1]
    star = questions["7-star-output"]
    assert star.get("type") == "shortanswer"
    assert star.findtext("usecase") == "1"
    right = [a.findtext("text") for a in star.findall("answer") if a.get("fraction") == "100"]
    assert right == [tricky.SHORT_STAR.replace("*", "\\*")]  # Moodle's wildcard, escaped
    assert [a.findtext("text") for a in star.findall("answer") if a.get("fraction") == "0"] == ["*"]
    assert "Type the output on one line" in tricky.text_of(_html(star, "questiontext"))

    tolerance = questions["tolerance-output"]
    right = [a.findtext("text") for a in tolerance.findall("answer") if a.get("fraction") == "100"]
    assert right == [tricky.ANSWER_TOL, tricky.ACCEPT_TOL]  # not the CUDA output: another device's
    general = _html(tolerance, "generalfeedback")
    assert "within 0.2 % of these count as right" in tricky.text_of(general)
    assert tricky.CUDA_TOL in tricky.code_blocks(general)
    assert all(
        "0.2 %" in a.findtext("feedback/text")
        for a in tolerance.findall("answer")
        if a.get("fraction") == "100"
    )


def test_the_default_proof_line_comes_from_the_committed_record(bank: Bank) -> None:
    tricky.write_record(Path(bank.sets[0].path).parent, bank, {"mc-single-tricky"})
    questions = _read(bank, proof_line=None)[1]
    lines = {qid: tricky.text_of(_html(q, "generalfeedback")) for qid, q in questions.items()}
    assert lines["mc-single-tricky"].endswith(tricky.PROOF_PASS)
    assert lines["mc-multiple-conceptual"].endswith("Conceptual — no code to run")
    assert lines["tolerance-output"].endswith(
        "Answer not proved by running: not yet verified on CPU"
    )
    assert lines["plain-cuda-only"].endswith(
        "Answer not proved by running: not yet verified on CUDA"
    )


def test_the_real_bank_exports_whole(real_bank: Bank) -> None:
    categories, questions, _ = _read(real_bank, proof_line=None)
    assert len(categories) == len(real_bank.sets)
    assert len(questions) == len(real_bank.questions)
    proofs = []
    for loaded in real_bank.questions:
        q = questions[loaded.id]
        kind = loaded.question.kind
        assert q.get("type") == ("multichoice" if kind == "multiple_choice" else "shortanswer")
        text = _html(q, "questiontext")
        if loaded.question.code:
            assert loaded.question.code.rstrip() in tricky.code_blocks(text)
        if kind == "multiple_choice":
            answers = q.findall("answer")
            assert len(answers) == len(loaded.question.choices)
            assert [float(a.get("fraction")) > 0 for a in answers] == [
                c.correct for c in loaded.question.choices
            ]
            for answer, choice in zip(answers, loaded.question.choices, strict=True):
                assert tricky.words(choice.why) <= tricky.words(tricky.text_of(answer.findtext("feedback/text")) + " "
                                                                + answer.findtext("feedback/text"))  # fmt: skip
        else:
            assert any(a.get("fraction") == "100" for a in q.findall("answer"))
        proofs.append(tricky.last_paragraph(_html(q, "generalfeedback")))
    assert all(p.startswith(tricky.PROOF_STARTS) for p in proofs)
    assert any(
        p.startswith("Answer verified by running on CPU · torch ") for p in proofs
    )  # the committed record
