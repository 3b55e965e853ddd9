"""One sandbox pool shared by the web processes of one host (`ampquiz serve --processes N`).

`PoolHost` runs in the `serve` parent: it owns the `Sandbox` and answers on a Unix socket in a
private folder (mode 0700, and outside anything a snippet can see). Each web process reaches it
with `PoolHostRuns`, so memory does not grow with the processes: one zygote, one set of prepared
runners. Frames are a 4-byte big-endian length and a JSON body (`app.runs.messages`); a
connection carries one run at a time, and a client keeps a few open for reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.runs.local import local_worker_status, pool_devices, pool_refusal
from app.runs.messages import BadMessage, RunRequest, encode_result, result_from_claim
from sandbox import Limits, RunResult, Sandbox

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("ampquiz.runs")
_HEADER = struct.Struct(">I")
MAX_FRAME = 4 << 20


_PREFIX = "ampquiz-pool-"


def _sweep_left_behind() -> None:
    """Removes the socket folders of earlier pool hosts of this user that were killed outright
    (`kill -9`, the OOM killer), whose `close` never ran: one a start, for good. A folder is
    named for its host's pid; one whose process is alive (another `serve`) is left alone, and so
    is anything holding more than the socket."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = folder.name.removeprefix(_PREFIX).split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:  # its host is gone
            with contextlib.suppress(OSError):
                (folder / "pool.sock").unlink(missing_ok=True)
                folder.rmdir()
        except OSError:  # alive under another user, or not ours to look at
            continue


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_HEADER.pack(len(body)) + body)


class PoolHost:
    """The pool and its socket; `start()` returns once runs can be taken, `close()` ends both."""

    def __init__(self, pool: Sandbox, on_failure: Callable[[str], None] | None = None) -> None:
        self.pool = pool
        self.on_failure = on_failure
        """Called (in a thread) when the pool cannot start: `serve` then stops its processes."""
        _sweep_left_behind()
        self.folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))  # 0700: only this user
        self.path = self.folder / "pool.sock"
        self._listener: socket.socket | None = None
        self._closing = threading.Event()
        self._ready = threading.Event()
        self._failed: str | None = None

    @classmethod
    def for_settings(cls, settings: Settings, on_failure: Callable[[str], None] | None = None) -> PoolHost:
        pool = Sandbox(workers=settings.sandbox_workers, hide=[str(settings.data_dir().resolve())])
        return cls(pool, on_failure)

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def start(self) -> PoolHost:
        """Listens at once and starts the pool in the background: the web processes start (import,
        load the bank) while the pool imports torch, and a request waits until the pool is up."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(256)
        self._listener = listener
        threading.Thread(target=self._start_pool, name="pool-host-start", daemon=True).start()
        threading.Thread(target=self._accept, name="pool-host", daemon=True).start()
        return self

    def _start_pool(self) -> None:
        try:
            self.pool.start()
        except Exception as exc:  # noqa: BLE001 - SandboxError, OSError: every request is told why
            self._failed = f"the sandbox pool could not start: {exc}"
            log.error("pool host: %s", self._failed)
            if self.on_failure is not None:
                self.on_failure(self._failed)
        self._ready.set()

    @property
    def failure(self) -> str | None:
        return self._failed

    def close(self) -> None:
        self._closing.set()
        self._ready.wait(timeout=self.pool.start_timeout_s)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        self.pool.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.folder.rmdir()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="pool-host-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                header = _recv_exact(conn, _HEADER.size)
                if header is None:
                    return
                (size,) = _HEADER.unpack(header)
                body = _recv_exact(conn, size) if size <= MAX_FRAME else None
                if body is None:
                    return
                with self.pool.results_first():  # the used runner is replaced once this is sent
                    _send_frame(conn, self._answer(body))

    def _answer(self, body: bytes) -> bytes:
        self._ready.wait()
        if self._failed:
            return json.dumps({"error": self._failed}).encode()
        if body == b'"status"':
            return json.dumps({"environment": self.pool.environment, "worker": local_worker_status(self.pool, "pool host")}).encode()
        try:
            request = RunRequest.decode(body)
        except BadMessage as exc:
            return json.dumps({"error": str(exc)}).encode()
        try:
            result = self.pool.run(request.code, request.limits, explain=request.explain, device=request.device)
        except Exception as exc:  # noqa: BLE001 - the pool itself failed (SandboxError): the client raises it
            log.error("pool host: run failed: %s", exc)
            return json.dumps({"error": f"the sandbox failed: {exc}"}).encode()
        return encode_result(result)


class PoolHostRuns:
    """A web process's view of the host's shared pool (a `Runs`)."""

    def __init__(self, path: str, status: dict[str, Any]) -> None:
        self.path = path
        self._status = status
        self.workers = int(status["worker"]["slots"])
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._ids = 0

    @classmethod
    async def connect(cls, path: str, settings: Settings | None = None) -> PoolHostRuns:
        runs = cls(path, {"worker": {"slots": 1}})
        status = json.loads(await runs._call(b'"status"'))  # waits while the pool starts
        if "error" in status:
            from sandbox import SandboxError

            raise SandboxError(status["error"])
        runs._status = status
        runs.workers = int(runs._status["worker"]["slots"])
        return runs

    @property
    def environment(self) -> dict[str, Any]:
        return self._status["environment"]

    @property
    def alive(self) -> bool:
        return os.path.exists(self.path)

    def devices(self) -> list[str]:
        return pool_devices(self.environment)

    def refusal(self, device: str | None, subject: str) -> RunResult | None:
        return pool_refusal(self.environment, device, subject)

    async def run(
        self, code: str, limits: Limits, *, explain: bool = False, device: str | None = None
    ) -> RunResult:
        from sandbox import SandboxError

        self._ids += 1
        raw = await self._call(RunRequest(f"{os.getpid()}-{self._ids}", code, limits, explain, device).encode())
        data = json.loads(raw)
        if "error" in data:
            raise SandboxError(data["error"])
        try:
            return result_from_claim(data)
        except BadMessage as exc:
            raise SandboxError(f"the shared sandbox pool answered nonsense: {exc}") from None

    async def _call(self, body: bytes) -> bytes:
        from sandbox import SandboxError

        try:
            reader, writer = self._idle.pop() if self._idle else await asyncio.open_unix_connection(self.path, limit=MAX_FRAME)
            writer.write(_HEADER.pack(len(body)) + body)
            await writer.drain()
            (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            answer = await reader.readexactly(size)
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise SandboxError(f"the shared sandbox pool is not answering ({exc})") from None
        self._idle.append((reader, writer))
        return answer

    def status(self) -> dict[str, Any]:
        return {"kind": "shared pool", "workers": [self._status["worker"]]}

    async def close(self) -> None:
        for _reader, writer in self._idle:
            writer.close()
        self._idle.clear()
