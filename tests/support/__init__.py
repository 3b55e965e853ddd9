"""Code the tests share (no tests here): the session's sandbox pool, the web app on a temporary
database, the real command line, the browser's server, and the explanation helpers."""
