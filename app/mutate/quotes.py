"""Quotes in re-rendered code: `ast.unparse` writes strings in single quotes; a snippet written
with double ones gets its re-rendered lines in double quotes too, so a mutant's diff shows the
mistake and not a change of quotes (`app.mutate.apply`)."""

from __future__ import annotations

import io
import tokenize


def _strings(code: str) -> list[tokenize.TokenInfo]:
    try:
        return [
            t
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type == tokenize.STRING
        ]
    except (tokenize.TokenError, SyntaxError):
        return []


def prefers_double_quotes(code: str) -> bool:
    """Whether the code writes its strings in double quotes (`ast.unparse` writes single ones)."""
    quotes = [t.string.lstrip("rRbBuUfF")[:1] for t in _strings(code)]
    return quotes.count('"') > quotes.count("'")


def double_quoted(text: str) -> str:
    """Plain single-quoted strings in double quotes, so a re-rendered line differs from the
    original only where the rule changed it (checked by parsing, as all rendering is)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out, cursor = [], 0
    for tok in _strings(text):
        body = tok.string
        plain = len(body) >= 2 and body[0] == body[-1] == "'" and not body.startswith("'" * 3)
        if plain and '"' not in body and "\\" not in body:
            (row, col), (end_row, end_col) = tok.start, tok.end
            out.append(text[cursor : starts[row - 1] + col] + '"' + body[1:-1] + '"')
            cursor = starts[end_row - 1] + end_col
    return "".join(out) + text[cursor:]
