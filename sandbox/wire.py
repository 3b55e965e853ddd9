"""Length-prefixed JSON messages over a socket: how the pool, the zygote and a run talk.

Runs in: all three: the server, the zygote and the runner.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

_HEADER = struct.Struct("!I")
MAX_MESSAGE_BYTES = 32 * 1024 * 1024


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    body = json.dumps(message, default=str).encode()
    data = _HEADER.pack(len(body)) + body
    if fds:
        socket.send_fds(sock, [data[:1]], fds)
        sock.sendall(data[1:])
    else:
        sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> dict[str, Any] | None:
    """One message, or None at end of stream. Blocking."""
    header = _recv_exact(sock, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {length} bytes is over the limit")
    body = _recv_exact(sock, length)
    return None if body is None else json.loads(body)


def recv_with_fds(sock: socket.socket, max_fds: int) -> tuple[dict[str, Any] | None, list[int]]:
    first, fds, _, _ = socket.recv_fds(sock, 1, max_fds)
    if not first:
        return None, []
    rest = _recv_exact(sock, _HEADER.size - 1)
    if rest is None:
        return None, fds
    (length,) = _HEADER.unpack(first + rest)
    body = _recv_exact(sock, length)
    return (None if body is None else json.loads(body)), fds


class Reader:
    """Incremental decoder for a non-blocking reader: feed bytes, take whole messages."""

    def __init__(
        self, max_containers: int | None = None, max_bytes: int = MAX_MESSAGE_BYTES
    ) -> None:
        self.buffer = bytearray()
        self.max_bytes = max_bytes
        """A message whose header declares more is refused at once, before its body is read."""
        self.max_containers = max_containers
        """With a bound: a message with more lists and objects than that (counted as its `[` and
        `{` bytes, before parsing) is refused. Parsing holds the GIL: 4 MB of `[[],[],…]` took a
        second of the process's CPU, and every other request waited."""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.buffer += data
        out = []
        while len(self.buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self.buffer)
            if length > self.max_bytes:
                raise ValueError("message over the limit")
            if len(self.buffer) < _HEADER.size + length:
                break
            body = bytes(self.buffer[_HEADER.size : _HEADER.size + length])
            del self.buffer[: _HEADER.size + length]
            if (
                self.max_containers is not None
                and body.count(b"[") + body.count(b"{") > self.max_containers
            ):
                raise ValueError("message with too many lists and objects")
            out.append(json.loads(body))
        return out
