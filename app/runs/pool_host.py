"""One sandbox pool shared by the web processes of one host (`ampquiz serve --processes N`).

`PoolHost` runs in the `serve` parent: it owns the `Sandbox` and answers on a Unix socket in a
private folder (mode 0700, and outside anything a snippet can see). Each web process reaches it
with `PoolHostRuns`, so memory does not grow with the processes: one zygote, one set of prepared
runners. It also keeps the turns (`app.runs.turns`, as one process's queue does): each request
says whose run it is and in which lane, so a learner's and an address's share, the room for
learners' runs, the question runs' priority and the order by fewest runs going hold for every web
process together. Kept in each process they held per process: with two, a client without a
cookie had 16 runs admitted where 8 are its share, and a newcomer waited 17 s behind them.

Frames are a 4-byte big-endian length and a JSON body (`app.runs.messages`); a
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.runs import RunsFull
from app.runs.local import local_worker_status, pool_devices, pool_refusal
from app.runs.messages import BadMessage, RunRequest, encode_result, result_from_claim
from app.runs.turns import QueueFull, Turns
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

    def __init__(
        self, pool: Sandbox, on_failure: Callable[[str], None] | None = None, *,
        queue: int = 16, per_learner: int = 2, per_address: int = 8,
    ) -> None:  # fmt: skip
        self.pool = pool
        self.on_failure = on_failure
        """Called (in a thread) when the pool cannot start: `serve` then stops its processes."""
        self._room = {"queue": queue, "per_learner": per_learner, "per_address": per_address}
        self._turns: Turns[threading.Event] | None = None
        """Every web process's runs, admitted and ordered here, on their connection threads."""
        self._turn_lock = threading.Lock()
        self._spare = threading.Condition(self._turn_lock)
        """Notified as runs end: a background run waits on it for a spare worker."""
        _sweep_left_behind()
        self.folder = Path(
            tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        )  # 0700: only this user
        self.path = self.folder / "pool.sock"
        self._listener: socket.socket | None = None
        self._closing = threading.Event()
        self._ready = threading.Event()
        self._failed: str | None = None

    @classmethod
    def for_settings(
        cls, settings: Settings, on_failure: Callable[[str], None] | None = None
    ) -> PoolHost:
        pool = Sandbox(workers=settings.sandbox_workers, hide=[str(settings.data_dir().resolve())])
        return cls(pool, on_failure, queue=settings.run_queue, per_learner=settings.run_per_learner,
                   per_address=settings.run_per_address)  # fmt: skip

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
            self._turns = Turns(workers=self.pool.workers, **self._room)
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
            threading.Thread(
                target=self._serve, args=(conn,), name="pool-host-conn", daemon=True
            ).start()

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
            return json.dumps(
                {
                    "environment": self.pool.environment,
                    "worker": local_worker_status(self.pool, "pool host"),
                }
            ).encode()
        try:
            request = RunRequest.decode(body)
        except BadMessage as exc:
            return json.dumps({"error": str(exc)}).encode()
        try:
            result = self._run_in_turn(request)
        except (
            QueueFull
        ) as full:  # this learner's or address's share, or the room, of every process
            return json.dumps(
                {
                    "full": {
                        "retry_after_s": full.retry_after_s,
                        "reason": full.reason,
                        "limit": full.limit,
                    }
                }
            ).encode()
        except Exception as exc:  # noqa: BLE001 - the pool itself failed (SandboxError): the client raises it
            log.error("pool host: run failed: %s", exc)
            return json.dumps({"error": f"the sandbox failed: {exc}"}).encode()
        return encode_result(result)

    def _run_in_turn(self, request: RunRequest) -> RunResult:
        """Runs the request in its turn among every web process's runs (`Turns`; QueueFull when
        there is no room for it), on this thread: inside the connection's `results_first` block,
        so its runner is replaced only once the result is sent. (Waiting on an event loop of its
        own instead cost the host about 1 ms of CPU a run, and a fifth of its runs/s.)"""
        turns = self._turns
        assert turns is not None
        lane, owners = request.lane, request.owners
        refused = pool_refusal(self.pool.environment, request.device, "This snippet")
        if refused is not None:
            return refused  # at once: nothing here can run it, so no place in the queue either
        mine = threading.Event()
        with self._turn_lock:
            if lane == "background":  # proving a key: only while a learner would not wait for it
                self._spare.wait_for(lambda: turns.spare)
            turns.admit(lane, owners)
            now = turns.take_slot(lane, owners, mine)
        held = 0.0
        try:
            if not now:
                mine.wait()  # set by the run that hands this one its worker
            with self._turn_lock:
                turns.started(owners)
            try:
                began = time.perf_counter()
                result = self.pool.run(
                    request.code, request.limits, explain=request.explain, device=request.device
                )
                held = time.perf_counter() - began
                return result
            finally:
                with self._turn_lock:
                    chosen = turns.give_back_slot(
                        owners, lambda _waiter: False
                    )  # a thread never gives up
                if chosen is not None:
                    chosen.set()
        finally:
            with self._turn_lock:
                turns.finished(lane, owners, held)
                self._spare.notify_all()


class PoolHostRuns:
    """A web process's view of the host's shared pool (a `Runs`), which keeps every process's turns."""

    keeps_turns = True

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
        return await self.run_in_turn(code, limits, explain=explain, device=device)

    async def run_in_turn(
        self, code: str, limits: Limits, *, explain: bool = False, device: str | None = None,
        lane: str = "question", owners: tuple[str, ...] = (),
    ) -> RunResult:  # fmt: skip
        """Runs `code` in its turn among every web process's runs: `lane` and `owners` as
        `RunQueue.run` takes them. Raises RunsFull when the host's queue refuses it."""
        from sandbox import SandboxError

        self._ids += 1
        raw = await self._call(
            RunRequest(
                f"{os.getpid()}-{self._ids}", code, limits, explain, device, lane, owners
            ).encode()
        )
        data = json.loads(raw)
        if "full" in data:
            full = data["full"]
            raise RunsFull(
                int(full.get("retry_after_s") or 1),
                str(full.get("reason") or "queue"),
                int(full.get("limit") or 0),
            )
        if "error" in data:
            raise SandboxError(data["error"])
        try:
            return result_from_claim(data)
        except BadMessage as exc:
            raise SandboxError(f"the shared sandbox pool answered nonsense: {exc}") from None

    async def _call(self, body: bytes) -> bytes:
        from sandbox import SandboxError

        try:
            reader, writer = (
                self._idle.pop()
                if self._idle
                else await asyncio.open_unix_connection(self.path, limit=MAX_FRAME)
            )
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
