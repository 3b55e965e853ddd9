"""ampquiz: the product around the sandbox.

Packages: `bank` (the YAML format, loading it, the live bank), `verify` (what proves a key: runs,
proofs, records), `store` (persistence and migrations), `runs` (where snippets run: the local pool
or remote workers), `interview`, `mutate` ("What if" cards), `export`, `web` (the only
FastAPI/Starlette/Jinja2 importer), `cli` (one module per command). Flat domain modules:
`grading`, `progress`, `review`, `item_stats`, `instructors`, `explain_text`, `settings`.
"""
