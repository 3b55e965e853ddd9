"""The PostgreSQL server the tests use (a real one, on loopback), and what they do to it."""

from __future__ import annotations

import os

from sqlalchemy import create_engine, make_url, text

POSTGRES_SERVER = os.environ.get("AMPQUIZ_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def as_admin(*statements: str) -> None:
    """Runs `statements` on the test server as its superuser, in autocommit (CREATE DATABASE and
    DROP DATABASE cannot run in a transaction)."""
    admin = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        admin.dispose()


def drop_connections(url: str) -> int:
    """Ends every connection to `url`'s database, as a server restart would; returns how many."""
    admin = create_engine(POSTGRES_SERVER, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return conn.execute(
                text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = :db AND pid <> pg_backend_pid()"),
                {"db": make_url(url).database},
            ).scalar_one()
    finally:
        admin.dispose()
