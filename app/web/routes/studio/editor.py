"""Authoring in the browser: open a set's YAML (or start a new question), see its problems at
line:column as you type (the same loader and pydantic models as `ampquiz lint`), run a question's
code with the explanation, take what it printed as the answer, preview the question exactly as a
learner will see it before and after answering, and save the file back into the bank: a file that
does not lint is refused, a key its run contradicts is warned about. Comments and order are kept
(the text is the author's; edits the studio makes go through a YAML round trip). The running
server picks the saved file up like any edit.

A save is compare-and-swap (`app.bank.workspace`): the page carries the version of the file it
opened and Save sends it back with the text it opened; a file saved since (another author, tab
or process) answers 409 with the other save's changes against what this author opened, the text
now and its version, and nothing is written. The author merges and saves again on that version."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Form, Request
from fastapi.responses import JSONResponse, Response

from app.bank import edit, lint
from app.bank.load import LoadedQuestion
from app.bank.problem import Problem
from app.bank.workspace import Conflict, WorkspaceError
from app.bank.yaml_tree import parse_yaml
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
(`app.bank.workspace`, `WebState.workspace`); its refusals are said by `app.web.errors`, but a
`Conflict`, which this answers itself (409, with what changed)."""
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


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
    """The set's YAML in the editor, with the version it was opened at (what Save sends back);
    with `new`, a question of that id added at its end (and picked); with `line`, the cursor on
    that line (the bank status's `file:line` links)."""
    opened = await asyncio.to_thread(state.workspace.open, name)
    text = opened.text
    if new and not _ID.fullmatch(new):
        raise AppError("A question's id is lowercase words joined by '-'.")
    if new:
        try:
            text = edit.add_question(text, new)
        except edit.NotASet:
            new = None  # the file as it is: the check under the editor says what to fix
    return await studio_page(state, request, "studio/edit.html", who, name=name, text=text, focus=new, line=line,
                             version=opened.version, opened=opened.text if text != opened.text else None)  # fmt: skip


@router.post("/new-set")
async def new_set(
    state: State,
    who: Instructor,
    name: Annotated[str, Form()],
    title: Annotated[str, Form(max_length=80)],
) -> Response:
    # a draft, out of the bank until its author writes it
    await asyncio.to_thread(state.workspace.create, name, title)
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
    """The question ids of a file that does not validate yet, when its YAML reads at all (as the
    loader reads it: nesting, aliases and values it cannot build are problems, not exceptions)."""
    parsed, _ = parse_yaml(text, "the file")
    data = parsed.data if parsed is not None else None
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
    version: Annotated[str, Body(max_length=64)],
    base: Annotated[str | None, Body()] = None,
) -> Any:
    """Saves `text` as `name` over the version `version` the author opened ("" for a new file);
    `base`, the text they opened, is what a conflict's diff is made against."""
    checked = state.workspace.check(name, text, state.bank)
    if checked.refusal is not None:  # `app.bank.workspace`: drafts, and files learners are served
        return JSONResponse({"ok": False, "error": checked.refusal, "status": 422, "problems": _located(checked.problems)},
                            status_code=422)  # fmt: skip
    # Said before the key's runs (seconds), and checked again as the file is written.
    early = await asyncio.to_thread(state.workspace.conflict, name, version)
    if early is not None:
        return _conflict(early, base, text)
    warnings = []
    if not checked.draft:
        assert checked.loaded is not None
        for q in checked.loaded.questions:
            if not q.question.code or not_checked_here(state.proofs, q):
                continue  # a run here proves nothing of its key
            run = await state.run_queue.run(q.question.code, owners=state.owners(request))
            verdict = studio_check(state.proofs, q, run)
            if verdict.result == "fail":
                warnings.append(
                    {"question_id": q.id, "reason": verdict.reason, "diff": verdict.diff}
                )
    try:
        saved = await asyncio.to_thread(state.workspace.save, checked, version)
    except Conflict as conflict:
        return _conflict(conflict, base, text)
    await asyncio.to_thread(state.live_bank.reload)  # served at once, not at the next check
    if checked.draft:
        return {"ok": True, "saved": name, "version": saved, "draft": True,
                "problems": _located(checked.problems), "warnings": []}  # fmt: skip
    return {"ok": True, "saved": name, "version": saved, "warnings": warnings}


def _conflict(conflict: Conflict, base: str | None, text: str) -> JSONResponse:
    """The 409 of a save over a file saved since: the other save's changes against what this
    author opened (`base`; their own text, where the client sent none), the text now and its
    version, which a save after merging names."""
    return JSONResponse({"ok": False, "status": 409, "error": str(conflict), "diff": conflict.diff(base if base is not None else text),
                         "current": conflict.current or "", "version": conflict.version}, status_code=409)  # fmt: skip
