"""Interviews and their events in the database (SQLModel, the store's engine).

An interview has two links. The candidate's token is kept as it is: the interviewer's page shows
it, to be shared. The interviewer's token is kept only as a hash (like the studio's sign-in
links): a copy of the database opens nobody's interviewer page. Everything that happens is an
event row, appended and never changed: the interviewer's page, a reconnect (`Last-Event-ID`) and
the report are all read from the same log, so an interview survives a restart.

Events are numbered within their interview (`seq`: 1, 2, ... in the order they were committed,
no gap), and what may happen only once (the start, more time, moving on from question 3, the
5th run of a question) is stored under a key unique in its interview (`once`): of requests that
race to do it, across web processes, one stores it and the others find it done (`append`).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Index, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, col, select

from app.store import Store, as_utc, utcnow

CONFIDENCES = (50, 75, 95)
"""The confidence a candidate states with a prediction, in percent."""


class Interview(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    candidate_token: str = Field(index=True, unique=True, max_length=64)
    host_hash: str = Field(index=True, unique=True, max_length=64)
    created_by: str = Field(max_length=64)
    questions: str
    """JSON, in order: a bank question's id, or an ad-hoc snippet's whole question (see
    `app.interview.snippets`), kept with the interview so a later edit of the bank changes nothing."""
    minutes: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: datetime | None = None

    @property
    def question_ids(self) -> list[str]:
        return [q if isinstance(q, str) else q["id"] for q in json.loads(self.questions)]

    @property
    def snippets(self) -> dict[str, dict[str, Any]]:
        """The ad-hoc snippet questions by id (bank questions are not here)."""
        return {q["id"]: q for q in json.loads(self.questions) if isinstance(q, dict)}

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class InterviewEvent(SQLModel, table=True):
    __tablename__ = "interview_event"
    __table_args__ = (
        Index("ix_interview_event_seq", "interview_id", "seq", unique=True),
        Index("ix_interview_event_once", "interview_id", "once", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    interview_id: int = Field(index=True, foreign_key="interview.id")
    seq: int
    """The event's number in its interview: 1, 2, ... in the order they were committed (`append`)."""
    once: str | None = Field(default=None, max_length=40)
    """The key of what may happen once in the interview ("extended", "next:2"), else None."""
    kind: str = Field(max_length=20)
    data: str
    """JSON payload; see `Event`."""
    at: datetime = Field(default_factory=utcnow)


@dataclass(frozen=True)
class Event:
    """One thing that happened, as the interviewer's page and the report read it. `id` is its
    number in the interview (`InterviewEvent.seq`: 1, 2, ... with no gap, in commit order), so it
    is also the live stream's `Last-Event-ID`: a stream that has sent N never misses N + 1."""

    id: int
    kind: str
    """created, opened, predicted, run, note, extended, finished, revoked."""
    data: dict[str, Any]
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "data": self.data, "at": self.at.isoformat()}


@dataclass(frozen=True)
class NewInterview:
    interview: Interview
    candidate_token: str
    host_token: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# SQLModel gives a table model its __table__ as it makes the class; its types leave it out.
INTERVIEWS = Interview.__table__  # type: ignore[attr-defined]
EVENTS = InterviewEvent.__table__  # type: ignore[attr-defined]

TRIES = 100
"""Numbers an append tries before it gives up: each failed try lost to another append that was
committed meanwhile, so this many only under a flood of events in one interview."""


def _event(row: InterviewEvent) -> Event:
    return Event(row.seq, row.kind, json.loads(row.data), as_utc(row.at))


def create(
    store: Store, question_ids: list[str | dict[str, Any]], *, by: str, minutes: int | None = None
) -> NewInterview:
    """A new interview over these questions: bank ids (checked against the bank by the caller) or
    ad-hoc snippet questions (`app.interview.snippets.snippet_question`)."""
    if not question_ids:
        raise ValueError("an interview needs at least one question")
    if minutes is not None and not 1 <= minutes <= 600:
        raise ValueError("the time limit is 1 to 600 minutes")
    candidate, host = secrets.token_urlsafe(24), secrets.token_urlsafe(32)
    with Session(store.engine, expire_on_commit=False) as s:
        row = Interview(
            candidate_token=candidate, host_hash=_hash(host), created_by=by,
            questions=json.dumps(question_ids), minutes=minutes,
        )  # fmt: skip
        s.add(row)
        s.flush()
        assert row.id is not None
        s.add(InterviewEvent(interview_id=row.id, seq=1, kind="created",
                             data=json.dumps({"questions": row.question_ids, "minutes": minutes, "by": by})))  # fmt: skip
        s.commit()
    return NewInterview(row, candidate, host)


TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""What `secrets.token_urlsafe` makes: anything else is no link of ours (and a NUL in it made
PostgreSQL refuse the query)."""


def by_candidate(store: Store, token: str) -> Interview | None:
    """The interview a candidate's link opens; None for an unknown or revoked link."""
    if not TOKEN.fullmatch(token):
        return None
    with Session(store.engine, expire_on_commit=False) as s:
        row = s.exec(select(Interview).where(Interview.candidate_token == token)).first()
    return None if row is None or row.revoked else row


def by_host(store: Store, token: str) -> Interview | None:
    """The interview an interviewer's link opens (revoked ones too: the report stays readable)."""
    if not TOKEN.fullmatch(token):
        return None
    with Session(store.engine, expire_on_commit=False) as s:
        return s.exec(select(Interview).where(Interview.host_hash == _hash(token))).first()


def revoke(store: Store, interview_id: int, now: datetime | None = None) -> bool:
    """Ends the candidate's link; False when it already was (of revokes at the same moment, one
    is True: the UPDATE changes the row only while it is not revoked)."""
    with store.transaction() as conn:
        done = conn.execute(
            update(INTERVIEWS)
            .where(INTERVIEWS.c.id == interview_id, INTERVIEWS.c.revoked_at.is_(None))
            .values(revoked_at=now or utcnow())
        )
    return done.rowcount == 1


def revoke_candidate_token(store: Store, token: str) -> bool:
    if not TOKEN.fullmatch(token):
        return False
    with Session(store.engine) as s:
        row = s.exec(select(Interview).where(Interview.candidate_token == token)).first()
    return row is not None and row.id is not None and revoke(store, row.id)


def append(
    store: Store,
    interview_id: int,
    kind: str,
    data: dict[str, Any],
    now: datetime | None = None,
    *,
    once: str | None = None,
) -> Event | None:
    """Stores one event, numbered next in its interview, and returns it (callers publish it only
    after this). `once`: the key of what may happen only once in the interview ("extended",
    "next:2"); None is returned when an event is stored under it already, and nothing is stored.

    The number is the interview's largest + 1, taken by the INSERT itself, under a unique
    (interview, seq). Two appends that take the same number at once (two web processes on
    PostgreSQL): the second's INSERT waits for the first to commit, then fails, and it tries the
    next number; so N + 1 is given only once N is committed, and a stream that has read up to N
    finds every later event after N. A second event under one `once` key fails the same way,
    and finds the first stored. On SQLite the writers take turns, and no try fails on a number."""
    at, text = now or utcnow(), json.dumps(data)
    for _ in range(TRIES):
        number = (
            select(func.coalesce(func.max(EVENTS.c.seq), 0) + 1)
            .where(EVENTS.c.interview_id == interview_id)
            .scalar_subquery()
        )
        add = (
            EVENTS.insert()
            .values(interview_id=interview_id, seq=number, once=once, kind=kind, data=text, at=at)
            .returning(EVENTS.c.seq)
        )
        try:
            with store.transaction() as conn:
                seq = conn.execute(add).scalar_one()
        except IntegrityError:
            if once is not None and stored(store, interview_id, once):
                return None
            continue  # another append took the number: the next is free once it committed
        return Event(seq, kind, json.loads(text), as_utc(at))
    raise RuntimeError(f"interview {interview_id}: no number for an event after {TRIES} tries")


def stored(store: Store, interview_id: int, once: str) -> bool:
    """Whether the interview has an event stored under the key `once`."""
    with store.reads.connect() as conn:
        found = conn.execute(
            select(EVENTS.c.seq).where(EVENTS.c.interview_id == interview_id, EVENTS.c.once == once)
        ).first()
    return found is not None


def events(store: Store, interview_id: int, after: int = 0) -> list[Event]:
    """The interview's events numbered after `after`, in their order."""
    with Session(store.engine) as s:
        rows = s.exec(
            select(InterviewEvent)
            .where(
                col(InterviewEvent.interview_id) == interview_id, col(InterviewEvent.seq) > after
            )
            .order_by(col(InterviewEvent.seq))
        )
        return [_event(r) for r in rows]
