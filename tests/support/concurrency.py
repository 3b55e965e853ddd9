"""The concurrency kit: two real web processes (`ampquiz serve` subprocesses) on one database, and
N requests sent to them at the same moment, split across both, for a test to check a rule that
must hold however requests race (a once-only transition, a count, a unique id).

One pair of servers per test module, on each database (`DATABASES`): a module says

    two_servers = pair_fixture()  # the bank and settings: pair_fixture(bank=..., env={...})

and its tests take `two_servers`, parametrised over SQLite and PostgreSQL, each a `Pair` whose
`at_once(n, send)` sends `send(client, i)` from n threads released together by a barrier, thread
i talking to server i % 2 over a connection opened beforehand. `Pair.store()` opens the same
database in the test, to set things up and to read what the requests left; `at_once(n, work)`
races plain calls the same way (a CLI command's, say).
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sqlalchemy import make_url

from app.store import Store
from tests.support.postgres import POSTGRES_SERVER, as_admin
from tests.support.server import BANK, Server

DATABASES = ("sqlite", "postgresql")
SECRET = secrets.token_urlsafe(32)
"""Both servers sign cookies with the same key: a cookie one set is good on the other."""

T = TypeVar("T")


def at_once(
    n: int, work: Callable[[int], T], *, prepare: Callable[[int], Any] | None = None
) -> list[T]:
    """`work(i)` for i in 0..n-1, each in a thread of its own, all released at the same moment
    (after `prepare(i)`, when given, has run in every thread). Results in i's order; the first
    exception any raised is raised here, after all have ended."""
    barrier = threading.Barrier(n)

    def one(i: int) -> T:
        if prepare is not None:
            prepare(i)
        barrier.wait(timeout=60)
        return work(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        return [f.result() for f in futures]


@dataclass
class Pair:
    """Two `ampquiz serve` processes (`--processes 1` each) on the database at `url`."""

    servers: tuple[Server, Server]
    url: str
    kind: str
    """"sqlite" or "postgresql"."""
    _store: Store | None = field(default=None, repr=False)

    def store(self) -> Store:
        """The servers' database, opened in the test (kept open until the module ends)."""
        if self._store is None:
            self._store = Store(self.url)
        return self._store

    def client(
        self, i: int = 0, cookies: httpx.Cookies | dict[str, str] | None = None
    ) -> httpx.Client:
        """A client of server i % 2 (redirects not followed: a 303 is what a form's POST says)."""
        return httpx.Client(base_url=self.servers[i % 2].url, cookies=cookies, timeout=120)

    def at_once(
        self,
        n: int,
        send: Callable[[httpx.Client, int], httpx.Response],
        cookies: httpx.Cookies | dict[str, str] | None = None,
    ) -> list[httpx.Response]:
        """`send(client, i)` from n threads at the same moment, thread i to server i % 2, each on
        a connection it opened (a GET of /healthz) before the barrier, so the requests leave
        together; every response is read whole. `cookies`: every client's (one learner's)."""
        clients = [self.client(i, cookies) for i in range(n)]
        try:
            return at_once(
                n,
                lambda i: send(clients[i], i),
                prepare=lambda i: clients[i].get("/healthz").raise_for_status(),
            )
        finally:
            for c in clients:
                c.close()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


@contextmanager
def database(kind: str, folder: Path) -> Iterator[str]:
    """A fresh database of `kind` for one pair: a SQLite file in `folder`, or a PostgreSQL
    database of its own (in a time zone other than UTC, as the other PostgreSQL tests), dropped
    after."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'data' / 'ampquiz.db'}"
        return
    name = f"ampquiz_race_{uuid.uuid4().hex[:12]}"
    as_admin(
        f'CREATE DATABASE "{name}"', f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'"
    )
    try:
        yield make_url(POSTGRES_SERVER).set(database=name).render_as_string(hide_password=False)
    finally:
        as_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def running_pair(kind: str, url: str, folder: Path, bank: Path = BANK,
                 env: dict[str, str] | None = None) -> Iterator[Pair]:  # fmt: skip
    """Two servers on `url`, started side by side (each starts its own sandbox pool), stopped
    after. The database is made first, by a store opened here: the two servers then find it at
    the head."""
    Store(url).close()
    servers = []
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        server = Server(folder / name, bank=bank)
        server.env.update(
            {"AMPQUIZ_DATABASE_URL": url, "AMPQUIZ_SECRET_KEY": SECRET, **(env or {})}
        )
        servers.append(server)
    pair = Pair((servers[0], servers[1]), url, kind)
    try:
        at_once(2, lambda i: servers[i].start())
        yield pair
    finally:
        pair.close()
        for server in servers:  # one that never started is stopped as well (it may be starting)
            server.stop()


def pair_fixture(bank: Path = BANK, env: dict[str, str] | None = None) -> Any:
    """A module-scoped fixture: a `Pair` on each of `DATABASES`, with `bank` and more AMPQUIZ_*
    settings in `env`. Assign it to a name in the test module (the fixture's name)."""

    @pytest.fixture(scope="module", params=DATABASES)
    def pair(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Pair]:
        folder = tmp_path_factory.mktemp(f"pair-{request.param}")
        with (
            database(request.param, folder) as url,
            running_pair(request.param, url, folder, bank, env) as made,
        ):
            yield made

    return pair
