"""JSON: the whole normalised bank, one object per question with its `set_id`, `set_title` and
`proof` (the proof line), every field as the format defines it (`app.bank.schema`). A question
JSON in UTF-8 cannot carry (`common.UTF8_CANNOT`: a lone surrogate) is refused at its `file:line`."""

from __future__ import annotations

import json
from typing import Any

from app.bank.load import Bank
from app.bank.problem import Problem
from app.export import common
from app.export.common import Exported, ProofLine
from app.verify.proof_lines import committed_proof_lines

NAME = "JSON"


def _rows(bank: Bank, proof_line: ProofLine | None) -> tuple[list[dict[str, Any]], list[Problem]]:
    proof_line = proof_line or committed_proof_lines()
    rows: list[dict[str, Any]] = []
    refused: list[Problem] = []
    for s in bank.sets:
        for q in s.questions:
            proof = proof_line(q)
            row, problem = common.one_question(
                q, NAME, common.UTF8_CANNOT, common.sources(q, proof, ("title",), s),
                lambda: {"set_id": q.set_id, "set_title": s.model.title,  # noqa: B023 - called at once
                         **q.question.model_dump(mode="json"), "proof": proof},  # noqa: B023
                lambda r: json.dumps(r, ensure_ascii=False),
                lambda text: text.encode("utf-8"),
            )  # fmt: skip
            if row is None:
                assert problem is not None
                refused.append(problem)
            else:
                rows.append(row)
    return rows, refused


def rows(bank: Bank, proof_line: ProofLine | None = None) -> list[dict]:
    """Every question's row; `common.ExportRefused` if a question cannot be one."""
    found, refused = _rows(bank, proof_line)
    if refused:
        raise common.ExportRefused(refused)
    return found


def export_json(bank: Bank, proof_line: ProofLine | None = None) -> Exported:
    """The bank as JSON, but the questions JSON cannot carry (refused)."""
    found, refused = _rows(bank, proof_line)
    return Exported(json.dumps(found, indent=2, ensure_ascii=False) + "\n", refused)


def to_json(bank: Bank, proof_line: ProofLine | None = None) -> str:
    return str(common.whole(export_json(bank, proof_line)))
