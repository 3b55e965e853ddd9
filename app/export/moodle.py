"""Moodle XML: a `<quiz>` with a category per set, then its questions.

Multiple choice becomes `multichoice` (`single` when exactly one choice is right; with several,
the right ones share +100 and the wrong ones -100, so ticking every box scores nothing), with each
choice's `why` as its feedback. Predict-output becomes `shortanswer` (case-sensitive) with every
accepted spelling at 100, on one line (see `common.short_answers`), and a catch-all `*` at 0. The
explanation and the proof line are the general feedback. Text is HTML (`format="html"`).

A question holding what XML cannot (`common.XML_CANNOT`), or whose element does not read back as
XML, is refused at its `file:line` (`common.one_question`); a set's category is written with its
first question that is not.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from app.bank.load import Bank, LoadedQuestion, LoadedSet
from app.bank.problem import Problem
from app.bank.public import multiple_answers
from app.bank.schema import MultipleChoiceQuestion
from app.export import common
from app.export.common import Exported, ProofLine
from app.verify.proof_lines import committed_proof_lines

PENALTY = "0.3333333"
NAME = "Moodle XML"


def _text(parent: ET.Element, tag: str, body: str, fmt: str | None = "html") -> ET.Element:
    element = ET.SubElement(parent, tag, {"format": fmt} if fmt else {})
    ET.SubElement(element, "text").text = body
    return element


def _plain(parent: ET.Element, tag: str, value: str) -> None:
    ET.SubElement(parent, tag).text = value


def shortanswer_text(spelling: str) -> str:
    """Moodle reads `*` in a short answer as a wildcard: a printed `*` is escaped."""
    return spelling.replace("*", "\\*")


def _category(loaded_set: LoadedSet) -> ET.Element:
    question = ET.Element("question", {"type": "category"})
    _text(question, "category", common.category(loaded_set), fmt=None)
    _text(question, "info", common.html_of(loaded_set.model.description))
    return question


def _question(loaded: LoadedQuestion, proof: str) -> ET.Element:
    q = loaded.question
    kind = "multichoice" if isinstance(q, MultipleChoiceQuestion) else "shortanswer"
    element = ET.Element("question", {"type": kind})
    _text(element, "name", common.title(loaded), fmt=None)
    _text(element, "questiontext", common.question_html(loaded))
    _text(element, "generalfeedback", common.general_feedback_html(loaded, proof))
    _plain(element, "defaultgrade", "1")
    _plain(element, "penalty", PENALTY)
    _plain(element, "hidden", "0")
    _plain(element, "idnumber", q.id)
    if isinstance(q, MultipleChoiceQuestion):
        _plain(element, "single", "false" if multiple_answers(q) else "true")
        _plain(element, "shuffleanswers", "true" if q.shuffle else "false")
        _plain(element, "answernumbering", "abc")
        for choice, fraction in zip(q.choices, common.fractions(q), strict=True):
            answer = _text(element, "answer", common.inline_html_of(choice.text))
            answer.set("fraction", common.percent(fraction))
            _text(answer, "feedback", common.inline_html_of(choice.why))
    else:
        _plain(element, "usecase", "1")
        note = common.tolerance_note(q)
        for spelling in common.short_answers(q):
            answer = _text(element, "answer", shortanswer_text(spelling), fmt="moodle_auto_format")
            answer.set("fraction", "100")
            _text(
                answer, "feedback", " ".join(filter(None, ["Right: that is what it prints.", note]))
            )
        fallback = _text(element, "answer", "*", fmt="moodle_auto_format")
        fallback.set("fraction", "0")
        _text(fallback, "feedback", "Not what it prints: the feedback below explains why.")
    tags = ET.SubElement(element, "tags")
    for tag in dict.fromkeys([q.topic, *q.tags]):
        _text(tags, "tag", tag, fmt=None)
    return element


def _written(element: ET.Element) -> str:
    return ET.tostring(element, encoding="unicode")


def export_moodle(bank: Bank, proof_line: ProofLine | None = None) -> Exported:
    """The whole bank as one Moodle XML document, but the questions XML cannot carry (refused)."""
    proof_line = proof_line or committed_proof_lines()
    quiz = ET.Element("quiz")
    refused: list[Problem] = []
    for loaded_set in bank.sets:
        category: ET.Element | None = _category(loaded_set)
        for loaded in loaded_set.questions:
            proof = proof_line(loaded)
            named = common.sources(loaded, proof, ("title", "description"), loaded_set)
            element, problem = common.one_question(
                loaded, NAME, common.XML_CANNOT, named,
                lambda: _question(loaded, proof),  # noqa: B023 - called at once
                _written, ET.fromstring,  # type: ignore[arg-type]
            )  # fmt: skip
            if element is None:
                assert problem is not None
                refused.append(problem)
                continue
            if category is not None:
                quiz.append(category)
                category = None
            quiz.append(element)
    ET.indent(quiz)
    data = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(quiz, encoding="unicode") + "\n"
    return Exported(data, refused)


def to_moodle(bank: Bank, proof_line: ProofLine | None = None) -> str:
    """The whole bank as one Moodle XML document; `common.ExportRefused` if a question cannot be."""
    return str(common.whole(export_moodle(bank, proof_line)))
