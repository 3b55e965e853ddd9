"""Making an interview in the studio: the form (bank questions to pick, ad-hoc snippets, a time
limit) and creating it, which runs each ad-hoc snippet once for its answer. The interview itself
is `app.web.routes.interview`'s."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from app.bank.public import title_of
from app.interview import model, snippets
from app.verify.key_checks import snippet_key
from app.web.deps import State
from app.web.routes.studio.auth import Instructor
from app.web.routes.studio.view import studio_page
from app.web.state import WebState

router = APIRouter(include_in_schema=False)


def _question_rows(state: WebState) -> list[dict[str, Any]]:
    """The bank's questions as the form lists them, a set at a time (in the bank's order); one
    whose key a run here contradicts cannot be picked (a candidate could not be graded on it)."""
    return [{"title": s.model.title, "questions": [
                {"id": q.id, "title": title_of(q), "kind": q.question.kind, "held_back": state.proof(q).state == "held_back"}
                for q in s.questions]}
            for s in state.bank.sets]  # fmt: skip


@router.get("/studio/interviews/new")
async def new_form(request: Request, state: State, who: Instructor) -> Response:
    return await studio_page(state, request, "interview/new.html", who, rows=_question_rows(state), error=None,
                             picked=[], adhoc="", minutes="")  # fmt: skip


@router.post("/studio/interviews")
async def create(
    request: Request, state: State, who: Instructor,
    questions: Annotated[list[str], Form()] = [],  # noqa: B006
    minutes: Annotated[str, Form(max_length=40)] = "",  # checked below, said on the form itself
    adhoc: Annotated[str, Form(max_length=60_000)] = "",
) -> Response:  # fmt: skip
    unknown = [q for q in questions if state.bank.question(q) is None]
    try:
        if unknown:
            raise ValueError(f"there is no question {unknown[0]!r}")
        held = [q for q in questions if state.proof(state.bank.question(q)).state == "held_back"]  # type: ignore[arg-type]
        if held:
            raise ValueError(
                f"the key of {held[0]!r} is under review (a run here contradicts it): no candidate could be graded on it"
            )
        if minutes.strip() and not (
            minutes.strip().isascii() and minutes.strip().isdigit() and len(minutes.strip()) <= 3
        ):
            raise ValueError(
                "the time limit is a whole number of minutes, 1 to 600 (or empty, for none)"
            )
        limit = int(minutes) if minutes.strip() else None
        entries_: list[str | dict[str, Any]] = list(questions)
        for n, code in enumerate(snippets.split_snippets(adhoc), start=1):
            printed = await snippet_key(
                n, code, lambda snippet: state.run_queue.run(snippet, owners=state.owners(request))
            )
            entries_.append(
                snippets.snippet_question(n, code, printed, state.run_queue.environment, who)
            )
        made = model.create(state.store, entries_, by=who, minutes=limit)
    except ValueError as exc:
        # The form again as it was sent: nothing typed or picked is lost.
        return await studio_page(state, request, "interview/new.html", who, 400, rows=_question_rows(state),
                                 error=str(exc), picked=questions, adhoc=adhoc, minutes=minutes)  # fmt: skip
    return RedirectResponse(f"/interviewer/{made.host_token}", status_code=303)
