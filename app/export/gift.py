"""GIFT, Moodle's text format: a `$CATEGORY:` per set, then `::title::[html]text{answers}`.

Every text is HTML (the `[html]` marker on the question text; choices and feedback take the
question's format), with GIFT's special characters `~ = # { } :` and the backslash escaped by a
backslash, and every line break written `\\n`: a question is then one line of text plus one line
per answer, so nothing in it can read as the blank line that ends a question or as a `//`
comment. Multiple choice: `=right#why ~wrong#why`, or with several right choices
`~%50%right#why ~%-100%wrong#why`. Predict-output is short answer: `=spelling` for every accepted
spelling (one line each, `*` escaped as Moodle's short answer wants; one GIFT would misread, refused:
`_carried`). The explanation and the
proof line are the general feedback (`####`).

A question holding what GIFT cannot carry (`common.HTML_CANNOT`: a control character, a lone
surrogate) is refused at its `file:line` (`common.one_question`), as is one whose block would read
as more than one question (a blank line in it).
"""

from __future__ import annotations

import re

from app.bank.load import Bank, LoadedQuestion
from app.bank.problem import Problem
from app.bank.public import multiple_answers
from app.bank.schema import MultipleChoiceQuestion
from app.export import common
from app.export.common import Exported, ProofLine
from app.export.moodle import shortanswer_text
from app.verify.proof_lines import committed_proof_lines

SPECIAL = "\\~=#{}:"
NAME = "GIFT"


def escape(text: str) -> str:
    """GIFT text: special characters behind a backslash, line breaks as `\\n`."""
    out = "".join(f"\\{c}" if c in SPECIAL else c for c in text)
    return out.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def _choice(markup: str) -> str:
    """A choice's HTML, escaped; a leading `%` (which GIFT would read as a weight, `%50%`) as
    its HTML entity."""
    return escape("&#37;" + markup[1:] if markup.startswith("%") else markup)


_WEIGHT = re.compile(r"%-?\d+(?:\.\d+)?%")


def _carried(spelling: str) -> None:
    """A short answer is plain text, where GIFT has no escape for what it reads otherwise: `->`
    (a matching question's pair), a leading `%50%` (a weight), white space at either end (trimmed)."""
    if "->" in spelling:
        raise common.CannotCarry(
            f"its answer {spelling[:60]!r} holds '->', which GIFT reads as a matching question's pair"
        )
    if _WEIGHT.match(spelling):
        raise common.CannotCarry(
            f"its answer {spelling[:60]!r} starts as a GIFT weight (%50%) does"
        )
    if spelling != spelling.strip():
        raise common.CannotCarry(
            f"its answer {spelling[:60]!r} starts or ends with white space, which GIFT trims"
        )


def _answers(loaded: LoadedQuestion, proof: str) -> list[str]:
    q = loaded.question
    lines = []
    if isinstance(q, MultipleChoiceQuestion):
        several = multiple_answers(q)
        for choice, fraction in zip(q.choices, common.fractions(q), strict=True):
            mark = f"~%{common.percent(fraction)}%" if several else ("=" if choice.correct else "~")
            lines.append(f"{mark}{_choice(common.inline_html_of(choice.text))}"
                         f"#{escape(common.inline_html_of(choice.why))}")  # fmt: skip
    else:
        note = common.tolerance_note(q)
        feedback = " ".join(filter(None, ["Right: that is what it prints.", note]))
        for spelling in common.short_answers(q):
            _carried(spelling)
            lines.append(f"={escape(shortanswer_text(spelling))}#{escape(feedback)}")
    lines.append(f"####{escape(common.general_feedback_html(loaded, proof))}")
    return lines


def _question(loaded: LoadedQuestion, proof: str) -> str:
    head = f"::{escape(common.title(loaded))}::[html]{escape(common.question_html(loaded))}{{"
    return "\n".join([f"// question: {loaded.id}", head, *_answers(loaded, proof), "}"])


def _one_block(block: str) -> None:
    """A question's block reads as one: no blank line in it (it would end the question)."""
    if "\n\n" in block or "\n\r" in block:
        raise ValueError("a blank line in the question would end it")
    block.encode("utf-8")


def export_gift(bank: Bank, proof_line: ProofLine | None = None) -> Exported:
    """The whole bank as one GIFT file (UTF-8), but the questions GIFT cannot carry (refused)."""
    proof_line = proof_line or committed_proof_lines()
    blocks: list[str] = []
    refused: list[Problem] = []
    written = sets = 0
    for loaded_set in bank.sets:
        category: str | None = f"$CATEGORY: {common.category(loaded_set)}"
        for loaded in loaded_set.questions:
            proof = proof_line(loaded)
            named = common.sources(loaded, proof, ("title",), loaded_set)
            block, problem = common.one_question(
                loaded, NAME, common.HTML_CANNOT, named,
                lambda: _question(loaded, proof),  # noqa: B023 - called at once
                str, _one_block,
            )  # fmt: skip
            if block is None:
                assert problem is not None
                refused.append(problem)
                continue
            if category is not None:
                blocks.append(category)
                category, sets = None, sets + 1
            blocks.append(block)
            written += 1
    head = f"// ampquiz: {written} questions in {sets} sets"
    return Exported("\n\n".join([head, *blocks]) + "\n", refused)


def to_gift(bank: Bank, proof_line: ProofLine | None = None) -> str:
    """The whole bank as one GIFT file (UTF-8); `common.ExportRefused` if a question cannot be."""
    return str(common.whole(export_gift(bank, proof_line)))
