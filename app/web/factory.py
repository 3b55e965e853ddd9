"""`create_app(settings)` builds the FastAPI app: pages, JSON API, static files, middleware.

The app's lifespan opens where runs go (`app.runs`: by default one sandbox pool in this process,
which hides the database folder from snippets), unless a test passes its own. Everything the app holds lives on `app.state.web` (a `WebState`), never at
module level, so tests build variants side by side.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import FastAPI

from app.bank.workspace import SET_FILE_BYTES
from app.runs import Runs, open_runs
from app.runs.local import LocalRuns
from app.runs.queue import RunQueue
from app.settings import Settings
from app.store import Store, utcnow
from app.verify.live_bank import LiveBank
from app.verify.proofs import ProofBook
from app.verify.prover import Prover
from app.verify.question_runs import QuestionRuns
from app.web.answer_rate import AnswerRate
from app.web.errors import install_error_handlers
from app.web.middleware import BodyLimit, LearnerCookie, SameOrigin, SecurityHeaders
from app.web.page_threads import PageThreads
from app.web.rendering.render import make_templates
from app.web.routes import (
    api,
    health,
    interview,
    interviewer,
    pages,
    playground,
    review_session,
    studio,
)
from app.web.routes.docs import has_local_docs, mount_docs
from app.web.routes.static_files import VersionedStaticFiles
from app.web.state import WebState

log = logging.getLogger("ampquiz.web")

API_DESCRIPTION = """\
Practise PyTorch Automatic Mixed Precision: questions whose answers were proved by running them.

Learners are anonymous: the first response sets a signed `ampquiz_learner` cookie; send it back
to keep your attempts and progress. Questions never include their answer key; an attempt's
response carries the outcome, the feedback, the explanation and the run of the question's code.
Every error has the shape `{"ok": false, "error": "message", "status": 404}`.
"""


def create_app(
    settings: Settings | None = None,
    *,
    sandbox: Any = None,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """Builds the app. `sandbox`: an already started `Sandbox` or `Runs` to share (tests; else
    the backend `settings.workers_url` names is opened); `clock`: for reviews."""
    settings = settings or Settings.from_env()
    store = Store(settings.database_url)
    live_bank = LiveBank(settings.bank)
    templates = make_templates()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        from sandbox import Limits

        if sandbox is None:
            runs: Runs = await open_runs(settings)
        else:  # a test's pool, already started: shared, never closed here
            runs = sandbox if hasattr(sandbox, "refusal") else LocalRuns(sandbox)
        limits = Limits(wall_s=settings.run_wall_s, cpu_s=max(1, math.ceil(settings.run_wall_s)))
        run_queue = RunQueue(
            runs, workers=runs.workers, queue=settings.run_queue, limits=limits,
            per_learner=settings.run_per_learner, per_address=settings.run_per_address,
        )  # fmt: skip
        proofs = ProofBook(runs.environment)
        # Runs kept for every process and restart; each checked against its key as it is handed out.
        question_runs = QuestionRuns(run_queue, shelf=store, witness=proofs.witness)
        prover = Prover(proofs, run_queue, lambda: (live_bank.current(), live_bank.records))
        app.state.web = WebState(
            settings=settings, store=store, run_queue=run_queue, question_runs=question_runs,
            live_bank=live_bank, proofs=proofs, templates=templates, clock=clock or utcnow,
            page_threads=PageThreads(store.useful_threads),
            answer_rate=AnswerRate(settings.answers_per_minute, settings.answers_per_minute_per_address),
        )  # fmt: skip
        live_bank.prepare.append(
            proofs.summary
        )  # the footer's counts, ready before a reload is served
        prover.start()  # keys nothing proved yet are checked in the background, learners first
        live_bank.start()  # file changes are picked up by a thread of its own, never by a request
        try:
            yield {}
        finally:
            try:
                live_bank.stop()
                await prover.close()
                question_runs.close()
                if sandbox is None:
                    await runs.close()
            finally:  # whatever failed above, pages under way finish (an answer is written whole)
                app.state.web.page_threads.shutdown(wait=True)
                store.close()

    docs_available = has_local_docs()
    app = FastAPI(
        title="ampquiz",
        description=API_DESCRIPTION,
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None if docs_available else "/docs",
        redoc_url=None,
    )
    app.state.templates = templates
    app.state.settings = settings
    # innermost of ours; a studio call carries a whole set file, JSON-escaped (up to 6 bytes a character)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_request_bytes(),
        studio_max_bytes=SET_FILE_BYTES * 6 + 4096,
    )
    app.add_middleware(LearnerCookie, secret_key=settings.resolved_secret_key())
    app.add_middleware(SameOrigin)
    app.add_middleware(SecurityHeaders)
    install_error_handlers(app)
    # Routes are matched in order, one at a time: the learners' pages (most requests) come first.
    app.include_router(pages.router)
    if docs_available:
        mount_docs(app)
    app.mount("/static", VersionedStaticFiles(), name="static")

    app.include_router(api.router)
    app.include_router(health.router)
    app.include_router(playground.router)
    app.include_router(review_session.router)
    app.include_router(studio.router)
    app.include_router(interview.router)
    app.include_router(interviewer.router)
    return app
