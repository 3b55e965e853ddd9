"""What every export format shares: the question as HTML, the feedback, the accepted spellings,
and how a question its format cannot carry is refused.

Bank text is Markdown (prompt, explanation, choices, `why`); an LMS wants HTML. It is rendered
here with raw HTML off, so a `<script>` in a prompt arrives as text, never as markup. Code goes
in as preformatted text (`<pre><code>`, escaped). No web framework: only markdown-it.

Every exporter writes each question through `one_question`: a question holding a character its
format cannot carry (`XML_CANNOT`, `HTML_CANNOT`, `UTF8_CANNOT`), or whose rendering fails or does
not read back, is left out with a `Problem` at its `file:line` (`Exported.refused`), and the rest
are exported. An exporter never raises for what a question holds.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from markdown_it import MarkdownIt

from app.bank.load import LoadedQuestion, LoadedSet
from app.bank.problem import Problem
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


XML_CANNOT = re.compile(
    "[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufdcf\ufdf0-\ufffd\U00010000-\U0010ffff]"
)
"""What an XML format (Moodle XML, QTI) cannot carry in its HTML: a character XML 1.0 has not
(a control character but tab and newline, a lone surrogate, U+FFFE, U+FFFF), a carriage return
(a reader turns it into a newline), or one HTML takes for an error (DEL, C1, U+FDD0 to U+FDEF)."""
HTML_CANNOT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What GIFT cannot carry: its texts are HTML on lines of UTF-8 text, which hold no control
character but tab and newline (a carriage return would be a line break) and no lone surrogate."""
UTF8_CANNOT = re.compile("[\ud800-\udfff]")
"""What a UTF-8 document (JSON) cannot carry: a lone surrogate."""

T = TypeVar("T")


@dataclass(frozen=True)
class Exported:
    """An export: the document, and the questions its format refused (left out of it)."""

    data: str | bytes
    refused: list[Problem] = field(default_factory=list)


class CannotCarry(ValueError):
    """Raised while rendering a question: what in it the format cannot carry (said as its refusal)."""


class ExportRefused(ValueError):
    """Raised by a `to_<format>` call when a question was refused: it writes all or nothing."""

    def __init__(self, refused: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in refused))
        self.refused = refused


def whole(exported: Exported) -> Any:
    """The document, when no question was refused; else `ExportRefused`."""
    if exported.refused:
        raise ExportRefused(exported.refused)
    return exported.data


def refused(loaded: LoadedQuestion, format_name: str, why: str) -> Problem:
    return Problem(
        loaded.path,
        loaded.line,
        loaded.col,
        f"[{loaded.id}] left out of the {format_name} export: {why}",
    )


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for number, item in enumerate(value, 1):
            yield from _strings(item, f"{path} {number}")


def sources(
    loaded: LoadedQuestion, proof: str, set_fields: tuple[str, ...], loaded_set: LoadedSet | None
) -> Iterator[tuple[str, str]]:
    """Every text of a question a format writes, named as the author knows it: its fields, the
    set's (`set_fields`: those the format writes), and the proof line."""
    if loaded_set is not None:
        for name in set_fields:
            said = getattr(loaded_set.model, name, None)
            if isinstance(said, str):
                yield f"set's {name}", said
    yield from _strings(loaded.question.model_dump(mode="python", warnings=False), "")
    yield "title", title(loaded)
    yield "proof line", proof


def cannot_carry(
    cannot: re.Pattern[str], format_name: str, named: Iterator[tuple[str, str]]
) -> str | None:
    """Why a format cannot carry the first of `named` texts that holds a character of `cannot`."""
    for name, text in named:
        found = cannot.search(text)
        if found is not None:
            return f"its {name} holds U+{ord(found.group()):04X}, which {format_name} cannot carry"
    return None


def one_question(
    loaded: LoadedQuestion,
    format_name: str,
    cannot: re.Pattern[str],
    named: Iterator[tuple[str, str]],
    render: Callable[[], T],
    written: Callable[[T], str],
    reads_back: Callable[[str], object] | None = None,
) -> tuple[T | None, Problem | None]:
    """One question in a format, or the `Problem` that leaves it out: a text it holds that the
    format cannot carry; else its rendering, as `written` gives it, holding such a character (an
    HTML character reference, say) or not read back by `reads_back` (the format's own reader);
    else a failure to render it at all (a fault of ours, said as one, never a traceback)."""
    why = cannot_carry(cannot, format_name, named)
    if why:
        return None, refused(loaded, format_name, why)
    try:
        out = render()
        text = written(out)
        found = cannot.search(text)
        if found is not None:
            return None, refused(loaded, format_name, f"as written, it holds U+{ord(found.group()):04X} "
                                                      f"(from a character reference?), which {format_name} cannot carry")  # fmt: skip
        if reads_back is not None:
            reads_back(text)
    except CannotCarry as exc:
        return None, refused(loaded, format_name, str(exc))
    except Exception as exc:  # noqa: BLE001 - its reader refused it, or a fault of ours: said at its line
        return None, refused(
            loaded, format_name, f"it could not be written ({type(exc).__name__}: {exc})"
        )
    return out, None
