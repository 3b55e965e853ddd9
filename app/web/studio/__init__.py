"""The instructor's studio under /studio: bank status (`status`), authoring in the browser
(`editor`), item statistics (`stats`), and signing in (`auth`). Every route but signing in
requires an instructor (`auth.Instructor`)."""

from fastapi import APIRouter

from app.web.studio import auth, editor, stats, status

router = APIRouter(include_in_schema=False)
for module in (auth, status, editor, stats):
    router.include_router(module.router)
