"""Exporting the bank for an LMS: Moodle XML, GIFT, a QTI 2.1 content package, or JSON.

One module per format, each a function `(bank, proof_line=None) -> Exported`: the document, and
the questions its format cannot carry, refused (left out) each with its `file:line` (never an
exception for what a question holds; `app.export.common.one_question`). `FORMATS` is the registry
`ampquiz export` reads; `to_<format>` returns the document alone, and raises `ExportRefused` when
a question was refused. `proof_line` says what proved a question's
key; by default it comes from the records committed beside the bank (`app.verify.proof_lines`), so an
export needs no sandbox and no network. Shared rendering (Markdown to HTML, code as `<pre>`,
one-line short answers) is in `app.export.common`. No web framework here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.bank.load import Bank
from app.export.common import Exported, ExportRefused, ProofLine
from app.export.gift import export_gift
from app.export.json import export_json
from app.export.moodle import export_moodle
from app.export.qti import export_qti


@dataclass(frozen=True)
class Format:
    name: str
    write: Callable[[Bank, ProofLine | None], Exported]
    binary: bool
    """Bytes (a zip), written to a file only; else text, printable."""
    suffix: str
    media_type: str
    description: str


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("moodle", export_moodle, False, ".xml", "application/xml", "Moodle XML"),
        Format(
            "gift",
            export_gift,
            False,
            ".txt",
            "text/plain; charset=utf-8",
            "GIFT (Moodle's text format)",
        ),
        Format("qti", export_qti, True, ".zip", "application/zip", "QTI 2.1 content package"),
        Format(
            "json", export_json, False, ".json", "application/json", "the normalised bank as JSON"
        ),
    )
}


def export(bank: Bank, format_name: str, proof_line: ProofLine | None = None) -> Exported:
    """The bank in one format (`FORMATS`' keys); raises KeyError for another name."""
    return FORMATS[format_name].write(bank, proof_line)


__all__ = ["FORMATS", "ExportRefused", "Exported", "Format", "ProofLine", "export"]
