"""The layout on the NATS server that the web and the workers agree on, in one place.

The names below are those of a deployment alone on its NATS server. Deployments sharing one
(production and staging, two test runs on one host) each name themselves in the URL's path,
`nats://HOST:PORT/NAME`, and get names of their own (`Layout`): `AMPQUIZ_RUNS_NAME`,
`ampquiz-NAME.runs.cpu` and so on. Two deployments on one server without names of their own take
each other's runs (and drop them, signed with another key), and hear each other's workers.

- Stream `AMPQUIZ_RUNS` (a work queue, in memory): a run waits under `ampquiz.runs.cpu` or
  `ampquiz.runs.cuda`, and leaves the stream when a worker acknowledges it. The stream holds at
  most `queue_limit` runs (new ones are refused, not old ones dropped): that is the bound on
  waiting runs across every web process, turned into 429 + Retry-After by the web.
- One durable pull consumer per device kind (`runs-cpu`, `runs-cuda`), shared by the workers of
  that kind. A worker pulls a run only when it has a free slot, so a busy worker never receives
  one. A run is acknowledged only after its result was delivered; a worker keeps a run's lease
  (`in_progress`) alive while it runs, up to the run's wall limit plus `LEASE_MARGIN_S`. A run
  whose worker dies is delivered again once (`MAX_DELIVERIES`), to whichever worker pulls next.
- Results go straight back to the waiting web process, on its own subject
  (`ampquiz.results.<process>`) named in the run's `Ampquiz-Reply` header.
- Workers announce themselves on `ampquiz.workers.status` every `ANNOUNCE_S` and answer
  `ampquiz.workers.ping`; one not heard from for `OFFLINE_AFTER_S` is offline.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nats
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from app.runs.messages import MAX_LIMITS
from app.settings import deployment_name

log = logging.getLogger("ampquiz.runs")


def server_url(url: str) -> str:
    """The NATS server's own URL: `url` without the deployment's name (its path)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", parts.query, parts.fragment))


@dataclass(frozen=True)
class Layout:
    """The stream and subjects of one deployment on a NATS server (see above)."""

    name: str = ""

    @classmethod
    def of(cls, url: str) -> Layout:
        """The layout of the deployment `url` names (see `app.settings.deployment_name`)."""
        return cls(deployment_name(url))

    @property
    def _root(self) -> str:
        return f"ampquiz-{self.name}" if self.name else "ampquiz"

    @property
    def stream(self) -> str:
        return f"AMPQUIZ_RUNS_{self.name}" if self.name else "AMPQUIZ_RUNS"

    def run_subject(self, device: str) -> str:
        """Where a run waits for a worker of `device` (`*`: any)."""
        return f"{self._root}.runs.{device}"

    def results_subject(self, web: str) -> str:
        """A web process's own subject, where its runs' results come (`web`: 12 hex digits)."""
        return f"{self._root}.results.{web}"

    def is_results_subject(self, subject: str) -> bool:
        """The only subjects a worker ever replies on: a web process's results subject, as
        `RemoteRuns` names it."""
        return re.fullmatch(re.escape(self._root) + r"\.results\.[0-9a-f]{12}", subject) is not None

    @property
    def status_subject(self) -> str:
        return f"{self._root}.workers.status"

    @property
    def ping_subject(self) -> str:
        return f"{self._root}.workers.ping"

    @property
    def max_deliveries_advisory(self) -> str:
        return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream}.*"


REPLY_HEADER = "Ampquiz-Reply"
RUN_HEADER = "Ampquiz-Run"
"""On a result: the run it answers."""
DEADLINE_HEADER = "Ampquiz-Deadline"
"""Epoch seconds after which nobody waits for the run: a worker drops it instead of running it."""

MAX_DELIVERIES = 2
"""A run whose worker died is delivered once more, never in a loop (a snippet that kills workers)."""
ACK_WAIT_S = 4.0
"""How long a delivered run may go without a sign of life from its worker before it is redelivered."""
LEASE_EVERY_S = 1.0
LEASE_MARGIN_S = 5.0
ANNOUNCE_S = 1.0
OFFLINE_AFTER_S = 3.5
FORGET_AFTER_S = 600.0
"""A worker not heard from for this long is forgotten by the web (it was listed offline long
before): a worker that restarts comes back under a new id."""
ANNOUNCEMENT_FRESH_S = 30.0
"""An announcement sent longer ago than this (by the sender's clock) is not believed: a replayed
one cannot keep a dead worker online. The hosts' clocks must agree within it (the runs'
deadlines assume that too)."""
NO_WORKER_GRACE_S = 15.0
"""How long a run waits with no worker of its kind online before it is reported lost: long
enough for a worker to restart (import torch, prepare its pool)."""
STREAM_MAX_AGE_S = 3600.0


def patience_s(wall_s: float) -> float:
    """How long a web process waits for a run with this wall limit, and so the deadline its
    request carries (a worker drops a request past it, unrun): each delivery may take the wall
    limit plus the lease margin, and a dead worker's run waits ACK_WAIT_S before its second."""
    return MAX_DELIVERIES * (wall_s + LEASE_MARGIN_S + ACK_WAIT_S) + 30


DUPLICATE_WINDOW_S = patience_s(MAX_LIMITS.wall_s) + 60
"""The server drops a run request whose id it saw this recently: longer than the latest deadline
a request can carry, so a signed request captured and published again is dropped by the server
while it could still be run, and by the workers once its deadline has passed. (With 120 s, a
request with a long wall limit could be replayed, and run again, between the two.)"""


async def connect(url: str, name: str, *, reconnect: bool = True) -> Any:
    """A NATS connection to the server `url` names (its path, a deployment's name, is `Layout`'s)
    that says what went wrong in one log line (nats-py's default prints a
    traceback for every failed attempt). Without `reconnect` (a one-off command) a server out of
    reach fails at once."""

    async def said(error: Exception) -> None:
        log.warning("NATS (%s): %s", name, error)

    options: dict[str, Any] = {"name": name, "error_cb": said, "connect_timeout": 3}
    if reconnect:
        options.update(max_reconnect_attempts=-1, reconnect_time_wait=1)
    else:
        options.update(allow_reconnect=False, max_reconnect_attempts=1)
    return await nats.connect(server_url(url), **options)


def consumer_name(device: str) -> str:
    return f"runs-{device}"


async def ensure_layout(js: JetStreamContext, layout: Layout, queue_limit: int) -> None:
    """Creates (or brings up to date) the stream and both consumers; safe to call from every
    web process and worker at once."""
    config = StreamConfig(
        name=layout.stream,
        subjects=[layout.run_subject("*")],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.MEMORY,
        max_msgs=max(1, queue_limit),
        discard=DiscardPolicy.NEW,
        max_age=STREAM_MAX_AGE_S,
        duplicate_window=DUPLICATE_WINDOW_S,
    )
    try:
        await js.add_stream(config)
    except nats.js.errors.BadRequestError:  # exists with other settings: take ours
        await js.update_stream(config)
    for device in ("cpu", "cuda"):
        consumer = ConsumerConfig(
            durable_name=consumer_name(device),
            filter_subject=layout.run_subject(device),
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_S,
            max_deliver=MAX_DELIVERIES,
            max_waiting=4096,
        )
        await js.add_consumer(layout.stream, consumer)


def is_queue_full(error: Exception) -> bool:
    """The stream refused a run because it holds `queue_limit` already."""
    text = str(getattr(error, "description", "") or error).lower()
    return "maximum messages" in text or "maximum bytes" in text


def online(announced: dict[str, dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """The workers heard from lately and not leaving, by id."""
    return sorted(
        (
            w
            for w in announced.values()
            if not w.get("leaving") and now - w.get("_seen", 0) < OFFLINE_AFTER_S
        ),
        key=lambda w: str(w.get("id")),
    )
