"""The live channel: an asyncio fan-out per interview, inside one web process, and the log.

An event is stored first, then published to every open stream of its interview in this process,
under a lock per interview so streams see this process's events in their order. A stream that
missed some (a reconnect, a restart) reads them back from the database by number, so nothing
here needs to survive the process: the log is the truth and this is only the fast path. The
candidate's page and the interviewer's may be served by different web processes (`ampquiz serve
--processes N`), so a quiet stream also reads the log every `POLL_S`: an event recorded by another
process arrives within that, at the cost of one small query per open stream.

Events are numbered 1, 2, ... in their interview with no gap, in commit order
(`app.interview.model.append`): an event handed over here numbered past the next one the stream
expects means another process committed the ones between, and they are read from the log first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from app.interview import model
from app.store import Store

POLL_S = 0.5
QUEUE_LIMIT = 1000
"""Events a slow stream may fall behind by before it is dropped (its client reconnects and reads
the rest from the database)."""


class Hub:
    def __init__(self) -> None:
        self._streams: dict[int, set[asyncio.Queue[model.Event | None]]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def _lock(self, interview_id: int) -> asyncio.Lock:
        return self._locks.setdefault(interview_id, asyncio.Lock())

    async def record(
        self,
        store: Store,
        interview_id: int,
        kind: str,
        data: dict[str, Any],
        *,
        once: str | None = None,
    ) -> model.Event | None:
        """Stores the event (off the event loop), then hands it to every open stream. `once`:
        see `model.append`; None when it was stored already, and nothing is sent."""
        async with self._lock(interview_id):
            event = await asyncio.to_thread(
                lambda: model.append(store, interview_id, kind, data, once=once)
            )
            if event is None:
                return None
            for queue in list(self._streams.get(interview_id, ())):
                try:
                    queue.put_nowait(event)
                except asyncio.QueueFull:  # too far behind: it catches up from the log
                    self._streams[interview_id].discard(queue)
            return event

    async def follow(
        self, store: Store, interview_id: int, after: int = 0, *, ping_s: float = 15.0
    ) -> AsyncIterator[model.Event | None]:
        """Every event after `after`, then each new one as it is recorded; None now and then
        (every `ping_s` without an event) so the caller can keep the connection alive. Ends when
        the stream falls too far behind (its client then reconnects from its last id)."""
        queue: asyncio.Queue[model.Event | None] = asyncio.Queue(QUEUE_LIMIT)
        streams = self._streams.setdefault(interview_id, set())
        streams.add(queue)  # before reading the log: nothing recorded meanwhile is missed
        last, quiet_since = after, time.monotonic()
        event: model.Event | None
        try:
            for event in await asyncio.to_thread(model.events, store, interview_id, after):
                last = event.id
                yield event
            while True:
                if queue not in streams:
                    for event in await asyncio.to_thread(model.events, store, interview_id, last):
                        last = event.id
                        yield event
                    return
                try:
                    event = await asyncio.wait_for(queue.get(), POLL_S)
                except TimeoutError:  # quiet here: another process may have recorded something
                    for event in await asyncio.to_thread(model.events, store, interview_id, last):
                        last, quiet_since = event.id, time.monotonic()
                        yield event
                    if time.monotonic() - quiet_since >= ping_s:
                        quiet_since = time.monotonic()
                        yield None
                    continue
                if event is not None and event.id > last + 1:
                    # Another process committed the ones between: read them (and this one) first.
                    for event in await asyncio.to_thread(model.events, store, interview_id, last):
                        last, quiet_since = event.id, time.monotonic()
                        yield event
                elif event is not None and event.id > last:
                    last, quiet_since = event.id, time.monotonic()
                    yield event
        finally:
            streams.discard(queue)
            if not streams:
                self._streams.pop(interview_id, None)

    def streams(self, interview_id: int) -> int:
        return len(self._streams.get(interview_id, ()))
