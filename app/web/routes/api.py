"""The JSON API under /api (documented at /docs).

Questions come without their answer key; an attempt returns the outcome, feedback, explanation
and the run. Errors share one shape (see app.web.errors), declared here for the OpenAPI schema.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, ValidationError, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError, to_json

from app.bank.load import LoadedQuestion, LoadedSet
from app.bank.public import public_question
from app.grading import LONGEST_PREDICTION, AnswerError, as_typed
from app.progress import Standing, as_dicts
from app.use_cases.answer import SUBMIT_ID_MOST, SUBMIT_ID_PATTERN, submit_id_problem
from app.web.deps import Learner, State, web_state
from app.web.errors import AppError, NotFound
from app.web.rendering.render import in_thread
from app.web.state import WebState


class ErrorOut(BaseModel):
    ok: Literal[False] = False
    error: str = Field(description="What went wrong, in a sentence for a person.")
    status: int = Field(description="The HTTP status, repeated.")


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut} for code in codes}


router = APIRouter(prefix="/api", tags=["api"], responses=_errors(404, 422, 500))


class Counts(BaseModel):
    total: int
    answered: int
    new: int
    right: int = Field(description="Questions whose last attempt was right.")
    wrong: int = Field(
        description="Questions whose last attempt was wrong (not yet due for review)."
    )
    due: int = Field(description="Missed questions due for review now.")


class ChoiceOut(BaseModel):
    index: int
    text: str = Field(description="Markdown.")


class ProofOut(BaseModel):
    state: Literal["proved", "conceptual", "elsewhere", "pending", "held_back"] = Field(
        description="proved, conceptual or elsewhere: graded; pending (its key is being checked by "
        "running it) or held_back (its run contradicts its key): not graded (409)."
    )
    badges: list[dict[str, str]] = Field(description="What proved the key, per device, in words.")


class QuestionOut(BaseModel):
    id: str
    set_id: str
    title: str
    kind: Literal["multiple_choice", "predict_output"]
    topic: str
    difficulty: int
    tags: list[str]
    prompt: str = Field(description="Markdown.")
    code: str | None
    requires: Literal["cpu", "cuda", "any"]
    asks_about: Literal["cpu", "cuda"] = Field(description="The device whose output is the answer.")
    choices: list[ChoiceOut] | None = Field(
        None,
        description="In your own order (stable for you), each with its position there "
        "(`index`); answer with those.",
    )
    multiple: bool | None = Field(None, description="More than one choice is right: pick them all.")
    status: Literal["new", "right", "wrong", "due"] | None = None
    proof: ProofOut | None = None


class SetOut(BaseModel):
    id: str
    title: str
    description: str
    topics: list[str]
    progress: Counts


class SetDetailOut(SetOut):
    questions: list[QuestionOut]


_SUBMIT_ID_SCHEMA = WithJsonSchema(
    {"type": "string", "maxLength": SUBMIT_ID_MOST, "pattern": SUBMIT_ID_PATTERN}
)
"""What `submit_id_problem` takes, said in the schema as the field's constraints would say it."""


class AnswerIn(BaseModel):
    choices: list[int] | None = Field(
        None,
        description="Multiple choice: the picked choices' `index` values: their positions in "
        "your own order, as the question lists them (0 is the first).",
    )
    output: str | None = Field(
        None, max_length=LONGEST_PREDICTION, description="Predict output: what you think it prints."
    )
    submit_id: Annotated[str, _SUBMIT_ID_SCHEMA] | None = Field(
        None,
        description="Optional: an id of your own for this submit; sending "
        "the same one again returns the first attempt instead of recording another.",
    )

    @field_validator("output", mode="before")
    @classmethod
    def _as_typed(cls, output: object) -> object:
        """Counted as `grade` counts it (CR LF is one line break), so the API and the pages take
        the same predictions."""
        return as_typed(output) if isinstance(output, str) else output

    @field_validator("submit_id")
    @classmethod
    def _submit_id(cls, submit_id: str | None) -> str | None:
        """The form's rule and words (`app.use_cases.answer.submit_id_problem`)."""
        problem = submit_id_problem(submit_id)
        if problem is not None:
            raise PydanticCustomError("submit_id", problem)
        return submit_id


class AttemptOut(BaseModel):
    ok: Literal[True] = True
    attempt_id: int | None = Field(
        description="The stored attempt; null for a practice answer (see `recorded`)."
    )
    recorded: bool = Field(
        True,
        description="False for practice: your last answer to this question was wrong and showed its key, and it "
        "has not come back for review yet. Graded, not stored; the question stays to revisit.",
    )
    counts_again_at: datetime | None = Field(
        None,
        description="For a practice answer: when an answer to this question counts again (it is due for review).",
    )
    question_id: str
    correct: bool
    outcome: dict[str, Any] = Field(
        description="Your answer, the correct one, each choice's feedback, the author's explanation."
    )
    run: dict[str, Any] | None = Field(
        description="The question's code run in the sandbox with explanations (a RunResult), or null."
    )
    run_message: str | None = Field(None, description="Why there is no run, when there is none.")
    verification: list[dict[str, str]]
    status: str = Field(description="The question's status for you after this attempt.")


class RunIn(BaseModel):
    code: str = Field(description="Python source; runs in a fresh isolated process with torch.")
    explain: bool = Field(
        False, description="Trace ops, autocast casts, GradScaler events and hazards."
    )
    device: Literal["cpu", "cuda"] | None = Field(
        None,
        description="Where to run it: `cpu`, `cuda`, or null for wherever (see /healthz's "
        "`sandbox.devices`). A device nothing online has answers at once with status `unavailable`.",
    )


class RunOut(BaseModel):
    ok: Literal[True] = True
    run: dict[str, Any] = Field(
        description="A RunResult: status, stdout, stderr, exception, warnings, duration_ms, environment, "
        "message, explanation."
    )


class ProgressOut(BaseModel):
    totals: dict[str, int]
    topics: list[dict[str, Any]]
    sets: list[dict[str, Any]]
    history: list[dict[str, Any]]
    review: list[dict[str, Any]] = Field(description="Missed questions, soonest due first.")


def _set_out(standing: Standing, loaded_set: LoadedSet) -> dict[str, Any]:
    m = loaded_set.model
    return {
        "id": loaded_set.id,
        "title": m.title,
        "description": m.description,
        "topics": sorted({q.question.topic for q in loaded_set.questions}),
        "progress": standing.set_summary(loaded_set),
    }


def _question_out(
    state: WebState, learner: str, loaded: LoadedQuestion, status: str
) -> dict[str, Any]:
    proof = state.proof(loaded)
    return public_question(
        loaded,
        status,
        order=state.answers.order(learner, loaded),
        proof={"state": proof.state, "badges": proof.badges},
    )


@router.get("/sets", response_model=list[SetOut], summary="List question sets with your progress")
async def list_sets(state: State, learner: Learner) -> Any:
    standing = await in_thread(state, lambda: state.standing(learner))
    return [_set_out(standing, s) for s in state.bank.sets]


@router.get(
    "/sets/{set_id}", response_model=SetDetailOut, summary="One set and its questions (no answers)"
)
async def get_set(set_id: str, state: State, learner: Learner) -> Any:
    loaded_set = state.bank.set(set_id)
    if loaded_set is None:
        raise NotFound(f"There is no question set {set_id!r}.")
    standing = await in_thread(state, lambda: state.standing(learner))
    out = _set_out(standing, loaded_set)
    out["questions"] = [
        _question_out(state, learner, q, standing.status(q.id)) for q in loaded_set.questions
    ]
    return out


@router.get("/questions", response_model=list[QuestionOut], summary="List questions (no answers)")
async def list_questions(
    state: State,
    learner: Learner,
    set_id: Annotated[str | None, Query(alias="set")] = None,
    topic: str | None = None,
) -> Any:
    standing = await in_thread(state, lambda: state.standing(learner))
    return [
        _question_out(state, learner, q, standing.status(q.id))
        for q in state.bank.questions
        if (set_id is None or q.set_id == set_id) and (topic is None or q.question.topic == topic)
    ]


@router.get(
    "/questions/{question_id}", response_model=QuestionOut, summary="One question (no answer)"
)
async def get_question(question_id: str, state: State, learner: Learner) -> Any:
    loaded = state.question(question_id)
    state.question_runs.prefetch(loaded)
    return _question_out(
        state, learner, loaded, await in_thread(state, lambda: state.status(learner, loaded))
    )


@router.post(
    "/questions/{question_id}/attempts",
    response_model=AttemptOut,
    summary="Answer a question",
    responses=_errors(400, 409, 429),
)
async def submit_attempt(
    question_id: str,
    answer: AnswerIn,
    state: State,
    learner: Learner,
    request: Request,
    run: Annotated[bool, Query(description="Include the run of the question's code.")] = True,
) -> Any:
    """Grades and stores an answer. Past `AMPQUIZ_ANSWERS_PER_MINUTE` for this learner, or
    `AMPQUIZ_ANSWERS_PER_MINUTE_PER_ADDRESS` for this client's address: 429 with Retry-After,
    and nothing is stored."""
    loaded = state.question(question_id)
    try:  # TooManyAnswers (429) past the answers per minute
        kept = await state.answer(
            request, learner, loaded, answer.choices, answer.output, answer.submit_id
        )
    except AnswerError as exc:
        raise AppError(str(exc)) from None
    result, message = await state.question_run(loaded) if run else (None, None)
    return {
        "attempt_id": kept.saved.id if kept.saved is not None else None,
        "recorded": kept.saved is not None,
        "counts_again_at": kept.counts_again_at,
        "question_id": loaded.id,
        "correct": kept.graded.correct,
        "outcome": kept.graded.to_dict(),
        "run": result,
        "run_message": message,
        "verification": state.verification_labels(loaded),
        "status": await in_thread(state, lambda: state.status(learner, loaded)),
    }


async def run_code(body: RunIn, state: State, request: Request) -> Any:
    """Runs `code` in a fresh isolated process. When every worker is busy and the queue is full,
    answers 429 with a Retry-After header."""
    too_long = state.code_too_long(body.code)
    if too_long is not None:
        raise too_long
    result = await state.run_queue.run(
        body.code, explain=body.explain, device=body.device, owners=state.owners(request)
    )
    # Serialised straight from the dataclass as FastAPI would (NaN and infinities become null),
    # without validating our own output against RunOut.
    return Response(
        to_json({"ok": True, "run": result}, inf_nan_mode="null"), media_type="application/json"
    )


class RunRoute(APIRoute):
    """POST /api/run with a handler made for it. Under load every run's request takes CPU from the
    sandbox's runs (on 2 cores, 1 ms per request adds about 10 ms to each of 20 queued runs), so it
    skips FastAPI's general request machinery: no dependency solving, only RunIn's validation,
    which fails the way FastAPI's does (422, one error shape). It stays an APIRoute: /docs and
    the OpenAPI schema describe it from `run_code`'s signature as for any other route."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        async def handle(request: Request) -> Response:
            media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type != "application/json" and not media_type.endswith("+json"):
                raise RequestValidationError(
                    [
                        {
                            "type": "json_type",
                            "loc": ("body",),
                            "msg": "send JSON (Content-Type: application/json)",
                        }
                    ]
                )
            try:
                body = RunIn.model_validate_json(await request.body())
            except ValidationError as exc:
                raise RequestValidationError(exc.errors(include_url=False)) from None
            return await run_code(body, await web_state(request), request)

        return handle


router.add_api_route(
    "/run",
    run_code,
    methods=["POST"],
    response_model=RunOut,
    summary="Run code in the sandbox",
    responses=_errors(413, 429),
    route_class_override=RunRoute,
)


@router.get("/progress", response_model=ProgressOut, summary="Your progress and review queue")
async def progress(state: State, learner: Learner) -> Any:
    standing = await in_thread(state, lambda: state.standing(learner))
    return {
        "totals": standing.totals(),
        "topics": as_dicts(standing.topics()),
        "sets": [_set_out(standing, s) for s in state.bank.sets],
        "history": as_dicts(standing.history()),
        "review": as_dicts(standing.queue()),
    }
