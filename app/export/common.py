"""What every export format shares: the question as HTML, the feedback, the accepted spellings.

Bank text is Markdown (prompt, explanation, choices, `why`); an LMS wants HTML. It is rendered
here with raw HTML off, so a `<script>` in a prompt arrives as text, never as markup. Code goes
in as preformatted text (`<pre><code>`, escaped). No web framework: only markdown-it.
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

from app.bank.load import LoadedQuestion, LoadedSet
from app.bank.public import correct_choices, title_of
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion
from app.grading import accepted_outputs, describe_tolerance
from app.verify.proof_lines import ProofLine  # noqa: F401 - decided in app.verify; the formats take it from here

LINE_BREAK = " / "
"""Short-answer fields take one line: a printed output's lines are joined with this."""

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_ONE_PARAGRAPH = re.compile(r"\A<p>((?:(?!</?p>).)*)</p>\Z", re.DOTALL)


def html_of(markdown_text: str) -> str:
    """Markdown to HTML, raw HTML in it escaped (shown as text)."""
    return _MD.render(markdown_text).strip()


def inline_html_of(markdown_text: str) -> str:
    """As `html_of`, without the paragraph around a one-paragraph text (a choice, a feedback)."""
    rendered = html_of(markdown_text)
    one = _ONE_PARAGRAPH.match(rendered)
    return one.group(1) if one else rendered


def code_html(code: str) -> str:
    """A snippet as preformatted, escaped text."""
    return (
        f'<pre><code class="language-python">{html.escape(code.rstrip(), quote=False)}</code></pre>'
    )


def title(loaded: LoadedQuestion) -> str:
    return title_of(loaded)


def category(loaded_set: LoadedSet) -> str:
    """The set's category path as Moodle writes it (a `/` in a name is doubled)."""
    name = " ".join(loaded_set.model.title.split())  # one line: GIFT reads it to the line's end
    return "$course$/top/ampquiz/" + name.replace("/", "//")


def one_line(text: str) -> str:
    return LINE_BREAK.join(text.split("\n"))


def short_answers(question: PredictOutputQuestion) -> list[str]:
    """Every spelling that counts as right (key, `accept`, the asked device's own answer), each on
    one line: a short-answer field cannot hold a line break."""
    return list(dict.fromkeys(one_line(t) for t in accepted_outputs(question)))


def multi_line(question: PredictOutputQuestion) -> bool:
    return any("\n" in t for t in accepted_outputs(question))


def question_html(loaded: LoadedQuestion) -> str:
    """The prompt, then the code, then (for a multi-line output) how to type it on one line."""
    q = loaded.question
    parts = [html_of(q.prompt)]
    if q.code:
        parts.append(code_html(q.code))
    if isinstance(q, PredictOutputQuestion) and multi_line(q):
        parts.append(f"<p>Type the output on one line, with <code>{LINE_BREAK.strip()}</code> "
                     "between its lines.</p>")  # fmt: skip
    return "\n".join(parts)


def tolerance_note(question: PredictOutputQuestion) -> str:
    """Short-answer matches text exactly; a tolerance can only be said."""
    if question.tolerance is None:
        return ""
    return (f"In ampquiz, printed numbers within {describe_tolerance(question.tolerance)} of these count "
            "as right too; this export accepts only the exact spellings.")  # fmt: skip


def general_feedback_html(loaded: LoadedQuestion, proof: str) -> str:
    """The explanation, what other devices print, the tolerance (if any), then the proof line."""
    q = loaded.question
    parts = [html_of(q.explanation)]
    if isinstance(q, PredictOutputQuestion):
        for device, printed in sorted(q.device_answers.items()):
            if device != q.asks_about:
                parts.append(f"<p>On {device.upper()} it prints (for comparison; not accepted here):</p>\n"
                             f"<pre>{html.escape(printed.rstrip(), quote=False)}</pre>")  # fmt: skip
        note = tolerance_note(q)
        if note:
            parts.append(f"<p>{html.escape(note, quote=False)}</p>")
    parts.append(f"<p><em>{html.escape(proof, quote=False)}</em></p>")
    return "\n".join(parts)


def fractions(question: MultipleChoiceQuestion) -> list[float]:
    """Each choice's share of the mark, in per cent: one right choice takes 100 and the rest 0;
    with several, the right ones share +100 and the wrong ones share -100 (so ticking every box
    scores nothing). Rounded to Moodle's 5 decimals (33.33333)."""
    right = correct_choices(question)
    if len(right) == 1:
        return [100.0 if i in right else 0.0 for i in range(len(question.choices))]
    wrong = len(question.choices) - len(right)
    return [round(100 / len(right), 5) if i in right else round(-100 / wrong, 5) if wrong else 0.0
            for i in range(len(question.choices))]  # fmt: skip


def percent(value: float) -> str:
    """A fraction as Moodle writes it: `100`, `33.33333`, `-50`."""
    return f"{value:.5f}".rstrip("0").rstrip(".")
