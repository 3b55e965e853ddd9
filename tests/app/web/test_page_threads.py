"""The page threads (`app.web.page_threads`): a page's blocking work off the event loop, its
result or its error back to the request, and nothing lost when a request goes away."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.web.page_threads import PageThreads


def test_a_pages_work_runs_off_the_event_loop_and_gives_its_result_or_its_error() -> None:
    threads = PageThreads(1)

    async def main() -> None:
        loop_thread = threading.current_thread().name
        assert await threads.run(lambda: threading.current_thread().name) not in (loop_thread, "")
        assert await threads.run(lambda: 6 * 7) == 42

        def broken() -> None:
            raise LookupError("no such question")

        with pytest.raises(LookupError, match="no such question"):
            await threads.run(broken)
        # The loop answers others while a page waits on its thread.
        slow = asyncio.ensure_future(threads.run(lambda: time.sleep(0.3) or "slow"))
        ticks = 0
        while not slow.done():
            await asyncio.sleep(0.01)
            ticks += 1
        assert slow.result() == "slow" and ticks >= 10

    asyncio.run(main())
    threads.shutdown()


def test_a_request_that_goes_away_leaves_the_threads_serving_the_next() -> None:
    threads = PageThreads(1)
    finished = threading.Event()

    async def main() -> None:
        gone = asyncio.ensure_future(threads.run(lambda: time.sleep(0.2) or finished.set()))
        await asyncio.sleep(0.05)
        gone.cancel()  # the client went away mid-page
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert await threads.run(lambda: "next") == "next"
        assert finished.is_set()  # the work itself ran to its end (a write is never cut in half)

    asyncio.run(main())
    threads.shutdown()


def test_threads_start_with_the_first_page_and_stop_after_the_last() -> None:
    """None before the first job (a web process is forked from a parent with none), and shut
    down only once the jobs queued are done; none taken after."""
    before = threading.active_count()
    threads = PageThreads(2)
    assert threading.active_count() == before
    done: list[int] = []

    async def main() -> None:
        jobs = [
            asyncio.ensure_future(threads.run(lambda i=i: time.sleep(0.05) or done.append(i)))
            for i in range(6)
        ]
        await asyncio.sleep(0.01)
        assert threading.active_count() == before + 2
        await asyncio.gather(*jobs)

    asyncio.run(main())
    threads.shutdown(wait=True)
    assert sorted(done) == list(range(6)) and threading.active_count() == before

    async def after() -> None:
        with pytest.raises(RuntimeError, match="shut down"):
            await threads.run(lambda: None)

    asyncio.run(after())


def test_a_failed_page_is_freed_without_waiting_for_a_collection() -> None:
    """Every request during a database outage fails in the page threads: what each held must go
    when it is answered, not wait for the cyclic collector (off while the bank is taken in)."""
    import gc
    import weakref

    class Held:
        """Stands for what a page's work holds (its request, rows, a template context)."""

    threads = PageThreads(1)
    left: list[weakref.ref[Held]] = []

    async def main() -> None:
        for _ in range(20):
            held = Held()
            left.append(weakref.ref(held))

            def fails(held: Held = held) -> None:
                raise ConnectionError(f"the database is gone ({held!r})")

            with pytest.raises(ConnectionError):
                await threads.run(fails)
            del held, fails

    gc.disable()
    try:
        asyncio.run(main())
        # The thread hands the last failure back before it is done with that job: counted once
        # it is (a busy host had it still holding the last one when counted at once).
        threads.shutdown(wait=True)
        still = sum(1 for ref in left if ref() is not None)
    finally:
        gc.enable()
    assert still == 0, f"{still} of 20 failed pages still in memory"


def test_a_request_cancelled_before_its_work_started_has_its_work_left_undone() -> None:
    threads = PageThreads(1)
    ran: list[str] = []

    async def main() -> None:
        busy = asyncio.ensure_future(threads.run(lambda: time.sleep(0.2)))
        await asyncio.sleep(0.02)  # the one thread is busy with the first
        queued = asyncio.ensure_future(threads.run(lambda: ran.append("queued")))
        await asyncio.sleep(0.02)
        queued.cancel()
        await busy
        await threads.run(lambda: ran.append("next"))

    asyncio.run(main())
    threads.shutdown()
    assert ran == ["next"]
