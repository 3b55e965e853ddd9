"""Revision 0002 on a database that holds interviews and sign-ins (SQLite and PostgreSQL): the
events already stored are numbered in their interview, in the order they were stored, and new
ones follow on; once-only keys start empty; a session opened before the upgrade (its cookie names
the link's hash) is still signed in, and a link not yet spent still signs in once."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from app import instructors
from app.interview import model
from app.store import Store, migrate
from app.store.database import make_engine

AT = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'ampquiz.db'}"
    return request.getfixturevalue("postgres_url")


def _to(url: str, revision: str, *, down: bool = False) -> None:
    engine = make_engine(url)
    try:
        with migrate.migrating(engine) as conn:
            (command.downgrade if down else command.upgrade)(migrate.config(conn), revision)
    finally:
        engine.dispose()


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rows_of_the_first_revision(url: str) -> None:
    """Two interviews whose events were stored in turns, an instructor, a spent link (its
    session open) and a fresh one, written as revision 0001 held them."""
    tables = migrate.first_schema().tables
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for n in (1, 2):
            conn.execute(tables["interview"].insert().values(
                id=n, candidate_token=f"cand{n}", host_hash=_hash(f"host{n}"), created_by="ida",
                questions=json.dumps(["q1"]), minutes=10, created_at=AT, revoked_at=None,
            ))  # fmt: skip
        for i, (interview, kind) in enumerate([(1, "created"), (2, "created"), (1, "opened"), (2, "opened"),
                                                (2, "extended"), (1, "extended"), (1, "extended")]):  # fmt: skip
            conn.execute(tables["interview_event"].insert().values(
                interview_id=interview, kind=kind, data=json.dumps({"i": i}), at=AT + timedelta(seconds=i),
            ))  # fmt: skip
        conn.execute(tables["instructor"].insert().values(name="ida", created_at=AT))
        later = datetime.now(UTC) + timedelta(hours=1)
        conn.execute(tables["sign_in_link"].insert(), [
            {"token_hash": _hash("spent"), "name": "ida", "expires_at": later, "used_at": AT},
            {"token_hash": _hash("fresh"), "name": "ida", "expires_at": later, "used_at": None},
        ])  # fmt: skip
    engine.dispose()


def test_the_revision_numbers_stored_events_and_keeps_open_sessions(url: str) -> None:
    _to(url, migrate.FIRST)
    _rows_of_the_first_revision(url)
    _to(url, "0002")
    store = Store(url)
    try:
        first, second = model.events(store, 1), model.events(store, 2)
        assert [(e.id, e.kind, e.data["i"]) for e in first] == [
            (1, "created", 0), (2, "opened", 2), (3, "extended", 5), (4, "extended", 6),
        ]  # fmt: skip
        assert [(e.id, e.kind) for e in second] == [(1, "created"), (2, "opened"), (3, "extended")]
        # A key is unique from now on; what was stored before has none (two extensions stay).
        assert model.append(store, 2, "extended", {"seconds": 300}, once="extended") is not None
        assert model.append(store, 2, "extended", {"seconds": 300}, once="extended") is None
        assert [e.id for e in model.events(store, 2, after=3)] == [4]
        assert model.events(store, 1, after=2)[0].id == 3  # read after a number, as a reconnect

        # The cookie of a session opened before names the link's hash: still signed in.
        assert instructors.in_session(store, "ida", _hash("spent"))
        signed = instructors.sign_in(store, "fresh")
        assert signed is not None and signed.session != _hash("fresh")
        assert instructors.in_session(store, "ida", signed.session)
        assert instructors.sign_in(store, "fresh") is None  # spent now
        instructors.end_session(store, _hash("spent"))
        assert not instructors.in_session(store, "ida", _hash("spent"))
        assert instructors.in_session(store, "ida", signed.session)
    finally:
        store.close()

    _to(url, migrate.FIRST, down=True)  # and back: the first revision's rows are all there
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM interview_event")).scalar_one() == 8
        assert "seq" not in {c["name"] for c in sa.inspect(conn).get_columns("interview_event")}
    engine.dispose()
