"""ampquiz: the product around the sandbox.

Packages: `bank` (the YAML format and loading it), `verify` (answer keys proved by running them,
and their records), `web` (the only FastAPI/Starlette/Jinja2 importer), `cli` (one module per
command). Flat domain modules: `grading`, `public_question`, `progress`, `review`, `store`,
`run_queue`, `question_runs`, `live_bank`, `explain_text`, `settings`.
"""
