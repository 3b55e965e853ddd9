"""A strict reader of GIFT, Moodle's text format for questions, written from its documentation
(docs.moodle.org, "GIFT format") and sharing no code with the exporter, to read exports back.

What it reads, as documented:

- Questions are separated by at least one blank line; a line starting with `//` is a comment.
- `$CATEGORY: path` (a block of its own) puts the questions after it in that category.
- A question: optional `::title::`, optional `[html]`/`[moodle]`/`[plain]`/`[markdown]` marker,
  the question text, then the answers between `{` and `}`.
- In the answers: `=` starts a right answer, `~` a wrong one, `%n%` right after it weighs it (per
  cent, may be negative or fractional), `#` starts that answer's feedback, `####` the general
  feedback. All answers `=` (no `~`): short answer; any `~`: multiple choice.
- `\\~ \\= \\# \\{ \\} \\:` are those characters as text, `\\n` a line break, `\\\\` a backslash.

Strict where Moodle is lenient, so an exporter's slip fails a test instead of importing oddly:
an unescaped special character in a text, an unknown escape (`\\t`), text after the closing `}`,
`->` in an answer (Moodle would read the question as matching), and the types this project
never writes (true/false, numerical, matching, essay) are errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ESCAPABLE = "~=#{}:"
FORMATS = ("html", "moodle", "plain", "markdown")


class GiftError(ValueError):
    pass


@dataclass
class GiftAnswer:
    text: str
    weight: float
    """Per cent of the mark: `=` is 100 and `~` 0 unless `%n%` says otherwise."""
    feedback: str | None = None
    marker: str = "="


@dataclass
class GiftQuestion:
    category: str | None
    title: str | None
    format: str | None
    text: str
    kind: str
    """`multichoice` or `shortanswer`."""
    answers: list[GiftAnswer] = field(default_factory=list)
    general_feedback: str | None = None
    comments: list[str] = field(default_factory=list)
    """The `//` lines just before the question, without the slashes."""


def _unescape(raw: str, where: str) -> str:
    """Text with GIFT's escapes undone; an unescaped special character is an error."""
    out = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 >= len(raw):
                raise GiftError(f"{where}: a lone backslash at the end")
            nxt = raw[i + 1]
            if nxt in ESCAPABLE or nxt == "\\":
                out.append(nxt)
            elif nxt == "n":
                out.append("\n")
            else:
                raise GiftError(
                    f"{where}: unknown escape \\{nxt} in {raw[max(0, i - 20) : i + 20]!r}"
                )
            i += 2
            continue
        if c in ESCAPABLE:
            raise GiftError(f"{where}: unescaped {c!r} in {raw[max(0, i - 30) : i + 30]!r}")
        out.append(c)
        i += 1
    return "".join(out)


def _split_unescaped(raw: str, stops: str) -> list[tuple[str, str]]:
    """Pieces of `raw` as (the special character that opened it, its raw text); escapes kept."""
    pieces: list[tuple[str, str]] = [("", "")]
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + raw[i : i + 2])
            i += 2
            continue
        if raw.startswith("####", i) and "#" in stops:
            pieces.append(("####", ""))
            i += 4
            continue
        if c in stops:
            pieces.append((c, ""))
        else:
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + c)
        i += 1
    return pieces


def _find_unescaped(raw: str, char: str, start: int = 0) -> int:
    i = start
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw.startswith(char, i):
            return i
        i += 1
    return -1


_WEIGHT = re.compile(r"^%(-?\d+(?:\.\d+)?)%")


def _answers(raw: str, where: str) -> tuple[list[GiftAnswer], str | None]:
    stripped = raw.strip()
    if not stripped:
        raise GiftError(f"{where}: an empty answer block (an essay): not written by this project")
    if stripped in ("T", "F", "TRUE", "FALSE") or stripped.startswith("#"):
        raise GiftError(f"{where}: a true/false or numerical question: not written by this project")
    answers: list[GiftAnswer] = []
    general = None
    pieces = _split_unescaped(raw, "=~#")
    if pieces[0][1].strip():
        raise GiftError(f"{where}: text before the first answer: {pieces[0][1]!r}")
    for opener, body in pieces[1:]:
        if opener in "=~":
            weight = 100.0 if opener == "=" else 0.0
            found = _WEIGHT.match(body)
            if found:
                weight, body = float(found.group(1)), body[found.end() :]
            if "->" in body:
                raise GiftError(f"{where}: '->' in an answer makes Moodle read a matching question")
            answers.append(GiftAnswer(_unescape(body.strip(), where), weight, marker=opener))
        elif opener == "#":
            if not answers or answers[-1].feedback is not None:
                raise GiftError(f"{where}: feedback without an answer before it")
            answers[-1].feedback = _unescape(body.strip(), where)
        else:  # ####
            if general is not None:
                raise GiftError(f"{where}: two general feedbacks")
            general = _unescape(body.strip(), where)
    return answers, general


def _question(block: str, category: str | None, comments: list[str], where: str) -> GiftQuestion:
    rest = block.strip()
    title = None
    if rest.startswith("::"):
        end = _find_unescaped(rest, "::", 2)
        if end < 0:
            raise GiftError(f"{where}: a title without its closing '::'")
        title, rest = _unescape(rest[2:end], where), rest[end + 2 :].lstrip()
    fmt = None
    marker = re.match(r"^\[(\w+)\]", rest)
    if marker:
        if marker.group(1) not in FORMATS:
            raise GiftError(f"{where}: unknown format [{marker.group(1)}]")
        fmt, rest = marker.group(1), rest[marker.end() :]
    opening = _find_unescaped(rest, "{")
    if opening < 0:
        raise GiftError(f"{where}: no answer block")
    closing = _find_unescaped(rest, "}", opening + 1)
    if closing < 0:
        raise GiftError(f"{where}: an answer block without its closing '}}'")
    if rest[closing + 1 :].strip():
        raise GiftError(
            f"{where}: text after the answers (a missing-word question): {rest[closing + 1 :]!r}"
        )
    if _find_unescaped(rest[opening + 1 : closing], "{") >= 0:
        raise GiftError(f"{where}: unescaped '{{' inside the answers")
    text = _unescape(rest[:opening].strip(), where)
    answers, general = _answers(rest[opening + 1 : closing], where)
    markers = {a.marker for a in answers}
    kind = "multichoice" if "~" in markers else "shortanswer"
    return GiftQuestion(category, title, fmt, text, kind, answers, general, comments)


def read_gift(source: str) -> list[GiftQuestion]:
    """Every question in a GIFT file, in order, each with the category it falls in."""
    source = source.removeprefix("\ufeff")
    blocks: list[tuple[list[str], list[str], int]] = []  # (comments, lines, first line number)
    comments: list[str] = []
    lines: list[str] = []
    start = 0
    for number, line in enumerate(source.replace("\r\n", "\n").split("\n"), start=1):
        if line.lstrip().startswith("//"):
            comments.append(line.lstrip()[2:].strip())
        elif not line.strip():  # a blank line ends a question (comments alone make none)
            if lines:
                blocks.append((comments, lines, start))
            comments, lines = [], []
        else:
            start = start if lines else number
            lines.append(line)
    if lines:
        blocks.append((comments, lines, start))
    questions = []
    category = None
    for block_comments, block_lines, first in blocks:
        block = "\n".join(block_lines)
        if block.startswith("$CATEGORY:"):
            if len(block_lines) != 1:
                raise GiftError(f"line {first}: a $CATEGORY line must stand alone")
            category = block[len("$CATEGORY:") :].strip()
            continue
        questions.append(_question(block, category, block_comments, f"line {first}"))
    return questions
