"""Persistence of learners' attempts and review cards (SQLModel over SQLite or any SQLAlchemy URL).

Learners are anonymous: an id from a signed cookie. A learner row is written with the first
attempt, so browsing pages never writes. No FastAPI here: the CLI or a report can read the same
store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Index, bindparam, event, inspect, or_, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, create_engine, select


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; everything stored here is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Learner(SQLModel, table=True):
    id: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class Attempt(SQLModel, table=True):
    __table_args__ = (Index("ix_attempt_learner_submit", "learner_id", "submit_id", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    learner_id: str = Field(index=True, foreign_key="learner.id", max_length=64)
    question_id: str = Field(index=True, max_length=80)
    set_id: str = Field(max_length=120)
    topic: str = Field(max_length=80)
    kind: str = Field(max_length=20)
    answer: str
    """JSON: the picked choice indices (a list) or the predicted output (a string)."""
    correct: bool
    created_at: datetime = Field(default_factory=utcnow, index=True)
    fingerprint: str = Field(default="", max_length=16)
    """The question as it was answered (`QuestionBase.fingerprint`); empty in attempts stored
    before fingerprints were kept. A changed question does not inherit attempts at another."""
    submit_id: str | None = Field(default=None, max_length=64)
    """The form's one-time id: a double click or a replayed form stores one attempt."""
    seconds: float | None = Field(default=None)
    """How long the learner took, from the question's page to the answer, when known."""

    @property
    def answer_value(self) -> Any:
        return json.loads(self.answer)

    @property
    def when(self) -> datetime:
        return as_utc(self.created_at)


class ReviewCard(SQLModel, table=True):
    """A missed question's spaced-repetition card (see app.review); one per learner and question."""

    __tablename__ = "review_card"

    learner_id: str = Field(primary_key=True, foreign_key="learner.id", max_length=64)
    question_id: str = Field(primary_key=True, max_length=80)
    card: str
    """The scheduler's card, as its own JSON."""
    due: datetime = Field(index=True)
    lapses: int = 0
    """How many times the learner got it wrong."""
    fingerprint: str = Field(default="", max_length=16)
    """The question the card schedules; a card for another version of it is started afresh."""

    @property
    def due_utc(self) -> datetime:
        return as_utc(self.due)


@dataclass(frozen=True)
class LearnerData:
    """Everything one learner's pages need, read in one go."""

    attempts: list[Attempt]
    """Oldest first."""
    cards: dict[str, ReviewCard]


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers do not wait for the writer
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def make_engine(url: str) -> Engine:
    """An engine for `url`; for a SQLite file, its folder is created and WAL mode is on."""
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite"):
        in_memory = parsed.database in (None, "", ":memory:")
        if not in_memory:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # In memory, every connection would get its own empty database: share one.
        pool = {"poolclass": StaticPool} if in_memory else {}
        engine = create_engine(url, connect_args={"check_same_thread": False}, **pool)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def add_missing_columns(engine: Engine) -> list[str]:
    """Brings a database made by an earlier version up to date: adds the columns and indexes
    later versions added (every later column has a default, so old rows stay valid). Returns what
    it added. The only schema change ampquiz makes in place; nothing is ever dropped."""
    added = []
    have_tables = set(inspect(engine).get_table_names())
    with engine.begin() as conn:
        for table in SQLModel.metadata.sorted_tables:
            if table.name not in have_tables:
                continue
            have = {c["name"] for c in inspect(conn).get_columns(table.name)}
            for column in table.columns:
                if column.name in have:
                    continue
                kind = column.type.compile(engine.dialect)
                default = " NOT NULL DEFAULT ''" if not column.nullable else ""
                conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}{default}'))
                added.append(f"{table.name}.{column.name}")
            for index in table.indexes:
                index.create(conn, checkfirst=True)
    return added


class Store:
    """The one object the web layer talks to for persistence."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        SQLModel.metadata.create_all(self.engine)
        add_missing_columns(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def _session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def ping(self) -> bool:
        with self._session() as s:
            s.exec(select(1)).one()
        return True

    def record_attempt(
        self,
        learner_id: str,
        *,
        question_id: str,
        set_id: str,
        topic: str,
        kind: str,
        answer: Any,
        correct: bool,
        fingerprint: str = "",
        submit_id: str | None = None,
        seconds: float | None = None,
        review: ReviewUpdate | None = None,
        now: datetime | None = None,
    ) -> tuple[Attempt, bool]:
        """Stores an attempt (creating the learner on first use) and updates its review card.
        Returns the attempt and whether it is new: a `submit_id` already stored for this learner
        (a double click, a replayed form) returns the attempt it stored, and changes nothing."""
        if submit_id is not None:
            earlier = self.submitted(learner_id, submit_id)
            if earlier is not None:
                return earlier, False
        now = now or utcnow()
        try:
            with self._session() as s:
                if s.get(Learner, learner_id) is None:
                    s.add(Learner(id=learner_id, created_at=now))
                    s.flush()
                attempt = Attempt(
                    learner_id=learner_id,
                    question_id=question_id,
                    set_id=set_id,
                    topic=topic,
                    kind=kind,
                    answer=json.dumps(answer),
                    correct=correct,
                    created_at=now,
                    fingerprint=fingerprint,
                    submit_id=submit_id,
                    seconds=seconds,
                )
                s.add(attempt)
                if review is not None:
                    card = s.get(ReviewCard, (learner_id, question_id))
                    if card is None:
                        card = ReviewCard(learner_id=learner_id, question_id=question_id, card="", due=now)
                    elif card.fingerprint and card.fingerprint != fingerprint:
                        card.lapses = 0  # a card for another version of the question: start afresh
                    card.card, card.due, card.fingerprint = review.card_json, review.due, fingerprint
                    card.lapses += 0 if correct else 1
                    s.add(card)
                s.commit()
                return attempt, True
        except IntegrityError:
            # Two submits of one form raced past the check above: the other one was stored.
            earlier = self.submitted(learner_id, submit_id) if submit_id is not None else None
            if earlier is None:
                raise
            return earlier, False

    def submitted(self, learner_id: str, submit_id: str) -> Attempt | None:
        with self._session() as s:
            return s.exec(
                select(Attempt).where(Attempt.learner_id == learner_id, Attempt.submit_id == submit_id)
            ).first()

    def card(self, learner_id: str, question_id: str, fingerprint: str = "") -> ReviewCard | None:
        """The learner's review card for this version of the question (None for another's)."""
        with self._session() as s:
            card = s.get(ReviewCard, (learner_id, question_id))
        if card is not None and card.fingerprint and fingerprint and card.fingerprint != fingerprint:
            return None
        return card

    def question_state(
        self, learner_id: str, question_id: str, fingerprint: str = ""
    ) -> tuple[bool | None, datetime | None]:
        """(was the last attempt right, when the review card is due) for this version of one
        question: all a question page needs, in one cheap query without the ORM (it is the
        busiest page)."""
        with self.engine.connect() as conn:
            correct, due = conn.execute(
                _QUESTION_STATE, {"learner": learner_id, "question": question_id, "fingerprint": fingerprint}
            ).one()
        return (None if correct is None else bool(correct)), (
            as_utc(due) if due is not None else None
        )

    def all_attempts(self) -> list[Attempt]:
        """Every attempt of every learner, oldest first (item statistics, the attempts CSV)."""
        with self._session() as s:
            return list(s.exec(select(Attempt).order_by(Attempt.id)))

    def attempt(self, learner_id: str, attempt_id: int) -> Attempt | None:
        with self._session() as s:
            found = s.get(Attempt, attempt_id)
            return found if found is not None and found.learner_id == learner_id else None

    def learner_data(self, learner_id: str | None) -> LearnerData:
        if not learner_id:
            return LearnerData([], {})
        with self._session() as s:
            attempts = list(
                s.exec(select(Attempt).where(Attempt.learner_id == learner_id).order_by(Attempt.id))
            )
            cards = {
                c.question_id: c
                for c in s.exec(select(ReviewCard).where(ReviewCard.learner_id == learner_id))
            }
        return LearnerData(attempts, cards)


_SAME_VERSION = bindparam("fingerprint")
_QUESTION_STATE = select(
    select(Attempt.correct)
    .where(
        Attempt.learner_id == bindparam("learner"),
        Attempt.question_id == bindparam("question"),
        or_(Attempt.fingerprint == _SAME_VERSION, Attempt.fingerprint == ""),
    )
    .order_by(Attempt.id.desc())  # type: ignore[union-attr]
    .limit(1)
    .scalar_subquery(),
    select(ReviewCard.due)
    .where(
        ReviewCard.learner_id == bindparam("learner"),
        ReviewCard.question_id == bindparam("question"),
        or_(ReviewCard.fingerprint == _SAME_VERSION, ReviewCard.fingerprint == ""),
    )
    .scalar_subquery(),
)
"""Built once: SQLAlchemy then only looks the compiled form up in its cache."""


@dataclass(frozen=True)
class ReviewUpdate:
    """A review card's new state, computed by app.review and stored with the attempt."""

    card_json: str
    due: datetime
