"""Authoring in the browser: open a set's YAML (or start a new question), see its problems at
line:column as you type (the same loader and pydantic models as `ampquiz lint`), run a question's
code with the explanation, take what it printed as the answer, preview the question exactly as a
learner will see it before and after answering, and save the file back into the bank: a file that
does not lint is refused, a key its run contradicts is warned about. Comments and order are kept
(the text is the author's; edits the studio makes go through a YAML round trip). The running
server picks the saved file up like any edit."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Body, Form, Request
from fastapi.responses import JSONResponse, Response

from app.bank import edit, lint
from app.bank.load import LoadedQuestion
from app.bank.problem import Problem
from app.bank.workspace import WorkspaceError
from app.grading import grade
from app.verify.key_checks import not_checked_here, studio_check
from app.web.deps import State
from app.web.errors import RUN_REFUSED, AppError, NotFound, run_refusal
from app.web.rendering.render import page
from app.web.routes.pages import question_context
from app.web.routes.studio.auth import Instructor
from app.web.routes.studio.view import studio_page
from app.web.state import WebState

router = APIRouter(prefix="/studio", include_in_schema=False)
"""The file names, what the bank would take and saving are the bank folder's
(`app.bank.workspace`, `WebState.workspace`); its refusals are said by `app.web.errors`."""


def _located(problems: list[Problem]) -> list[dict[str, Any]]:
    """Problems as the editor shows them, at line:column."""
    return [{"line": p.line, "col": p.col, "message": p.message} for p in problems]


def question_from_text(state: WebState, name: str, text: str, question_id: str) -> LoadedQuestion:
    loaded, problems = state.workspace.parse(name, text)
    if loaded is None:
        raise AppError(
            f"Fix the file's problems first ({problems[0].line}:{problems[0].col}: {problems[0].message})."
        )
    found = next((q for q in loaded.questions if q.id == question_id), None)
    if found is None:
        raise NotFound(f"The file has no question {question_id!r}.")
    return found


@router.get("/edit/{name}")
async def editor_page(
    name: str,
    request: Request,
    state: State,
    who: Instructor,
    new: str | None = None,
    line: int | None = None,
) -> Response:
    """The set's YAML in the editor; with `new`, a question of that id added at its end (and picked);
    with `line`, the cursor on that line (the bank status's `file:line` links)."""
    text = state.workspace.read(name)
    if new:
        try:
            text = edit.add_question(text, new)
        except edit.NotASet:
            new = None  # the file as it is: the check under the editor says what to fix
    return await studio_page(
        state, request, "studio/edit.html", who, name=name, text=text, focus=new, line=line
    )


@router.post("/new-set")
async def new_set(
    state: State,
    who: Instructor,
    name: Annotated[str, Form()],
    title: Annotated[str, Form(max_length=80)],
) -> Response:
    state.workspace.create(name, title)  # a draft, out of the bank until its author writes it
    return Response(status_code=303, headers={"location": f"/studio/edit/{name}"})


@router.post("/api/check")
async def check_text(
    state: State, who: Instructor, name: Annotated[str, Body()], text: Annotated[str, Body()]
) -> Any:
    loaded, problems = state.workspace.parse(name, text, state.bank)
    # What `ampquiz lint` warns about too (a key no one could type, a choice whose words say
    # another thing than its outcome), after the problems: shown, never a reason to refuse a save.
    warned = _located(lint.warnings(loaded.questions)) if loaded else []
    return {
        "problems": _located(problems) + warned,
        "questions": [q.id for q in loaded.questions] if loaded else _ids(text),
    }


def _ids(text: str) -> list[str]:
    """The question ids of a file that does not validate yet, when its YAML reads at all."""
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
        return []
    items = data.get("questions") if isinstance(data, dict) else None
    return (
        [q["id"] for q in items if isinstance(q, dict) and isinstance(q.get("id"), str)]
        if isinstance(items, list)
        else []
    )


@router.post("/api/run")
async def run_question(request: Request, state: State, who: Instructor, name: Annotated[str, Body()],
                       text: Annotated[str, Body()], question_id: Annotated[str, Body()]) -> Any:  # fmt: skip
    # The code runs while the file still has problems (a source or an explanation to write): its
    # output is how the author writes the answer. The key is checked once the file loads.
    q: LoadedQuestion | None = None
    code: str | None
    requires: str
    try:
        q = question_from_text(state, name, text, question_id)
        code, requires = q.question.code, q.question.requires
    except (AppError, WorkspaceError) as problems:
        try:
            code, requires = edit.code_of(text, question_id)
        except (KeyError, edit.NotASet):
            raise problems from None
    if not code:
        raise AppError("That question has no code to run.")
    device = "cuda" if requires == "cuda" else None
    try:
        run = await state.run_queue.run(
            code, explain=True, device=device, owners=state.owners(request)
        )
    except RUN_REFUSED as exc:
        raise run_refusal(exc) from None
    panel = bytes((await page(state, request, "_run_panel.html", run=run.to_dict())).body).decode()
    if q is None:
        return {"run": run.to_dict(), "panel": panel, "key": "unchecked",
                "reason": "not checked until the file's problems are fixed (see under the editor)"}  # fmt: skip
    verdict = studio_check(state.proofs, q, run)
    return {"run": run.to_dict(), "panel": panel, "key": verdict.result, "reason": verdict.reason}


@router.post("/api/use-output")
async def use_output(who: Instructor, name: Annotated[str, Body()], text: Annotated[str, Body()],
                     question_id: Annotated[str, Body()], output: Annotated[str, Body()]) -> Any:  # fmt: skip
    try:
        return {"text": edit.set_answer(text, question_id, output)}
    except KeyError:
        raise NotFound(f"The file has no question {question_id!r}.") from None
    except ValueError as exc:
        raise AppError(str(exc)) from None


@router.post("/api/add-question")
async def add_question(
    who: Instructor,
    text: Annotated[str, Body()],
    question_id: Annotated[str, Body(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=80)],
) -> Any:
    return {"text": edit.add_question(text, question_id)}


@router.post("/preview")
async def preview(request: Request, state: State, who: Instructor, name: Annotated[str, Form()], text: Annotated[str, Form()],
                  question_id: Annotated[str, Form()], answered: Annotated[bool, Form()] = False) -> Response:  # fmt: skip
    """The question exactly as a learner sees it, from the unsaved text: before answering, or
    after a right answer (with the run of its code)."""
    q = question_from_text(state, name, text, question_id)
    context = {**question_context(state, "", q), "submit_id": "preview", "preview": True}
    if answered:
        key = getattr(q.question, "answer", None)
        picked = [i for i, c in enumerate(getattr(q.question, "choices", [])) if c.correct]
        graded = (
            grade(q, picked=picked, order=context["order"]) if key is None else grade(q, output=key)
        )
        run, message = await state.question_run(q)
        context.update(outcome=graded, run=run, run_message=message)
        if run is not None:  # the "Right!" above a run that contradicts it would mislead the author
            verdict = studio_check(state.proofs, q, await state.question_runs.run(q))
            context["key_problem"] = verdict.reason if verdict.result == "fail" else ""
    return await page(state, request, "question.html", **context)


@router.post("/api/save")
async def save(
    request: Request,
    state: State,
    who: Instructor,
    name: Annotated[str, Body()],
    text: Annotated[str, Body()],
) -> Any:
    checked = state.workspace.check(name, text, state.bank)
    if checked.refusal is not None:  # `app.bank.workspace`: drafts, and files learners are served
        return JSONResponse({"ok": False, "error": checked.refusal, "status": 422, "problems": _located(checked.problems)},
                            status_code=422)  # fmt: skip
    if checked.draft:
        state.workspace.save(checked)
        await asyncio.to_thread(state.live_bank.reload)
        return {
            "ok": True,
            "saved": name,
            "draft": True,
            "problems": _located(checked.problems),
            "warnings": [],
        }
    assert checked.loaded is not None
    warnings = []
    for q in checked.loaded.questions:
        if not q.question.code or not_checked_here(state.proofs, q):
            continue  # a run here proves nothing of its key
        run = await state.run_queue.run(q.question.code, owners=state.owners(request))
        verdict = studio_check(state.proofs, q, run)
        if verdict.result == "fail":
            warnings.append({"question_id": q.id, "reason": verdict.reason, "diff": verdict.diff})
    state.workspace.save(checked)
    await asyncio.to_thread(state.live_bank.reload)  # served at once, not at the next check
    return {"ok": True, "saved": name, "warnings": warnings}
