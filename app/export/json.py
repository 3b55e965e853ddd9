"""JSON: the whole normalised bank, one object per question with its `set_id`, `set_title` and
`proof` (the proof line), every field as the format defines it (`app.bank.schema`)."""

from __future__ import annotations

import json

from app.bank.load import Bank
from app.export.common import ProofLine
from app.verify.proof_lines import committed_proof_lines


def rows(bank: Bank, proof_line: ProofLine | None = None) -> list[dict]:
    proof_line = proof_line or committed_proof_lines()
    return [
        {
            "set_id": q.set_id,
            "set_title": s.model.title,
            **q.question.model_dump(mode="json"),
            "proof": proof_line(q),
        }
        for s in bank.sets
        for q in s.questions
    ]


def to_json(bank: Bank, proof_line: ProofLine | None = None) -> str:
    return json.dumps(rows(bank, proof_line), indent=2, ensure_ascii=False) + "\n"
