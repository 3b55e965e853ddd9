"""The "What if…" cards after an answer (template `_what_if.html`), read from the bank's mutant
records (`app.mutate.cards`): one `RecordedMutants` per app, kept on `app.state`, so tests that
build several apps side by side never share one."""

from __future__ import annotations

from fastapi import Request

from app.bank.load import LoadedQuestion
from app.mutate.cards import RecordedMutants, WhatIf
from app.web.state import WebState


def what_if_for(request: Request, state: WebState, loaded: LoadedQuestion) -> WhatIf | None:
    shelf = getattr(request.app.state, "what_if", None)
    if not isinstance(shelf, RecordedMutants) or shelf.root != state.live_bank.root:
        shelf = request.app.state.what_if = RecordedMutants(state.live_bank.root)
    return shelf.what_if(loaded, state.run_queue.environment)
