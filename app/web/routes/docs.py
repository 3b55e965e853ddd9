"""The API's interactive documentation at /docs: Swagger UI served from a local copy (the server
may have no network), when the `swagger-ui-bundle-v2` package is installed."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.web.rendering.static_version import STATIC_VERSION


def mount_docs(app: FastAPI) -> None:
    try:
        import swagger_ui_bundle  # from the swagger-ui-bundle-v2 package
    except ImportError:
        return  # FastAPI's own /docs (loads Swagger UI from a CDN)
    app.mount(
        "/docs-static", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-static"
    )

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        # FastAPI's own page starts Swagger UI with an inline script, which the CSP forbids.
        return HTMLResponse(DOCS_PAGE)


DOCS_PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>ampquiz API</title>
  <link rel="icon" href="/static/favicon.svg?v={STATIC_VERSION}" type="image/svg+xml">
  <link rel="stylesheet" href="/docs-static/swagger-ui.css">
</head>
<body>
  <main id="swagger-ui"></main>
  <script src="/docs-static/swagger-ui-bundle.js"></script>
  <script src="/static/docs.js?v={STATIC_VERSION}"></script>
</body>
</html>
"""


def has_local_docs() -> bool:
    try:
        import swagger_ui_bundle  # noqa: F401
    except ImportError:
        return False
    return True
