"""How the web serves one HTTP connection: uvicorn's own protocol (httptools), with three bounds it
lacks, which `serve` uses for every connection (uvicorn's `http` option).

- **A request arrives whole in time.** uvicorn times out only a connection idle after a response:
  one that sends half a request line and stops was held for good, and an attacker's 20,000 of them
  took every file descriptor of a web process (the server stopped answering, and the bank could
  not even be reloaded: "Too many open files"). A request's head and body must now arrive within
  `REQUEST_WITHIN_S` of its first byte (a new connection's first byte too, as nginx's
  `client_header_timeout`); a late head gets 408 and the connection is closed, a late body closes
  it (the page sees the client gone).
- **An address holds a bounded number of connections.** `CONNECTIONS_PER_ADDRESS` open at once per
  web process (an IPv6 client counts by its /64, which it owns whole: `address_key`); one more
  gets 503 and is closed. A browser opens at most 6 per site; 256 leave room for a class behind
  one NAT address, or a reverse proxy on this host.
- **A busy connection is handed back after `REQUESTS_PER_CONNECTION` requests.** `serve
  --processes N`'s processes accept from one shared socket, and whichever wakes first takes every
  connection waiting (see `app.web.server.preload`): a class that connects at once could all land on one
  process, served on one core while the others idled, for as long as the browsers kept their
  connections. Measured with 10 learners on PostgreSQL: one process took every connection, and
  the class was served at 0.40x the rate on SQLite, whose connections happened to split evenly.
  So a connection's 100th response says `Connection: close`, as nginx's `keepalive_requests`
  does; the browser's next request opens a new one (a TCP handshake, once in a hundred requests),
  which the process with time to spare accepts.

It subclasses uvicorn's `HttpToolsProtocol` and hooks its parser callbacks (`on_headers_complete`,
`on_message_complete`) and the asyncio protocol's own methods; a uvicorn that renames them fails
the tests in `tests/app/web/test_connections.py`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.web.answer_rate import address_key

REQUEST_WITHIN_S = 20.0
"""A request's head and body arrive within this many seconds of its first byte (1 MB, the largest
body taken, at 50 KB/s)."""

CONNECTIONS_PER_ADDRESS = 256
"""Connections one address (an IPv6 /64) may hold open at once, per web process."""

REQUESTS_PER_CONNECTION = 100
"""nginx's default for `keepalive_requests` was 100 until 1.19.10 (1,000 since)."""


def _plain(status: str, text: str, *headers: str) -> bytes:
    """A whole response written by the connection itself, before or instead of the app's."""
    body = text.encode() + b"\n"
    head = [f"HTTP/1.1 {status}", "content-type: text/plain; charset=utf-8", *headers, "connection: close",
            f"content-length: {len(body)}"]  # fmt: skip
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


TOO_SLOW = _plain("408 Request Timeout", "The request did not arrive whole in time.")
TOO_MANY = _plain(
    "503 Service Unavailable", "Too many connections open from your address.", "retry-after: 5"
)


class BoundedConnection(HttpToolsProtocol):
    """One connection (see the module): uvicorn's protocol, with a deadline for each request to
    arrive, a bound on connections per address and on requests per connection."""

    open_per_address: ClassVar[Counter[str]] = Counter()
    """This process's open connections by `address_key` (one event loop: no lock needed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests_served = 0
        self.address = ""
        """Its `address_key` while it counts against the address's connections; empty otherwise."""
        self.deadline: asyncio.TimerHandle | None = None
        """While a request (or a new connection's first) is still arriving."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = address_key(self.client[0]) if self.client else ""
        if address and self.open_per_address[address] >= CONNECTIONS_PER_ADDRESS:
            transport.write(TOO_MANY)
            transport.close()
            return
        if address:
            self.open_per_address[address] += 1
            self.address = address
        self._expect_a_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        if self.address:
            self.open_per_address[self.address] -= 1
            if not self.open_per_address[self.address]:
                del self.open_per_address[self.address]
            self.address = ""
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._expect_a_request()  # a new request's first bytes
        super().data_received(data)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.requests_served += 1
        if self.requests_served >= REQUESTS_PER_CONNECTION and self.cycle is not None:
            # uvicorn then sends `connection: close` and closes once the response is complete.
            self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        self._stop_waiting()  # the request has arrived whole
        super().on_message_complete()

    def _expect_a_request(self) -> None:
        self.deadline = self.loop.call_later(REQUEST_WITHIN_S, self._too_slow)

    def _stop_waiting(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _too_slow(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # its head never came whole
            self.transport.write(TOO_SLOW)
        self.transport.close()
