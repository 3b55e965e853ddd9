"""The web layer, and the only package that imports FastAPI, Starlette or Jinja2.

`factory.create_app(settings)` builds the app; `state` is what one app instance holds, `deps` the
dependencies declared once, `errors` the one error path. `routes/` holds the handlers (parse, call a
use case, render), `rendering/` Markdown, code and templates (`templates/`, `static/`), and
`server/` how the app is served: processes, connections, middleware, page threads.
"""
