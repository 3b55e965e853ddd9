"""Rendering a studio page: the studio's own header, and a banner on every studio page while any
file of the bank is left out (an author must not miss that a save broke a set)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from app.bank.files import FILE_NAME
from app.web.rendering.render import page
from app.web.state import WebState


async def studio_page(
    state: WebState,
    request: Request,
    template: str,
    who: str,
    status_code: int = 200,
    **context: Any,
) -> Response:
    names = sorted({p.path.rsplit("/", 1)[-1] for p in state.bank.problems})
    # A file the studio cannot open (its name is not a set file's: `x.yml`) is named, not linked.
    left_out = [(n, FILE_NAME.fullmatch(n) is not None) for n in names]
    return await page(state, request, template, status_code, who=who, left_out=left_out, **context)
