"""The API's interactive documentation at /docs: Swagger UI served from a local copy (the server
may have no network), when the `swagger-ui-bundle-v2` package is installed."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles


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
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="ampquiz API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )


def has_local_docs() -> bool:
    try:
        import swagger_ui_bundle  # noqa: F401
    except ImportError:
        return False
    return True
