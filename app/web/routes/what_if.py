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
    # Making the cards applies every mutation rule to the code: kept on the question until the
    # records are read again (a result page asks on every answer).
    records = shelf.records()
    cached = loaded.__dict__.get("_what_if")
    if cached is None or cached[0] is not records or cached[1] is not shelf:
        cached = loaded.__dict__["_what_if"] = (
            records,
            shelf,
            shelf.what_if(loaded, state.run_queue.environment),
        )
    return cached[2]
