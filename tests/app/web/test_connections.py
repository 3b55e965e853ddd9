"""`app.web.server.connections`: what serve's connections bound that uvicorn alone does not (a real uvicorn
on a real socket, in a thread, with the bounds made small enough to reach in a test)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from app.web.answer_rate import address_key
from app.web.server import connections
from app.web.server.connections import BoundedConnection
from tests.support.server import free_port


async def hello(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]}
    )
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(connections, "REQUEST_WITHIN_S", 1.0)
    monkeypatch.setattr(connections, "CONNECTIONS_PER_ADDRESS", 3)
    port = free_port()
    config = uvicorn.Config(
        hello,
        host="127.0.0.1",
        port=port,
        http=BoundedConnection,
        log_level="warning",
        lifespan="off",
    )
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not served.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert served.started
    yield port
    served.should_exit = True
    thread.join(10)


def connect(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    return conn


def read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    got = b""
    while chunk := conn.recv(65536):
        got += chunk
    return got


GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_request_head_that_never_ends_gets_408_and_its_connection_is_closed(server: int) -> None:
    """Half a request line, then nothing, was held for good: 20,000 of them took every file
    descriptor of the web process, and it stopped answering anyone."""
    conn = connect(server)
    conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    started = time.monotonic()
    got = read_all(conn)
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert b"did not arrive whole in time" in got
    assert 0.8 <= time.monotonic() - started < 4


def test_a_connection_that_sends_nothing_or_a_body_too_slowly_is_closed(server: int) -> None:
    silent = connect(server)
    slow = connect(server)
    slow.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf")
    started = time.monotonic()
    assert read_all(silent).startswith(b"HTTP/1.1 408 ")
    assert read_all(slow) == b""  # its app had the head: it sees the client gone
    assert time.monotonic() - started < 4


def test_a_request_arriving_in_pieces_within_the_deadline_is_served_and_so_is_the_next(
    server: int,
) -> None:
    conn = connect(server)
    for piece in (b"GET / HT", b"TP/1.1\r\nHo", b"st: x\r\n", b"\r\n"):
        conn.sendall(piece)
        time.sleep(0.2)
    assert conn.recv(65536).endswith(b"hello")
    time.sleep(1.2)  # idle after a response: uvicorn's keep-alive timeout (5 s) is what applies
    conn.sendall(GET)
    assert conn.recv(65536).endswith(b"hello")
    conn.close()


def test_one_address_holds_a_bounded_number_of_connections(server: int) -> None:
    held = [connect(server) for _ in range(3)]
    for conn in held:
        conn.sendall(GET)
        assert conn.recv(65536).endswith(b"hello")
    extra = connect(server)
    got = read_all(extra)
    assert got.startswith(b"HTTP/1.1 503 ") and b"Too many connections" in got, got
    held.pop().close()
    time.sleep(0.2)
    again = connect(server)
    again.sendall(GET)
    assert again.recv(65536).endswith(b"hello")
    for conn in [*held, again]:
        conn.close()


def test_a_connection_is_handed_back_after_its_hundredth_request(server: int) -> None:
    conn = connect(server)
    for i in range(1, connections.REQUESTS_PER_CONNECTION + 1):
        conn.sendall(GET)
        got = b""
        while not got.endswith(b"hello"):
            got += conn.recv(65536)
        assert (b"connection: close" in got.lower()) == (
            i == connections.REQUESTS_PER_CONNECTION
        ), i
    assert conn.recv(65536) == b""  # closed by the server


def test_an_ipv6_client_counts_by_its_64_and_a_mapped_ipv4_one_by_its_address() -> None:
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff:2:3:4") == "2001:db8::/64"
    assert address_key("2001:db8:0:1::1") != address_key("2001:db8::1")
    assert address_key("::ffff:192.0.2.7") == "192.0.2.7" == address_key("192.0.2.7")
