"""Turning bank text, code and run results into HTML: Markdown and Jinja filters (`render`),
highlighted code (`code_html`), and parts rendered once for every learner (`fragments`)."""
