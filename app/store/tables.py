"""The tables of learners' attempts, review cards and kept question runs (SQLModel); `app.store.repository`
reads and writes them (and re-exports them, where the rest of the app imports them from)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; everything stored here is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class AttemptValues:
    """What an attempt's stored columns mean, for the table's objects and the store's plain rows
    (`app.store.rows.AttemptRow`) alike: the answer as given, and its time in UTC."""

    __slots__ = ()  # (no annotations here: SQLModel would take them as the table's first fields)

    if TYPE_CHECKING:  # the columns the tables declare
        answer: str
        created_at: datetime

    @property
    def answer_value(self) -> Any:
        return json.loads(self.answer)

    @property
    def when(self) -> datetime:
        return as_utc(self.created_at)


class Learner(SQLModel, table=True):
    id: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class Attempt(SQLModel, AttemptValues, table=True):
    __table_args__ = (
        Index("ix_attempt_learner_submit", "learner_id", "submit_id", unique=True),
        # A learner's attempts at one question, newest last: the question page's one query, and
        # the progress page's last answer per question, read only that learner's rows.
        Index("ix_attempt_learner_question", "learner_id", "question_id", "id"),
    )

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


class LastAnswer(SQLModel, table=True):
    """Each learner's last attempt at each version of each question, kept with every attempt
    (`Store.record_attempt`): a progress page reads one row per question answered, where
    grouping the attempts themselves cost it a scan of every attempt the learner ever made."""

    __tablename__ = "last_answer"

    learner_id: str = Field(primary_key=True, max_length=64)
    question_id: str = Field(primary_key=True, max_length=80)
    fingerprint: str = Field(primary_key=True, default="", max_length=16)
    attempt_id: int
    correct: bool


class TopicScore(SQLModel, table=True):
    """Each learner's attempts and right attempts per topic (the attempt's topic when it was
    made), kept with every attempt, for the same reason as `LastAnswer`."""

    __tablename__ = "topic_score"

    learner_id: str = Field(primary_key=True, max_length=64)
    topic: str = Field(primary_key=True, max_length=80)
    attempts: int = 0
    right_attempts: int = 0


class QuestionRun(SQLModel, table=True):
    """A question's run, as the question-run cache made it (`app.verify.question_runs`): kept here so
    every web process of the server, and the server after a restart, reuses it instead of
    running the same code again."""

    __tablename__ = "question_run"

    key: str = Field(primary_key=True, max_length=64)
    """Hash of the code, the device asked for and the environment it ran in."""
    result: str
    """`RunResult.to_json()`."""
    created_at: datetime = Field(default_factory=utcnow)
