"""The live channel: an asyncio fan-out per interview, inside one web process.

An event is stored first, then published to every open stream of its interview, under a lock per
interview so streams see events in id order. A stream that missed some (a reconnect, a restart)
reads them back from the database by id, so nothing here needs to survive the process: the log
is the truth and this is only the fast path. (Several web processes would need a broker to fan
out between them; one process serves a few hundred streams, see bench/interviews.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from app.interview import model
from app.store import Store

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
        self, store: Store, interview_id: int, kind: str, data: dict[str, Any]
    ) -> model.Event:
        """Stores the event (off the event loop), then hands it to every open stream."""
        async with self._lock(interview_id):
            event = await asyncio.to_thread(model.append, store, interview_id, kind, data)
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
        last = after
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
                    event = await asyncio.wait_for(queue.get(), ping_s)
                except TimeoutError:
                    yield None
                    continue
                if event is not None and event.id > last:
                    last = event.id
                    yield event
        finally:
            streams.discard(queue)
            if not streams:
                self._streams.pop(interview_id, None)

    def streams(self, interview_id: int) -> int:
        return len(self._streams.get(interview_id, ()))
