"""Use cases: what a learner, a candidate or an author does, as plain functions over the store,
the bank and the proofs. No web framework here (no FastAPI, Starlette or Jinja2, nothing of
app.web): a route parses the request, calls a use case, and renders what it returns; the async
orchestration (awaiting a run, counting the answers per minute, handing blocking work to the page
threads) stays in the web."""
