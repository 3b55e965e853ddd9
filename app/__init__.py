"""ampquiz: the product around the sandbox.

Packages: `bank` (the YAML format, loading it, the bank as a folder), `verify` (what proves a key:
runs, proofs, records, the live bank), `store` (persistence and migrations), `runs` (where
snippets run: the local pool or remote workers), `interview`, `mutate` ("What if" cards),
`export`, `use_cases` (what a learner or author does, for every caller), `web` (the only
FastAPI/Starlette/Jinja2 importer), `cli` (one module per command). Flat domain modules:
`grading`, `progress`, `review`, `item_stats`, `instructors`, `explain_text`, `settings`.
"""
