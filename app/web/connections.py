"""Keep-alive connections that serve a bounded number of requests, so that `serve --processes N`'s
processes share a class's connections.

The processes accept from one shared socket, and whichever wakes first takes every connection
waiting (see `app.web.preload`): a class that connects at once can land on one process, which then
serves them all on one core while the other cores idle, for as long as the connections live, and a
browser keeps a busy one open for good. Measured with 10 learners on PostgreSQL: one process took
every connection, and the class was served at 0.40x the rate on SQLite, whose connections happened
to split evenly.

So a connection is closed after `REQUESTS_PER_CONNECTION` requests, as nginx's `keepalive_requests`
does (its response says `Connection: close`; a browser opens a new one for its next request, which
costs a TCP handshake on the local network, once in a hundred requests). The new connection goes to
the process that accepts first: the one with time to spare, which is how the class spreads. Nothing
else changes: a request is never cut, and one process alone keeps its connections as before.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

REQUESTS_PER_CONNECTION = 100
"""nginx's default for `keepalive_requests` was 100 until 1.19.10 (1,000 since)."""

class BoundedKeepAlive(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools), one per connection, that asks the client to close
    the connection with its `REQUESTS_PER_CONNECTION`th response."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests_served = 0

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.requests_served += 1
        if self.requests_served >= REQUESTS_PER_CONNECTION and self.cycle is not None:
            # uvicorn then sends `connection: close` and closes once the response is complete.
            self.cycle.keep_alive = False
