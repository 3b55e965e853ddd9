"""/studio: every question with what proves its key on each device, and every file the bank
left out, with `file:line:col` and the question ids involved."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.bank.public import title_of
from app.web.deps import State
from app.web.routes.studio.auth import Instructor
from app.web.routes.studio.view import studio_page

router = APIRouter(prefix="/studio", include_in_schema=False)
_IDS = re.compile(r"\[([a-z0-9-]+)\]|duplicate id '([a-z0-9-]+)'")


@router.get("")
async def bank_status(request: Request, state: State, who: Instructor) -> Response:
    bank = state.bank
    rows: list[dict[str, Any]] = []
    for q in bank.questions:
        proof = state.proof(q)
        rows.append({"q": q, "title": title_of(q), "state": proof.state, "badges": proof.badges,
                     "reason": proof.reason, "diff": proof.diff, "file": q.path.rsplit("/", 1)[-1], "line": q.line})  # fmt: skip
    problems = [
        {
            "text": str(p),
            "ids": sorted({a or b for a, b in _IDS.findall(p.message)}),
            "file": p.path.rsplit("/", 1)[-1],
        }
        for p in sorted(bank.problems)
    ]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return await studio_page(
        state, request, "studio/status.html", who, rows=rows, problems=problems, counts=counts
    )
