"""The playground: edit and run any snippet, with the explanation beside it.

Works without JavaScript (Run is a form POST that renders the whole page again); app/static/app.js
asks for only the result panel (`/run/panel`), rendered by the same template.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.bank.public import title_of
from app.web.deps import Learner, State
from app.web.rendering.render import in_thread, page

router = APIRouter(include_in_schema=False)
Device = Annotated[Literal["", "cpu", "cuda"], Form()]
"""The device picker's value: "" runs wherever (the embedded pool, or any worker online)."""

DEFAULT_SNIPPET = """\
import torch

layer = torch.nn.Linear(4, 2)
x = torch.ones(1, 4)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = layer(x)
    loss = y.float().pow(2).mean()
print(y.dtype, loss.dtype)
"""


@router.get("/playground")
async def playground_by_its_name() -> Response:
    """The header calls the page "Playground": its name typed as an address finds it too."""
    return RedirectResponse("/run", status_code=301)


@router.get("/run")
async def playground(
    request: Request,
    state: State,
    learner: Learner,
    q: Annotated[str | None, Query(max_length=80)] = None,
) -> Response:
    code, source, reveals, device = DEFAULT_SNIPPET, None, False, ""
    if q:
        source = state.question(q)
        code = source.question.code or DEFAULT_SNIPPET
        device = "cuda" if source.question.requires == "cuda" else ""  # the question's device
        # Running an unanswered question's own code gives its answer away (what a predict-the-output
        # question prints is its answer; a multiple-choice one's code prints what its right choice
        # says): say so first.
        # The learner's status read in the page threads, off the event loop.
        if source.question.code:
            reveals = await in_thread(state, lambda: state.status(learner, source)) == "new"
    return await page(
        state, request, "playground.html", code=code, source=source, explain=True, run=None,
        reveals=reveals, source_title=title_of(source) if source else "", device=device,
        devices=state.run_queue.pool.devices(),
    )  # fmt: skip


@router.post("/run")
async def playground_run(
    request: Request,
    state: State,
    code: Annotated[str, Form()] = "",
    explain: Annotated[bool, Form()] = False,
    source: Annotated[str | None, Form(max_length=80)] = None,
    device: Device = "",
) -> Response:
    """The no-JavaScript Run: the whole page again, with the result under the editor."""
    run, error = await state.learner_run(request, code, explain, device or None)
    loaded = state.bank.question(source) if source else None
    response = await page(
        state, request, "playground.html", status_code=error.status if error else 200, code=code,
        source=loaded, source_title=title_of(loaded) if loaded else "", explain=explain, run=run,
        run_message=error.message if error else None, device=device, devices=state.run_queue.pool.devices(),
    )  # fmt: skip
    response.headers.update(error.headers if error else {})
    return response


@router.post("/run/panel")
async def playground_panel(
    request: Request,
    state: State,
    code: Annotated[str, Form()] = "",
    explain: Annotated[bool, Form()] = False,
    device: Device = "",
) -> Response:
    """What app.js asks for: only the result panel, rendered by the same template as the page."""
    run, error = await state.learner_run(request, code, explain, device or None)
    response = await page(
        state, request, "_run_panel.html", status_code=error.status if error else 200,
        run=run, run_message=error.message if error else None,
    )  # fmt: skip
    response.headers.update(error.headers if error else {})
    return response
