"""GradScaler events folded in time order, so a long training loop stays a short table.

Runs in: the runner (part of the explanation).

An iteration (the events up to and including an `update()`) that repeats the one before it
exactly adds to that one's counts, so a 1000-step loop with a steady scale is one block "x1000"; a
skipped step, a new scale or a misuse starts a new block where it happened. Within an iteration,
the same event twice in a row folds too. (Folding equal events wherever they were would put later
events inside the first iteration.)
"""

from __future__ import annotations

from typing import Any

from sandbox.explain.report import ScalerEvent


class IterationLog:
    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.truncated = False
        self._events: list[ScalerEvent] = []
        self._pending: list[dict[str, Any]] = []
        """Events of the iteration under way (since the last update())."""
        self._last_keys: list[tuple[Any, ...]] | None = None
        self._last_block: list[dict[str, Any]] = []

    @property
    def events(self) -> list[ScalerEvent]:
        if self._pending:
            self._close_iteration()
        return self._events

    def add(self, event: dict[str, Any]) -> None:
        self._pending.append(event)
        if event.get("event") == "update":
            self._close_iteration()

    def _close_iteration(self) -> None:
        keys = [
            tuple(e.items()) for e in self._pending
        ]  # each kind is built with its keys in one order
        if keys == self._last_keys:
            for entry in self._last_block:
                entry["count"] += 1
        else:
            block: list[dict[str, Any]] = []
            for event, key in zip(self._pending, keys):
                if block and key == tuple((k, v) for k, v in block[-1].items() if k != "count"):
                    block[-1]["count"] += 1
                    continue
                if len(self._events) >= self.max_events:
                    self.truncated = True
                    break
                entry = {**event, "count": 1}
                block.append(entry)
                # A ScalerEvent (what `add` was given) with its count: mypy sees a plain dict.
                self._events.append(entry)  # type: ignore[arg-type]
            self._last_keys, self._last_block = keys, block
        self._pending = []
