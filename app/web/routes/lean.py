"""Routes for the busiest pages without FastAPI's per-request machinery.

A learner's round (question, answer, result, progress) is four requests; FastAPI spent about a
third of a millisecond of each solving dependencies and re-reading the parameters' annotations.
These pages are not in the API's schema, so they are plain Starlette routes: a handler gets the
request, and reads what it needs with the helpers here, which refuse bad input exactly as
FastAPI would (422, through the same error handler and message).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from app.web.deps import web_state
from app.web.state import WebState

Handler = Callable[[Request], Awaitable[Response]]
_DIGITS = re.compile(r"^\d{1,12}$")
_PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]*$")


def page_route(
    router: APIRouter, path: str, *, methods: tuple[str, ...] = ("GET",)
) -> Callable[[Handler], Handler]:
    """Registers `handler(request)` for `path` on `router`, under the handler's name."""

    def register(handler: Handler) -> Handler:
        router.add_route(
            path, handler, methods=list(methods), name=handler.__name__, include_in_schema=False
        )
        return handler

    return register


async def state_and_learner(request: Request) -> tuple[WebState, str]:
    """The app's state (503 until it is ready) and the learner (set by the cookie middleware)."""
    return await web_state(request), request.scope["state"]["learner_id"]


def invalid(where: str, name: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": (where, name), "msg": message}])


def as_int(where: str, name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise invalid(
            where, name, "Input should be a valid integer, unable to parse string as an integer"
        ) from None


def as_float(where: str, name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value.strip())
    except ValueError:
        raise invalid(
            where, name, "Input should be a valid number, unable to parse string as a number"
        ) from None


def digits(where: str, name: str, value: str | None) -> str | None:
    """A value of 1 to 12 digits (a moment in whole seconds), or None when absent."""
    if value is not None and not _DIGITS.match(value):
        raise invalid(where, name, "String should match pattern '^\\d{1,12}$'")
    return value


def moment_or_none(value: str | None) -> str | None:
    """`digits` for a link's query, where a bad value is dropped rather than refused: the value
    when it is 1 to 12 digits, else None."""
    return value if value is not None and _DIGITS.match(value) else None


def whole_number_or_none(value: str | None) -> int | None:
    """`as_int` for a link's query, where a bad value is dropped rather than refused: a whole
    number of at most 19 digits, else None."""
    value = value.strip() if value is not None else None
    return (
        int(value) if value and value.isascii() and value.isdigit() and len(value) <= 19 else None
    )


def printable(where: str, name: str, value: str | None) -> str | None:
    """A value with no control character (PostgreSQL refuses a text with NUL in it)."""
    if value is not None and not _PRINTABLE.match(value):
        raise invalid(where, name, "String should match pattern '^[^\\x00-\\x1f\\x7f]*$'")
    return value


def at_most(where: str, name: str, value: str | None, length: int) -> str | None:
    if value is not None and len(value) > length:
        raise invalid(where, name, f"String should have at most {length} characters")
    return value


async def form_fields(request: Request) -> dict[str, list[str]]:
    """A posted form's fields, each with all its values. An urlencoded body (what the answer form
    sends) is parsed straight from the bytes; anything else through Starlette's form parser."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fields: dict[str, list[str]] = {}
    if media_type == "application/x-www-form-urlencoded":
        pairs = parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    else:
        form = await request.form()
        pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    for key, value in pairs:
        fields.setdefault(key, []).append(value)
    return fields
