"""How the web app is served: the web processes (`process`, `preload`), each connection's bounds
(`connections`), the ASGI middleware (`middleware`), the threads pages render in
(`page_threads`), and the rate at which answers are taken (`answer_rate`)."""
