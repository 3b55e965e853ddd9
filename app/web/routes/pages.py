"""The learner's HTML pages: home, a set, a question (answer and result), progress.

Every page works without JavaScript: answering is a form POST that redirects to the result
(so a reload never answers twice). The playground has its own module, `app.web.routes.playground`.
To add a page: a route here (or a module of its own, included in `app.web.factory`) and a
template in `app/web/templates/`.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app import review as review_module
from app.bank.index import BankIndex, index_of
from app.bank.load import LoadedQuestion, LoadedSet
from app.bank.public import excerpt, multiple_answers, title_of
from app.bank.schema import MultipleChoiceQuestion
from app.grading import AnswerError, GradedAnswer, describe_tolerance, regrade
from app.progress import Standing
from app.use_cases.answer import submit_id_problem
from app.web.answer_rate import TooManyAnswers
from app.web.errors import AppError, NotFound
from app.web.rendering.render import in_thread, render_page
from app.web.routes.lean import (
    as_float,
    as_int,
    digits,
    form_fields,
    invalid,
    moment_or_none,
    page_route,
    state_and_learner,
    whole_number_or_none,
)
from app.web.routes.review_session import left_in_session
from app.web.routes.what_if import what_if_for  # "What if…" cards (app.mutate)
from app.web.state import WebState

router = APIRouter(include_in_schema=False)

SETS_PER_PAGE = 24
"""The home page lists the bank's sets a page at a time: it costs the same at 20 sets or 2,000."""


@page_route(router, "/")
async def home(request: Request) -> Response:
    state, learner = await state_and_learner(request)
    page_number = as_int("query", "page", request.query_params.get("page") or None) or 1
    if not 1 <= page_number <= 10**6:
        raise invalid("query", "page", "Input should be a page number from 1")
    bank = state.bank
    index = index_of(bank)
    pages = max(1, -(-len(index.path) // SETS_PER_PAGE))
    if page_number > pages:
        raise NotFound(f"There is no page {page_number}: the question sets fill {pages}.")
    shown = index.path[(page_number - 1) * SETS_PER_PAGE : page_number * SETS_PER_PAGE]

    def build() -> Response:
        standing = state.standing(learner, recent=0)
        sets = [
            {"set": s, "summary": standing.set_summary(s), "topics": index.set_topics[s.id]}
            for s in shown
        ]
        due = standing.due_count()
        next_set, continuing = _where_next(standing, index)
        # The button leads to the set's first question not yet answered, not to the set's list:
        # one tap fewer on the way in (a newcomer's walk).
        next_question = (
            next((q for q in next_set.questions if standing.status(q.id) == "new"), None)
            if next_set
            else None
        )
        return render_page(
            state, request, "home.html", sets=sets, next_set=next_set, continuing=continuing, next_question=next_question,
            topics=standing.topics(), due=due, bank=bank, page_number=page_number, pages=pages,
            set_count=len(bank.sets), first_shown=(page_number - 1) * SETS_PER_PAGE + 1,
        )  # fmt: skip

    return await in_thread(state, build)


def _where_next(standing: Standing, index: BankIndex) -> tuple[LoadedSet | None, bool]:
    """The set home suggests, and whether the learner is continuing it: the set of the question
    they answered last while it has questions they have not; else the first set of the learning
    path (the starter's first) with any, while one has (None once every question is answered)."""
    last = next(reversed(standing.last), None)
    if (
        last is not None
        and (found := index.place.get(last))
        and standing.set_summary(found[0])["new"]
    ):
        return found[0], True
    for candidate in index.path:
        if standing.set_summary(candidate)["new"]:
            return candidate, False
    return None, False


@page_route(router, "/sets/{set_id}")
async def set_page(request: Request) -> Response:
    state, learner = await state_and_learner(request)
    set_id = request.path_params["set_id"]
    loaded_set = index_of(state.bank).sets.get(set_id)
    if loaded_set is None:
        raise NotFound(f"There is no question set {set_id!r}.")

    def build() -> Response:
        standing = state.standing(learner, recent=0)
        rows = [
            {
                "q": q,
                "title": title_of(q),
                "excerpt": excerpt(q.question.prompt),
                "status": standing.status(q.id),
            }
            for q in loaded_set.questions
        ]
        summary = standing.set_summary(loaded_set)
        return render_page(state, request, "set.html", s=loaded_set, rows=rows, summary=summary)

    return await in_thread(state, build)


def question_context(
    state: WebState, learner: str, loaded: LoadedQuestion, attempt_id: int | None = None
) -> dict[str, Any]:
    """What question.html shows of a question to a learner (the studio's preview uses it too, for
    a question not in the bank yet: then it stands alone, without its set). With `attempt_id`,
    that attempt is read too and returned as `shown` when it is the learner's. Blocks on the
    database: call it from a worker thread."""
    loaded_set, index, prev, next_ = index_of(state.bank).neighbours(loaded)
    q = loaded.question
    status, shown = state.question_state(learner, loaded, attempt_id)
    return {
        "loaded": loaded,
        "q": q,
        "title": title_of(loaded),
        "s": loaded_set,
        "position": index + 1,
        "count": len(loaded_set.questions) if loaded_set else 1,
        "prev": prev,
        "next": next_,
        "status": status,
        "shown": shown,
        "proof": (proof := state.proof(loaded)),
        "verification": proof.badges,
        "multiple": multiple_answers(q) if isinstance(q, MultipleChoiceQuestion) else False,
        "order": state.answers.order(learner, loaded),
        "submit_id": secrets.token_urlsafe(16),
        "shown_at": f"{state.clock().timestamp():.3f}",
        "tolerance_text": describe_tolerance(getattr(q, "tolerance", None)),
        "needs_cuda": q.requires == "cuda" and not state.run_queue.has_cuda,
    }


@page_route(router, "/questions/{question_id}")
async def question_page(request: Request) -> Response:
    state, learner = await state_and_learner(request)
    query = request.query_params
    # A link cut short or mistyped (`?attempt=abc`) still shows the question, without what it
    # could not name: a 422 page said only "Input should be a valid integer".
    attempt = whole_number_or_none(query.get("attempt"))
    review = moment_or_none(query.get("review"))
    loaded = state.question(request.path_params["question_id"])
    if attempt is not None and not 1 <= attempt < 2**31:  # ids are 32-bit on PostgreSQL
        raise NotFound("There is no such attempt.")
    run = run_message = None
    if attempt is not None:
        # The result page shows the question's run: shared by every learner and kept once made,
        # so this awaits nothing after the first answer to the question (made here, before the
        # page's one trip to a worker thread, whose reads then decide whether it is shown).
        run, run_message = await state.question_run(loaded)
    else:
        state.question_runs.prefetch(loaded)

    def build() -> Response:
        context = question_context(state, learner, loaded, attempt)
        if review is not None:
            context.update(review_since=review, review_left=left_in_session(state, learner))
        shown = context["shown"]
        if shown is not None and shown.question_id == loaded.id:
            context.update(attempt=shown)
            _with_result(
                request,
                state,
                loaded,
                context,
                regrade(loaded, shown, context["order"]),
                run,
                run_message,
            )
        return render_page(state, request, "question.html", **context)

    return await in_thread(state, build)


def _with_result(request: Request, state: WebState, loaded: LoadedQuestion, context: dict[str, Any],
                 graded: GradedAnswer | None, run: Any, run_message: str | None) -> None:  # fmt: skip
    """The result of an answer added to a question page's `context`: the verdict, the run and the
    "What if" cards. Blocks (the cards' first reading): call it from a page thread."""
    # Recorded mutants, never run here. Where the record was made under other rules or from
    # other code, their first reading in a process applies every mutation rule to the code
    # (~90 ms): here in the page thread, never on the event loop.
    what_if = what_if_for(request, state, loaded)
    context.update(outcome=graded, run=run, run_message=run_message, what_if=what_if)
    # The run and the cards are the same for every learner: rendered once, then reused.
    if run is not None:
        context["run_html"] = state.fragments.render(state.templates, "_run.html", run, run=run)
    if what_if is not None:
        context["what_if_html"] = state.fragments.render(
            state.templates, "_what_if.html", what_if, what_if=what_if
        )


@page_route(router, "/questions/{question_id}", methods=("POST",))
async def answer_form(request: Request) -> Response:
    state, learner = await state_and_learner(request)
    fields = await form_fields(request)

    def one(name: str) -> str | None:
        values = fields.get(name)
        return values[-1] if values and values[-1] != "" else None  # as FastAPI: empty is absent

    choice = [int(as_int("form", "choice", v) or 0) for v in fields.get("choice", []) if v != ""]
    output = one("output")  # its length is checked by `grade`: a refusal keeps it in the form
    submit_id = one("submit_id")
    if (problem := submit_id_problem(submit_id)) is not None:
        raise invalid("form", "submit_id", problem)
    shown_at = as_float("form", "shown_at", one("shown_at"))
    review = digits("form", "review", one("review"))
    loaded = state.question(request.path_params["question_id"])

    def with_session(context: dict[str, Any]) -> dict[str, Any]:
        if review is not None:  # still in the review session, as the form was
            context.update(review_since=review, review_left=left_in_session(state, learner))
        return context

    try:  # a form sent again (a reload, a double click) goes where its first sending went
        kept = await state.answer(
            request, learner, loaded, choice, output or "", submit_id, shown_at, prefetch_run=True
        )
    except (
        AnswerError,
        TooManyAnswers,
    ) as exc:  # the question again, with why, and the answer as it was sent
        refusal = (
            AppError(str(exc)) if isinstance(exc, AnswerError) else exc
        )  # unreadable: refused before it counts

        def refused() -> Response:
            context = with_session(question_context(state, learner, loaded))
            retry_after = (
                refusal.retry_after_s if isinstance(refusal, TooManyAnswers) else None
            )  # counted down on the page
            page = render_page(state, request, "question.html", status_code=refusal.status, error=refusal.message,
                               retry_after=retry_after, said_output=output or "", said_picked=choice, **context)  # fmt: skip
            page.headers.update(refusal.headers)
            return page

        return await in_thread(state, refused)
    # They saw its key: graded and shown, not recorded (`Answers.practice_until`).
    if kept.saved is None:
        run, run_message = await state.question_run(loaded)
        until = kept.counts_again_at
        assert until is not None

        def practised() -> Response:
            context = with_session(question_context(state, learner, loaded))
            _with_result(request, state, loaded, context, kept.graded, run, run_message)
            context.update(practice_counts_in=review_module.humanise_delta(until, state.clock()))
            return render_page(state, request, "question.html", **context)

        return await in_thread(state, practised)
    query = urlencode({"attempt": kept.saved.id, **({"review": review} if review else {})})
    return RedirectResponse(f"/questions/{quote(loaded.id)}?{query}#result", status_code=303)


HISTORY_SHOWN = 20
"""The progress page's history: the newest attempts (the API gives 100)."""
QUEUE_SHOWN = 20
"""The progress page's review queue: the first of those due now, and of those due later ("Review
now" walks through every due one)."""


@page_route(router, "/progress")
async def progress_page(request: Request) -> Response:
    state, learner = await state_and_learner(request)

    def build() -> Response:
        standing = state.standing(learner, recent=HISTORY_SHOWN)
        items = standing.queue_items()
        due_total = sum(1 for item in items if item.is_due)
        return render_page(
            state, request, "progress.html",
            topics=standing.topics(), history=standing.history(HISTORY_SHOWN), totals=standing.totals(),
            due=standing.queue(QUEUE_SHOWN, due=True), later=standing.queue(QUEUE_SHOWN, due=False),
            due_total=due_total, later_total=len(items) - due_total, history_shown=HISTORY_SHOWN,
        )  # fmt: skip

    return await in_thread(state, build)
