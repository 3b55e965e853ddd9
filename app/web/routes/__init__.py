"""The web's routes: the JSON API (`api`), the learner's pages (`pages`, `lean`, `review_session`,
`playground`, `what_if`), interviews (`interview`, `interviewer`), the studio (`studio/`), and the
server's own (`health`, `docs`, `static_files`). A route parses, calls a use case, renders."""
