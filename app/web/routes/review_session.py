"""The review session: "Review now" walks through the questions due for review, one after
another, rates each answer for the scheduler (right or wrong, and how long it took), shows what is
left, and ends with a summary. Stateless: the session is the moment it started (`since`), carried
in the URL; what was reviewed is read back from the attempts made since then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from app import review
from app.bank.public import title_of
from app.progress import QueueRow, Standing
from app.web.deps import Learner, State
from app.web.rendering.render import in_thread, render_page
from app.web.routes.lean import moment_or_none
from app.web.state import WebState

router = APIRouter(include_in_schema=False)

Since = Annotated[str | None, Query()]
"""When the session started, in whole seconds since the epoch (UTC): 1 to 12 digits. Absent or
not so (a bookmark, a link cut short), the learner is sent on rather than shown a 422
(`moment_or_none`)."""


SESSION_REACH = timedelta(days=1)
"""How far back a session's summary reads: a session is minutes long, and reading a learner's
every attempt (`since=0`) on a shared page thread held up other learners' pages."""


def session_start(state: WebState) -> str:
    """A session begun now, as its URL carries it (`Since`): the overview's "Review now" and
    /review/start both begin one."""
    return str(int(state.clock().timestamp()))


def parse_since(since: str | None, now: datetime) -> datetime | None:
    """When the session started, at most `SESSION_REACH` ago; None for no moment at all (or one
    past the calendar's end: twelve digits reach the year 33658)."""
    if not since or not since.isdigit():
        return None
    try:
        started = datetime.fromtimestamp(int(since), UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return max(started, now - SESSION_REACH)


def due_now(state: WebState, learner: str, standing: Standing | None = None) -> list[QueueRow]:
    """Questions due for review now that can be graded, soonest due first (blocks on the database
    unless given the learner's standing)."""
    rows = [r for r in (standing or state.standing(learner, recent=0)).queue() if r.is_due]
    return [
        r for r in rows if (q := state.bank.question(r.question_id)) and state.proof(q).gradeable
    ]


@router.get("/review")
async def review_overview(request: Request, state: State, learner: Learner) -> Response:
    def build() -> Response:
        standing = state.standing(learner, recent=0)
        due = due_now(state, learner, standing)
        later = [r for r in standing.queue() if not r.is_due]
        since = session_start(state)
        return render_page(state, request, "review.html", due=due, later=later, since=since)

    return await in_thread(state, build)


@router.get("/review/start")
async def review_begin(state: State) -> Response:
    """A review session begun from another page's "Review now": straight to its first due
    question (the overview at /review had a second "Review now" to press)."""
    return RedirectResponse(f"/review/next?since={session_start(state)}", status_code=303)


@router.get("/review/next")
async def review_next(
    request: Request, state: State, learner: Learner, since: Since = None
) -> Response:
    if moment_or_none(since) is None:  # no session to go on with: one begins now
        return RedirectResponse("/review/start", status_code=303)
    due = await in_thread(state, lambda: due_now(state, learner))
    if not due:
        return RedirectResponse(f"/review/done?since={since}", status_code=303)
    return RedirectResponse(f"/questions/{due[0].question_id}?review={since}", status_code=303)


@router.get("/review/done")
async def review_done(
    request: Request, state: State, learner: Learner, since: Since = None
) -> Response:
    if moment_or_none(since) is None:  # no session to sum up: the overview says what is due
        return RedirectResponse("/review", status_code=303)
    started = parse_since(since, state.clock())

    def build() -> Response:
        standing = state.standing(learner, recent=0)
        reviewed: dict[str, dict[str, Any]] = {}
        attempts = state.store.attempts_since(learner, started) if started is not None else []
        for attempt in attempts:
            if attempt.question_id not in standing.data.cards:
                continue
            loaded = state.bank.question(attempt.question_id)
            card = standing.card(attempt.question_id)
            reviewed[attempt.question_id] = {
                "question_id": attempt.question_id,
                "title": title_of(loaded) if loaded else attempt.question_id,
                "correct": attempt.correct,
                "next": review.humanise_delta(card.due_utc, standing.now) if card else "",
            }
        rows = list(reviewed.values())
        later = [item for item in standing.queue_items() if not item.is_due]
        return render_page(
            state, request, "review_done.html", rows=rows, right=sum(r["correct"] for r in rows),
            still_due=len(due_now(state, learner, standing)), since=since, later=len(later),
            next_due=review.humanise_delta(later[0].due, standing.now) if later else "",
        )  # fmt: skip

    return await in_thread(state, build)


def left_in_session(state: WebState, learner: str) -> int:
    return len(due_now(state, learner))
