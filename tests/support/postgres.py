"""The PostgreSQL server the tests use (a real one, on loopback), and what they do to it."""

from __future__ import annotations

import functools
import os

from sqlalchemy import Engine, create_engine, make_url, text

POSTGRES_SERVER = os.environ.get(
    "AMPQUIZ_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@functools.cache
def _admin() -> Engine:
    """The superuser's connection, kept for the run (a new one each time cost tens of
    milliseconds, twice for every test on a database of its own)."""
    return create_engine(
        POSTGRES_SERVER, isolation_level="AUTOCOMMIT", pool_size=1, pool_pre_ping=True
    )


def as_admin(*statements: str) -> None:
    """Runs `statements` on the test server as its superuser, in autocommit (CREATE DATABASE and
    DROP DATABASE cannot run in a transaction)."""
    with _admin().connect() as conn:
        for statement in statements:
            conn.execute(text(statement))


def drop_connections(url: str) -> int:
    """Ends every connection to `url`'s database, as a server restart would; returns how many."""
    with _admin().connect() as conn:
        return conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": make_url(url).database},
        ).scalar_one()
