"""Markdown pieces the generated reference pages share: the header that says how a page is made,
and table cells that hold any text."""

from __future__ import annotations

REGENERATE = "ampquiz docs"


def header(source: str) -> str:
    return f"<!-- Generated from {source} by `{REGENERATE}`: edit the source, then run `{REGENERATE}`. -->\n"


def cell(text: str) -> str:
    """Text for one Markdown table cell: one line, and no `|` that would end the cell."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """An inline code span that survives a table cell (a `|` inside one still splits the row)."""
    return (
        "<code>"
        + text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "&#124;")
        + "</code>"
    )
