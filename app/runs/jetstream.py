"""The layout on the NATS server that the web and the workers agree on, in one place.

The names below are those of a deployment alone on its NATS server. Deployments sharing one
(production and staging, two test runs on one host) each name themselves in the URL's path,
`nats://HOST:PORT/NAME`, and get names of their own (`Layout`): `AMPQUIZ_RUNS_NAME_cpu`,
`ampquiz-NAME.runs.cpu` and so on. Two deployments on one server without names of their own take
each other's runs (and drop them, signed with another key), and hear each other's workers.

- A stream per device kind (`AMPQUIZ_RUNS_cpu`, `AMPQUIZ_RUNS_cuda`; work queues, in memory): a
  run waits under `ampquiz.runs.cpu` or `ampquiz.runs.cuda`, and leaves its stream when a worker
  acknowledges it, or once older than any run's deadline (`STREAM_MAX_AGE_S`). What a stream
  holds is no measure of the web's room: anyone allowed to publish there can fill it. The room is
  each web process's own count of its runs in flight (`app.runs.remote`); a stream's own bound
  only caps the server's memory. Only the web makes the streams (a worker waits for them).
- One durable pull consumer per stream (`runs-cpu`, `runs-cuda`), shared by the workers of
  that kind. A worker pulls a run only when it has a free slot, so a busy worker never receives
  one. A run is acknowledged only after its result was delivered; a worker keeps a run's lease
  (`in_progress`) alive while it runs, up to the run's wall limit plus `LEASE_MARGIN_S`, and says
  in its signed announcements which runs it holds, at which delivery. A run whose worker dies is
  delivered again once (`MAX_DELIVERIES`), to whichever worker pulls next; a run whose holder on
  its last delivery stops holding it without a result is lost. (JetStream's advisories are not
  listened to: anyone can publish them.)
- Results go straight back to the waiting web process, on its own subject
  (`ampquiz.results.<process>`) named in the run's `Ampquiz-Reply` header.
- Workers announce themselves on `ampquiz.workers.status` every `ANNOUNCE_S` and answer
  `ampquiz.workers.ping`; one not heard from for `OFFLINE_AFTER_S` is offline.
- The web and the workers each reply on inboxes of their own role (`_INBOX.web.…`,
  `_INBOX.worker.…`), so the broker's permissions can keep each from reading the other's
  (deploy/nats.conf).
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import nats.aio.client
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

from app.runs.messages import MAX_LIMITS, MAX_RUN_BYTES
from app.settings import deployment_name

if TYPE_CHECKING:
    from app.settings import Settings

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

    def stream(self, device: str) -> str:
        """The stream where runs for `device` wait ("cpu", "cuda")."""
        return f"AMPQUIZ_RUNS_{self.name}_{device}" if self.name else f"AMPQUIZ_RUNS_{device}"

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


REPLY_HEADER = "Ampquiz-Reply"
RUN_HEADER = "Ampquiz-Run"
"""On a result: the run it answers."""
DEADLINE_HEADER = "Ampquiz-Deadline"
"""Epoch seconds after which nobody waits for the run: a worker drops it instead of running it."""
MSG_ID_HEADER = "Nats-Msg-Id"
"""On a run: its id, by which the server drops a copy published again (`DUPLICATE_WINDOW_S`)."""
SIGNATURE_HEADER = "Ampquiz-Signature"

RUN_HEADERS = frozenset({REPLY_HEADER, DEADLINE_HEADER, MSG_ID_HEADER, SIGNATURE_HEADER})
RESULT_HEADERS = frozenset({RUN_HEADER, SIGNATURE_HEADER})
STATUS_HEADERS = frozenset({SIGNATURE_HEADER})
"""The headers each message carries, each once, and no other (`app.runs.signing.canonical`): the
server and a client library read a repeated header differently (the server dedupes on the first
`Nats-Msg-Id`, nats-py keeps the last), and an unsigned header may change what the server does."""

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


def patience_s(wall_s: float) -> float:
    """How long a web process waits for a run with this wall limit, and so the deadline its
    request carries (a worker drops a request past it, unrun): each delivery may take the wall
    limit plus the lease margin, and a dead worker's run waits ACK_WAIT_S before its second."""
    return MAX_DELIVERIES * (wall_s + LEASE_MARGIN_S + ACK_WAIT_S) + 30


DUPLICATE_WINDOW_S = patience_s(MAX_LIMITS.wall_s) + 60
"""The server drops a run request whose id it saw this recently: longer than the latest deadline
a request can carry, so a signed request captured and published again is dropped by the server
while it could still be run, and by the workers once its deadline has passed. (With 120 s, a
request with a long wall limit could be replayed, and run again, between the two.) The server
forgets it on a restart: a worker keeps the ids it ran until their deadlines too
(`app.runs.worker.Seen`)."""
STREAM_MAX_AGE_S = DUPLICATE_WINDOW_S
"""A run older than any run's deadline leaves its stream, whoever published it (at most the
duplicate window, which the server requires)."""
LONGEST_DEADLINE_S = patience_s(MAX_LIMITS.wall_s) + 30
"""The furthest deadline a worker believes, the hosts' clocks differing by up to 30 s: what bounds
how long it keeps a run's id (`app.runs.worker.Seen`)."""
STREAM_MAX_MSGS = 10_000
STREAM_MAX_BYTES = 64 << 20
"""A stream's own bound: the server's memory, never the web's room (see above). Full (of anyone's
messages: only the web's role may publish runs, deploy/nats.conf), a run is refused with 503."""


class BrokerRefused(Exception):
    """The broker's URL has no credentials and nobody said that is allowed, or they cannot be used."""


INSECURE = "AMPQUIZ_BROKER_INSECURE=1"
NO_CREDENTIALS = (
    "AMPQUIZ_WORKERS_URL names a NATS server with no credentials: anyone who can reach it could "
    "read every learner's code and output, and fill or drain the workers' queue. Give the user and "
    "password of this role in the URL (nats://USER:PASSWORD@HOST:4222), a token "
    "(nats://TOKEN@HOST:4222) or AMPQUIZ_WORKERS_CREDS (a .creds or NKey seed file); for local "
    f"development only, {INSECURE} allows it."
)


@dataclass(frozen=True)
class Broker:
    """The NATS server, and how this process proves who it is there."""

    url: str
    creds: str = ""
    """A .creds file (JWT and NKey seed) or an NKey seed file (`AMPQUIZ_WORKERS_CREDS`)."""
    insecure: bool = False
    """No credentials, allowed for local development (`AMPQUIZ_BROKER_INSECURE=1`)."""

    @classmethod
    def of(cls, settings: Settings, url: str | None = None) -> Broker:
        return cls(url or settings.workers_url, settings.workers_creds, settings.broker_insecure)

    @property
    def authenticated(self) -> bool:
        """Credentials are given: a user (and password) or a token in the URL, or a creds file."""
        return bool(urlsplit(self.url).username) or bool(self.creds)

    def refusal(self) -> str | None:
        """Why this process must not use the broker (no credentials, unasked), or None."""
        if self.creds and not Path(self.creds).is_file():
            return f"AMPQUIZ_WORKERS_CREDS names {self.creds}, which is not a file"
        if not self.authenticated and not self.insecure:
            return NO_CREDENTIALS
        return None

    def where(self) -> str:
        """The URL without its credentials, for logs and /healthz."""
        parts = urlsplit(self.url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def options(self) -> dict[str, Any]:
        """nats-py's options for the credentials of `creds`."""
        if not self.creds:
            return {}
        if importlib.util.find_spec("nkeys") is None:  # what nats-py signs with, for either file
            raise BrokerRefused(
                "AMPQUIZ_WORKERS_CREDS needs the `nkeys` package: pip install 'nats-py[nkeys]'"
            )
        if "BEGIN NATS USER JWT" in Path(self.creds).read_text(errors="replace"):
            return {"user_credentials": self.creds}
        return {"nkeys_seed": self.creds}


class Headers(dict[str, str]):
    """A message's headers as nats-py parses them, saying whether a name came more than once."""

    repeated = False


class _Client(nats.aio.client.Client):
    """nats-py's client, marking a message whose headers repeat a name (nats-py keeps the last
    value only, the server reads the first: see `RUN_HEADERS`)."""

    async def _process_headers(self, headers: Any) -> dict[str, str] | None:
        parsed = await super()._process_headers(headers)
        if parsed is None or not headers:
            return parsed
        lines = bytes(headers).split(b"\r\n")[1:]  # past "NATS/1.0 ..."
        names = [line.split(b":", 1)[0].strip().lower() for line in lines if b":" in line]
        if len(names) == len(set(names)):
            return parsed
        marked = Headers(parsed)
        marked.repeated = True
        return marked


async def connect(broker: Broker, name: str, role: str, *, reconnect: bool = True) -> Any:
    """A NATS connection to the server `broker` names (its path, a deployment's name, is
    `Layout`'s), as `role` ("web" or "worker": its inboxes are `_INBOX.<role>.…`), that says what
    went wrong in one log line (nats-py's default prints a traceback for every failed attempt).
    Without `reconnect` (a one-off command) a server out of reach fails at once. BrokerRefused
    when the broker has no credentials and nobody said that is allowed."""
    refused = broker.refusal()
    if refused:
        raise BrokerRefused(refused)

    async def said(error: Exception) -> None:
        log.warning("NATS (%s): %s", name, error)

    options: dict[str, Any] = {"name": name, "error_cb": said, "connect_timeout": 3,
                               "inbox_prefix": f"_INBOX.{role}", **broker.options()}  # fmt: skip
    if reconnect:
        options.update(max_reconnect_attempts=-1, reconnect_time_wait=1)
    else:
        options.update(allow_reconnect=False, max_reconnect_attempts=1)
    nc = _Client()
    await nc.connect(servers=[server_url(broker.url)], **options)
    return nc


def consumer_name(device: str) -> str:
    return f"runs-{device}"


async def ensure_layout(js: JetStreamContext, layout: Layout) -> None:
    """Creates (or brings up to date) each device's stream and consumer; safe to call from every
    web process at once. (Only the web's role may: deploy/nats.conf.)"""
    for device in ("cpu", "cuda"):
        config = StreamConfig(
            name=layout.stream(device),
            subjects=[layout.run_subject(device)],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.MEMORY,
            max_msgs=STREAM_MAX_MSGS,
            max_bytes=STREAM_MAX_BYTES,
            max_msg_size=MAX_RUN_BYTES,
            discard=DiscardPolicy.NEW,
            max_age=STREAM_MAX_AGE_S,
            duplicate_window=DUPLICATE_WINDOW_S,
        )
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError as exc:
            if "overlap" in str(exc).lower():  # the single stream of the versions before
                raise RuntimeError(
                    f"the NATS server has a stream of an older ampquiz on {layout.run_subject(device)}: "
                    "restart it (the runs wait in memory) or delete that stream, then start again"
                ) from None
            await js.update_stream(config)  # exists with other settings: take ours
        consumer = ConsumerConfig(
            durable_name=consumer_name(device),
            filter_subject=layout.run_subject(device),
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_S,
            max_deliver=MAX_DELIVERIES,
            max_waiting=4096,
        )
        await js.add_consumer(layout.stream(device), consumer)


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
