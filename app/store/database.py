"""The database under the store: engines (SQLite's pragmas, pooled connections), a second try
after a dropped connection, the schema's turn (one process at a time migrates it: the
migrations themselves are `app.store.migrate`'s), and SQLite's writers taking turns across
threads and processes. `app.store.repository` is what the rest of the app calls.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import create_engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers do not wait for the writer
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


POOLED = 12
"""Connections each process keeps open. More than the threads that reach the database at once in
a busy process (the event loop's default executor: cores + 4): SQLAlchemy's default of 5 made the
6th a new connection for every request, closed after it (for SQLite, a file opened, its pragmas
set and its schema parsed again; for PostgreSQL, a new backend)."""


AUTOCOMMIT_POOLED = 4
"""Connections each process keeps for PostgreSQL's single statements (`make_engine(...,
autocommit=True)`): the page threads (two there) and a health check's ping."""


def make_engine(url: str, *, autocommit: bool = False) -> Engine:
    """An engine for `url`; for a SQLite file, its folder is created and WAL mode is on.

    `autocommit` (a server database): connections in autocommit for good, for single statements
    (reads, an answer's one statement): one round trip per statement, where a transaction adds a BEGIN before it and a ROLLBACK when the
    connection goes back to the pool. Set per connection instead (`execution_options`), each
    checkout and checkin switched the driver's mode back and forth: four calls into psycopg and
    ~20 us of CPU a read, a third of what the query itself costs (0.085 -> 0.063 ms a
    `SELECT 1` on PostgreSQL, pool included)."""
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite"):
        in_memory = parsed.database in (None, "", ":memory:")
        if parsed.database and not in_memory:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # In memory, every connection would get its own empty database: share one.
        pool = (
            {"poolclass": StaticPool}
            if in_memory
            else {"pool_size": POOLED, "max_overflow": 3 * POOLED}
        )
        engine = create_engine(url, connect_args={"check_same_thread": False}, **pool)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # No `pool_pre_ping`: its round trip on every checkout cost ~0.3 ms of CPU per request. A
    # connection the server dropped (a restart) fails once instead; SQLAlchemy then replaces every
    # pooled connection, and the store's own calls try once more (`reconnecting`).
    connect_args = _connect_timeout(parsed)
    if autocommit:  # nothing to roll back on return: there is never a transaction open
        return create_engine(url, pool_size=AUTOCOMMIT_POOLED, max_overflow=AUTOCOMMIT_POOLED, isolation_level="AUTOCOMMIT",
                             pool_reset_on_return=None, connect_args=connect_args)  # fmt: skip
    return create_engine(url, pool_size=POOLED, max_overflow=POOLED, connect_args=connect_args)


CONNECT_TIMEOUT_S = 10
"""How long opening a connection to PostgreSQL may take, unless the URL says
(`?connect_timeout=N`) or libpq's own settings may (`PGCONNECT_TIMEOUT`, a service file). libpq's
default is to wait for good: a server that accepts the connection but never answers (stuck, or a
port that is not PostgreSQL's) held `serve` at start-up with no word, and later each page thread
that needed a new connection, so every page hung behind it."""

_LIBPQ_DRIVERS = ("psycopg", "psycopg2")
"""Drivers that hand `connect_timeout` to libpq (pg8000, say, has no such argument)."""


def _connect_timeout(parsed: Any) -> dict[str, Any]:
    """The connect timeout to add, where nothing else says one: an argument given here wins over
    the URL's options and libpq's environment, so it is left out wherever those may say."""
    if parsed.get_backend_name() != "postgresql" or parsed.get_driver_name() not in _LIBPQ_DRIVERS:
        return {}
    if {"connect_timeout", "service"} & set(parsed.query) or {
        "PGCONNECT_TIMEOUT",
        "PGSERVICE",
    } & set(os.environ):
        return {}
    return {"connect_timeout": CONNECT_TIMEOUT_S}


class SchemaOutOfDate(Exception):
    """The database's schema is not this ampquiz's, and the store may not change it (see
    `app.store.migrate`); the message names the database and what to run."""


UNOPENABLE = (SQLAlchemyError, OSError, ImportError, SchemaOutOfDate)
"""What opening a database raises when it cannot be opened: the driver's error, a SQLite folder
that cannot be made, a URL SQLAlchemy cannot read, a driver that is not installed, a schema the
store may not bring up to date."""


def unopenable(url: str, exc: BaseException) -> str:
    """Why the database at `url` could not be opened, in a line (the driver's own first line),
    the URL's password hidden."""
    if isinstance(exc, SchemaOutOfDate):  # says which database, and what to run
        return str(exc)
    reason = str(exc.orig if isinstance(exc, DBAPIError) else exc).strip().splitlines()[0]
    return f"cannot open the database {shown_url(url)}: {reason}"


def shown_url(url: str) -> str:
    """A database URL as it may be printed: a password hidden, in the URL's user part or among
    its options (`?password=…`)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return "(a URL SQLAlchemy cannot read)"
    hidden = {
        k: "***"
        for k in parsed.query
        if any(word in k.lower() for word in ("pass", "secret", "token", "key"))
    }
    return (
        parsed.update_query_dict(hidden)
        .render_as_string(hide_password=True)
        .replace("%2A%2A%2A", "***")
    )


F = TypeVar("F", bound=Callable[..., Any])


def reconnecting(method: F) -> F:
    """Calls `method` again, once, when the database dropped its connection (the server
    restarted): the pool has then thrown its connections away, so the second call gets a fresh
    one. Safe to repeat: the failed call's transaction was never committed (a recorded attempt's
    `submit_id` guards the rare commit whose answer was lost)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            return method(*args, **kwargs)

    return call  # type: ignore[return-value]


SCHEMA_LOCK = 0x616D_7071_7569_7A  # "ampquiz"
"""PostgreSQL's advisory lock taken while the schema is made or brought up to date."""


@contextlib.contextmanager
def schema_turn(engine: Engine) -> Iterator[None]:
    """One process at a time makes or upgrades the schema: `serve --processes N`, or several
    servers started together against one new database, each look for the tables and make the
    missing ones at the same moment, and a CREATE for a table another process made between that
    look and the CREATE fails ("already exists"; on PostgreSQL a duplicate `pg_type` row), and
    a summary table filled from the attempts would be filled twice. Whoever comes second waits,
    then looks, and finds the tables made. PostgreSQL: an advisory lock held by a connection of
    its own; a SQLite file: the writers' turn (`SqliteWriterTurn`); in memory there is one
    process only."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as holder:
            holder.execute(select(func.pg_advisory_lock(SCHEMA_LOCK)))
            try:
                yield
            finally:
                holder.execute(select(func.pg_advisory_unlock(SCHEMA_LOCK)))
                holder.commit()
    elif engine.dialect.name == "sqlite":
        turn = SqliteWriterTurn(engine.url.database)
        try:
            with turn:
                yield
        finally:
            turn.close()
    else:
        yield


class SqliteWriterTurn:
    """One writer at a time on a SQLite file, across the threads and the processes of the server
    (`serve --processes N`), each waiting in the kernel for its turn.

    SQLite itself takes one writer at a time, but a writer that finds the file locked polls for
    it with sleeps of up to 100 ms (busy_timeout): with a thread per request and two processes,
    an answer could sleep there long after the file was free. Here a writer takes a thread lock, then an exclusive `flock` on a file beside the database, and has
    its turn the moment the previous writer commits. An in-memory database (one process) needs
    only the thread lock."""

    def __init__(self, database: str | None) -> None:
        self._thread_turn = threading.Lock()
        self._path = (
            None if not database or database == ":memory:" else Path(database + "-writer.lock")
        )
        self._fd: int | None = None
        self._fd_pid = 0

    def _lock_file(self) -> int | None:
        if self._path is None:
            return None
        if self._fd is None or self._fd_pid != os.getpid():  # a forked process opens its own
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._fd_pid = os.getpid()
        return self._fd

    def __enter__(self) -> None:
        self._thread_turn.acquire()
        try:
            fd = self._lock_file()
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            self._thread_turn.release()
            raise

    def __exit__(self, *_exc: object) -> None:
        try:
            if self._fd is not None and self._fd_pid == os.getpid():
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._thread_turn.release()

    def close(self) -> None:
        if self._fd is not None and self._fd_pid == os.getpid():
            os.close(self._fd)
        self._fd = None
