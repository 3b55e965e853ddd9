"""The instructor's studio under /studio: bank status (`status`), authoring in the browser
(`editor`), distractors proved by running in the editor (`distractors`), item statistics
(`stats`), making interviews (`interviews`), and signing in (`auth`). Every route but signing in requires an instructor
(`auth.Instructor`)."""

from fastapi import APIRouter

from app.web.routes.studio import auth, distractors, editor, interviews, stats, status

router = APIRouter(include_in_schema=False)
for module in (auth, status, editor, distractors, stats, interviews):
    router.include_router(module.router)
