"""/static: the pages' CSS, scripts and icon. Their URLs carry a hash of every static file
(`?v=` + `STATIC_VERSION`, added by the templates), so a browser may keep what it fetched for a
year without asking again: a deploy that changes a file changes every URL. Without a lifetime of
their own, browsers guessed one from the files' age (a tenth of it): soon after a deploy, every
page a learner opened asked again for its five files (0.4 ms of the server's CPU each to say
"not modified", 0.9 ms to send one: more than the page itself). A URL without the current version (an old page, a hand-typed one) is checked each
time instead (`no-cache`), never kept stale.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.web.rendering.static_version import STATIC, STATIC_VERSION

KEEP = "public, max-age=31536000, immutable"
"""A year, the longest HTTP caches honour; `immutable`: not asked again even on a reload."""


class VersionedStaticFiles(StaticFiles):
    """The static folder, each response saying how long a browser may keep it (see the module)."""

    def __init__(self) -> None:
        super().__init__(directory=str(STATIC))

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [""])[0]
        response.headers["Cache-Control"] = KEEP if asked == STATIC_VERSION else "no-cache"
        return response
