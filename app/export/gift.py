"""GIFT, Moodle's text format: a `$CATEGORY:` per set, then `::title::[html]text{answers}`.

Every text is HTML (the `[html]` marker on the question text; choices and feedback take the
question's format), with GIFT's special characters `~ = # { } :` and the backslash escaped by a
backslash, and every line break written `\\n`: a question is then one line of text plus one line
per answer, so nothing in it can read as the blank line that ends a question or as a `//`
comment. Multiple choice: `=right#why ~wrong#why`, or with several right choices
`~%50%right#why ~%-100%wrong#why`. Predict-output is short answer: `=spelling` for every accepted
spelling (one line each, `*` escaped as Moodle's short answer wants). The explanation and the
proof line are the general feedback (`####`).
"""

from __future__ import annotations

from app.bank.load import Bank, LoadedQuestion
from app.bank.public import multiple_answers
from app.bank.schema import MultipleChoiceQuestion
from app.export import common
from app.export.common import ProofLine
from app.export.moodle import shortanswer_text
from app.verify.proof_lines import committed_proof_lines

SPECIAL = "\\~=#{}:"


def escape(text: str) -> str:
    """GIFT text: special characters behind a backslash, line breaks as `\\n`."""
    out = "".join(f"\\{c}" if c in SPECIAL else c for c in text)
    return out.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def _choice(markup: str) -> str:
    """A choice's HTML, escaped; a leading `%` (which GIFT would read as a weight, `%50%`) as
    its HTML entity."""
    return escape("&#37;" + markup[1:] if markup.startswith("%") else markup)


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
            lines.append(f"={escape(shortanswer_text(spelling))}#{escape(feedback)}")
    lines.append(f"####{escape(common.general_feedback_html(loaded, proof))}")
    return lines


def _question(loaded: LoadedQuestion, proof: str) -> str:
    head = f"::{escape(common.title(loaded))}::[html]{escape(common.question_html(loaded))}{{"
    return "\n".join([f"// question: {loaded.id}", head, *_answers(loaded, proof), "}"])


def to_gift(bank: Bank, proof_line: ProofLine | None = None) -> str:
    """The whole bank as one GIFT file (UTF-8)."""
    proof_line = proof_line or committed_proof_lines()
    n = len(bank.questions)
    blocks = [f"// ampquiz: {n} questions in {len(bank.sets)} sets"]
    for loaded_set in bank.sets:
        blocks.append(f"$CATEGORY: {common.category(loaded_set)}")
        blocks += [_question(loaded, proof_line(loaded)) for loaded in loaded_set.questions]
    return "\n\n".join(blocks) + "\n"
