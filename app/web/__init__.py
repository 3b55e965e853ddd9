"""The web layer, and the only package that imports FastAPI, Starlette or Jinja2.

`factory.create_app(settings)` builds the app. `api` is the JSON API, `pages` the learner's pages,
`playground` the editor that runs code, `health` /healthz; `deps` declares the dependencies once,
`middleware` the ASGI middleware, `errors` the one error path, `render` Markdown, code and
templates (`templates/`, `static/`), `state` what one app instance holds.
"""
