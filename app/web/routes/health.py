"""/healthz: is the server up, with its bank, database and sandbox? (for load balancers and people)"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.web.errors import NotReady
from app.web.state import WebState

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Is the server up, with its bank and sandbox?")
@router.head("/healthz", include_in_schema=False)  # a load balancer may ask with HEAD
async def healthz(request: Request) -> Any:
    state: WebState | None = getattr(request.app.state, "web", None)
    if state is None:
        raise NotReady()
    bank = state.bank
    load = state.run_queue.load()
    # A pool whose zygote died restarts it, and remote workers come and go; until something can
    # run code again, the server is up but cannot do its whole job.
    runs = state.run_queue.pool
    sandbox_alive = runs.alive
    # A round trip to the database: never on the event loop (a PostgreSQL that hangs would hang
    # every page), and not behind the page threads' queue, which a busy class keeps full.
    database = await asyncio.to_thread(state.store.ping)
    proofs = state.proof_summary()
    body = {
        "ok": sandbox_alive and database,
        "questions": len(bank.questions),
        "sets": len(bank.sets),
        "bank_problems": len(bank.problems),
        "problems": [str(p) for p in sorted(bank.problems)],
        "proofs": proofs,
        "database": database,
        "sandbox": {
            "alive": sandbox_alive,
            "workers": load.workers,
            "queue": load.queue,
            "in_flight": load.in_flight,
            "device_kind": state.run_queue.environment.get("device_kind"),
            "torch_version": state.run_queue.environment.get("torch_version"),
            "devices": runs.devices(),
            **runs.status(),
        },
    }
    # 503 when it cannot do its job, so a load balancer or a supervisor can tell.
    return body if body["ok"] else JSONResponse(body, status_code=503)
