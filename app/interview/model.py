"""Interviews and their events in the database (SQLModel, the store's engine).

An interview has two links. The candidate's token is kept as it is: the interviewer's page shows
it, to be shared. The interviewer's token is kept only as a hash (like the studio's sign-in
links): a copy of the database opens nobody's interviewer page. Everything that happens is an
event row, appended and never changed: the interviewer's page, a reconnect (`Last-Event-ID`) and
the report are all read from the same log, so an interview survives a restart.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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

    id: int | None = Field(default=None, primary_key=True)
    interview_id: int = Field(index=True, foreign_key="interview.id")
    kind: str = Field(max_length=20)
    data: str
    """JSON payload; see `Event`."""
    at: datetime = Field(default_factory=utcnow)


@dataclass(frozen=True)
class Event:
    """One thing that happened, as the interviewer's page and the report read it. `id` grows
    within an interview, so it is also the stream's `Last-Event-ID`."""

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


def ensure_tables(store: Store) -> None:
    # SQLModel gives a table model its __table__ as it makes the class; its types leave it out.
    store.make_tables(Interview.__table__, InterviewEvent.__table__)  # type: ignore[attr-defined]


def _event(row: InterviewEvent) -> Event:
    assert row.id is not None
    return Event(row.id, row.kind, json.loads(row.data), as_utc(row.at))


def create(
    store: Store, question_ids: list[str | dict[str, Any]], *, by: str, minutes: int | None = None
) -> NewInterview:
    """A new interview over these questions: bank ids (checked against the bank by the caller) or
    ad-hoc snippet questions (`app.interview.snippets.snippet_question`)."""
    if not question_ids:
        raise ValueError("an interview needs at least one question")
    if minutes is not None and not 1 <= minutes <= 600:
        raise ValueError("the time limit is 1 to 600 minutes")
    ensure_tables(store)
    candidate, host = secrets.token_urlsafe(24), secrets.token_urlsafe(32)
    with Session(store.engine, expire_on_commit=False) as s:
        row = Interview(
            candidate_token=candidate, host_hash=_hash(host), created_by=by,
            questions=json.dumps(question_ids), minutes=minutes,
        )  # fmt: skip
        s.add(row)
        s.flush()
        assert row.id is not None
        s.add(InterviewEvent(interview_id=row.id, kind="created",
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
    ensure_tables(store)
    with Session(store.engine, expire_on_commit=False) as s:
        row = s.exec(select(Interview).where(Interview.candidate_token == token)).first()
    return None if row is None or row.revoked else row


def by_host(store: Store, token: str) -> Interview | None:
    """The interview an interviewer's link opens (revoked ones too: the report stays readable)."""
    if not TOKEN.fullmatch(token):
        return None
    ensure_tables(store)
    with Session(store.engine, expire_on_commit=False) as s:
        return s.exec(select(Interview).where(Interview.host_hash == _hash(token))).first()


def revoke(store: Store, interview_id: int, now: datetime | None = None) -> bool:
    """Ends the candidate's link; False when it already was."""
    with Session(store.engine) as s:
        row = s.get(Interview, interview_id)
        if row is None or row.revoked:
            return False
        row.revoked_at = now or utcnow()
        s.add(row)
        s.commit()
        return True


def revoke_candidate_token(store: Store, token: str) -> bool:
    if not TOKEN.fullmatch(token):
        return False
    ensure_tables(store)
    with Session(store.engine) as s:
        row = s.exec(select(Interview).where(Interview.candidate_token == token)).first()
    return row is not None and row.id is not None and revoke(store, row.id)


def append(
    store: Store, interview_id: int, kind: str, data: dict[str, Any], now: datetime | None = None
) -> Event:
    """Stores one event and returns it with its id (callers publish it only after this)."""
    with Session(store.engine) as s:
        row = InterviewEvent(
            interview_id=interview_id, kind=kind, data=json.dumps(data), at=now or utcnow()
        )
        s.add(row)
        s.commit()
        s.refresh(row)
        return _event(row)


def events(store: Store, interview_id: int, after: int = 0) -> list[Event]:
    """The interview's events after the id `after`, oldest first."""
    with Session(store.engine) as s:
        rows = s.exec(
            select(InterviewEvent)
            .where(col(InterviewEvent.interview_id) == interview_id, col(InterviewEvent.id) > after)
            .order_by(col(InterviewEvent.id))
        )
        return [_event(r) for r in rows]
