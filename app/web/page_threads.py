"""The threads where pages make their database calls and render (`render.in_thread`).

Every learner page makes one trip off the event loop and back. Through `loop.run_in_executor` that
trip cost ~55 us of CPU (a `concurrent.futures.Future` with its condition, the executor's work
item and thread-count check, and `asyncio.wrap_future` chaining the two futures' callbacks both
ways); here it is a queue put, the work, and `call_soon_threadsafe` with the result: ~18 us (one
thread, an empty job, uvloop, this 2-core host). Under the learners' load the trip was about a
tenth of a page's CPU.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_STOP = None


class PageThreads:
    """`threads` threads running the work handed to `run`, in turn, first come first served.

    The threads start with the first job, not before: a web process is forked from a parent that
    built nothing yet, and a thread started before a fork does not exist in the child."""

    def __init__(self, threads: int, name: str = "page") -> None:
        self.threads = threads
        self.name = name
        self._jobs: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None
        ]
        self._jobs = queue.SimpleQueue()
        self._started: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` in one of the threads; its result, or its exception raised here. When the
        request is cancelled (at the end of a shutdown's grace) before its work started, the
        work is not done, as with an executor; once started, it is finished, unseen."""
        if not self._started:
            self._start()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        with self._lock:  # never queued behind the stop marks of a shutdown
            if self._closed:
                raise RuntimeError("the page threads are shut down")
            self._jobs.put((loop, done, work))
        try:
            return await done
        finally:
            del done  # as in `_do`: the frame a failure's traceback holds must not hold the future

    def _start(self) -> None:
        with self._lock:
            if self._started or self._closed:
                return
            for i in range(self.threads):
                thread = threading.Thread(target=self._work, name=f"{self.name}_{i}", daemon=True)
                thread.start()
                self._started.append(thread)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not _STOP:
            _do(*job)
            job = None  # nothing of a finished page kept alive while waiting for the next

    def shutdown(self, wait: bool = True) -> None:
        """No more jobs; those queued are done first. With `wait`, returns once they are."""
        with self._lock:
            self._closed = True
            started = list(self._started)
        for _ in started:
            self._jobs.put(_STOP)
        if wait:
            for thread in started:
                thread.join()


def _do(
    loop: asyncio.AbstractEventLoop, done: asyncio.Future[Any], work: Callable[[], Any]
) -> None:
    # A read of a flag the loop's thread sets: at worst the work is done unseen.
    if done.cancelled():
        return
    try:
        result = work()
    except BaseException as exc:  # noqa: BLE001 - raised again where the page awaits it
        _hand_back(loop, done, _raise, exc)
        # The exception's traceback holds this frame, and the frame the future that holds the
        # exception: a cycle only the collector frees, so every failed page (each request during
        # a database outage) stayed in memory until a collection. Broken here.
        del done, work
    else:
        _hand_back(loop, done, _return, result)


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    done: asyncio.Future[Any],
    settle: Callable[..., None],
    value: Any,
) -> None:
    try:
        loop.call_soon_threadsafe(settle, done, value)
    except RuntimeError:  # the loop is closed: no one awaits the page any more
        pass


def _return(done: asyncio.Future[Any], result: Any) -> None:
    if not done.done():  # cancelled meanwhile
        done.set_result(result)


def _raise(done: asyncio.Future[Any], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)
