"""Persistence of learners' attempts and review cards (SQLModel over SQLite or any SQLAlchemy URL).

Learners are anonymous: an id from a signed cookie. A learner row is written with the first
attempt, so browsing pages never writes. No FastAPI here: the CLI or a report can read the same
store.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, func, inspect, literal_column, or_
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, SQLModel, select

from app.database import (
    DriverQuery,
    DriverWrite,
    SqliteWriterTurn,
    add_missing_columns,
    make_engine,
    reconnecting,
    schema_turn,
)
from app.store_rows import AttemptRow, CardRow, LearnerData, QuestionState, ReviewUpdate
from app.tables import (
    Attempt,
    LastAnswer,
    Learner,
    QuestionRun,
    ReviewCard,
    TopicScore,
    as_utc,
    utcnow,
)

__all__ = [
    "Attempt", "AttemptRow", "CardRow", "LastAnswer", "Learner", "LearnerData", "QuestionRun", "QuestionState",
    "ReviewCard", "ReviewUpdate", "Store", "TopicScore", "as_utc", "utcnow",
]  # fmt: skip


class Store:
    """The one object the web layer talks to for persistence.

    The learner's hot paths (a question's state, an answer, the progress page) are SQLAlchemy Core
    statements built once at import, one connection per call, no ORM objects: the ORM's session
    and identity map cost more CPU than the queries. Every method blocks for the database's round
    trip, so the web calls them from worker threads, never on its event loop."""

    KNOWN_LEARNERS = 100_000
    """Learners whose row this process saw written, so their next attempt skips that INSERT
    (learner rows are never deleted)."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        with schema_turn(self.engine):
            had = set(inspect(self.engine).get_table_names())
            SQLModel.metadata.create_all(self.engine)
            add_missing_columns(self.engine)
            _fill_summaries(self.engine, missing={_LAST.name, _TOPICS.name} - had)
        self._made = set(SQLModel.metadata.tables)
        """The tables this store made or found (those of every model imported before it)."""
        # Reads on PostgreSQL, and its one-statement answers, have an engine of their own, in
        # autocommit (see `make_engine`). (SQLite's driver begins transactions only for writes.)
        postgres = self.engine.dialect.name == "postgresql"
        self.reads = make_engine(url, reads_only=True) if postgres else self.engine
        self._add_learner = _insert_ignoring_duplicates(self.engine, _LEARNER)
        self._add_run = _insert_ignoring_duplicates(self.engine, _RUNS, key="key")
        self._keep_last = _upsert(self.engine, _LAST, ("learner_id", "question_id", "fingerprint"), lambda new: {
            "attempt_id": new.attempt_id, "correct": new.correct,
        })  # fmt: skip
        self._count_topic = _upsert(self.engine, _TOPICS, ("learner_id", "topic"), lambda new: {
            "attempts": _TOPICS.c.attempts + new.attempts, "right_attempts": _TOPICS.c.right_attempts + new.right_attempts,
        })  # fmt: skip
        # Recording an answer, on the driver's cursor (see DriverWrite).
        self._write_learner = DriverWrite(self.engine, self._add_learner, columns=("id", "created_at"))
        self._write_attempt = DriverWrite(self.engine, _ADD_ATTEMPT, columns=_ATTEMPT_COLUMNS, returning=_A.id)
        self._write_last = DriverWrite(self.engine, self._keep_last, columns=("learner_id", "question_id", "fingerprint", "attempt_id", "correct"))
        self._write_topic = DriverWrite(self.engine, self._count_topic, columns=("learner_id", "topic", "attempts", "right_attempts"))
        self._write_new_card, self._write_card = DriverWrite(self.engine, _ADD_CARD), DriverWrite(self.engine, _UPDATE_CARD)
        self._card_of = DriverQuery(self.engine, _CARD)
        self._answer_at_once = (
            (DriverWrite(self.engine, _answer_statement(with_card=True), returns_value=True),
             DriverWrite(self.engine, _answer_statement(with_card=False), returns_value=True))
            if postgres else None
        )  # fmt: skip
        """PostgreSQL's one statement for an answer, with and without a card to write."""
        self._known_learners: set[str] = set()
        # The learner's busiest reads, on the driver's cursor (see DriverQuery).
        self._question_state, self._attempt_by_id, self._latest, self._by_topic, self._cards, self._recent = (
            DriverQuery(self.engine, q) for q in (_QUESTION_STATE, _ATTEMPT, _LATEST, _BY_TOPIC, _CARDS, _RECENT)
        )
        self._writer: contextlib.AbstractContextManager[Any] = (
            SqliteWriterTurn(self.engine.url.database) if self.engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )

    @property
    def useful_threads(self) -> int:
        """How many threads gain from calling this store at once (the web's page threads).

        SQLite: one. Its writers take turns anyway, and its driver lets go of the GIL around every
        row it steps through, so with more threads each row became a hand-over of the GIL between
        threads: the event loop's default pool (cores + 4 threads) cost 1.6-1.75 ms of CPU per
        learner request where one thread cost 1.05-1.35 (bench/learners.py's round, 50 learners,
        one process). PostgreSQL: two, so one thread's Python runs while the other waits for a
        round trip (1.57 ms against 1.63 with one and 1.73 with four, same round)."""
        return 1 if self.engine.dialect.name == "sqlite" else 2

    def make_tables(self, *tables: Any) -> None:
        """Makes those of `tables` this store has not made yet (a model imported after it was
        opened: the interviews', the instructors'), once per process, in the schema's turn."""
        missing = [t for t in tables if t.name not in self._made]
        if missing:
            with schema_turn(self.engine):
                SQLModel.metadata.create_all(self.engine, tables=missing)
            self._made.update(t.name for t in missing)

    def close(self) -> None:
        if isinstance(self._writer, SqliteWriterTurn):
            self._writer.close()
        self.engine.dispose()
        if self.reads is not self.engine:
            self.reads.dispose()

    def _session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def ping(self) -> bool:
        """Whether the database answers (a dropped connection is replaced first, as for any call)."""
        try:
            return self._ping()
        except DBAPIError:
            return False

    @reconnecting
    def _ping(self) -> bool:
        with self.engine.connect() as conn:
            conn.execute(select(1)).one()
        return True

    @reconnecting
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
        reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None = None,
        now: datetime | None = None,
    ) -> tuple[AttemptRow, bool]:
        """Stores an attempt (creating the learner on first use) and updates its review card,
        atomically (one transaction on SQLite, one statement on PostgreSQL: `_record_at_once`).
        Returns the attempt and whether it is new: a `submit_id` already stored for this learner
        (a double click, a replayed form) returns the attempt it stored, and changes nothing.
        `reschedule`, when given, computes the card's update from the card as stored (None, or
        another version's card: start afresh), read just before the writes."""
        now = now or utcnow()
        values = {
            "learner_id": learner_id, "question_id": question_id, "set_id": set_id, "topic": topic,
            "kind": kind, "answer": json.dumps(answer), "correct": correct, "created_at": now,
            "fingerprint": fingerprint, "submit_id": submit_id, "seconds": seconds,
        }  # fmt: skip
        key = {"learner": learner_id, "question": question_id}
        try:
            if self._answer_at_once is not None:
                attempt_id = self._record_at_once(values, key, review, reschedule)
            else:
                with self._writer, self.engine.begin() as conn:
                    # A submit already stored is found by the unique (learner, submit) index: the
                    # attempt's INSERT fails, everything here rolls back, and the handler below
                    # reads the stored one (no SELECT before every answer for the rare replay).
                    stored = self._card_of.rows(conn, key)
                    card = _card(stored[0]) if stored else None
                    card_row = _card_write(card, review, reschedule, values, key)
                    if learner_id not in self._known_learners:
                        self._write_learner.run(conn, {"id": learner_id, "created_at": now})
                    attempt_id = self._write_attempt.run(conn, values)
                    who = {"learner_id": learner_id, "question_id": question_id, "fingerprint": fingerprint}
                    self._write_last.run(conn, {**who, "attempt_id": attempt_id, "correct": correct})
                    self._write_topic.run(conn, {"learner_id": learner_id, "topic": topic, "attempts": 1,
                                                 "right_attempts": int(correct)})  # fmt: skip
                    if card_row is not None:
                        (self._write_card if card is not None else self._write_new_card).run(conn, card_row)
            if len(self._known_learners) >= self.KNOWN_LEARNERS:
                self._known_learners.clear()  # a simple bound: their next attempt inserts again
            self._known_learners.add(learner_id)
            return AttemptRow(id=attempt_id, **values), True
        except IntegrityError:
            # Two submits of one form raced past the check above: the other one was stored.
            earlier = self.submitted(learner_id, submit_id) if submit_id is not None else None
            if earlier is None:
                raise
            return earlier, False

    def _record_at_once(self, values: dict[str, Any], key: dict[str, str], review: ReviewUpdate | None,
                        reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None) -> int:  # fmt: skip
        """PostgreSQL: the answer in two round trips, each a statement of its own in autocommit:
        the card's read, then the attempt with the learner's last answer, topic score and card
        written by one statement (`_answer_statement`), where a transaction of single statements
        took seven (BEGIN, the read, four writes, COMMIT). One statement is atomic: when the
        attempt's INSERT fails (a replayed submit), nothing of it is written."""
        assert self._answer_at_once is not None
        with self.reads.connect() as conn:
            stored = self._card_of.rows(conn, key)
            card = _card(stored[0]) if stored else None
            card_row = _card_write(card, review, reschedule, values, key)
            if values["learner_id"] not in self._known_learners:
                self._write_learner.run(conn, {"id": values["learner_id"], "created_at": values["created_at"]})
            with_card, without_card = self._answer_at_once
            if card_row is None:
                return without_card.run(conn, {**values, "right_attempts": int(values["correct"])})
            return with_card.run(conn, {**values, "right_attempts": int(values["correct"]), "card": card_row["card"],
                                        "due": card_row["due"], "lapses": card_row["lapses"]})  # fmt: skip

    @reconnecting
    def submitted(self, learner_id: str, submit_id: str) -> AttemptRow | None:
        with self.reads.connect() as conn:
            row = conn.execute(_BY_SUBMIT, {"learner": learner_id, "submit": submit_id}).first()
        return _attempt(row) if row is not None else None

    @reconnecting
    def card(self, learner_id: str, question_id: str, fingerprint: str = "") -> CardRow | None:
        """The learner's review card for this version of the question (None for another's)."""
        with self.reads.connect() as conn:
            row = conn.execute(_CARD, {"learner": learner_id, "question": question_id}).first()
        card = _card(row) if row is not None else None
        if card is not None and card.fingerprint and fingerprint and card.fingerprint != fingerprint:
            return None
        return card

    @reconnecting
    def question_state(
        self, learner_id: str, question_id: str, fingerprint: str = "", attempt_id: int | None = None
    ) -> QuestionState:
        """Whether the last attempt at this version of one question was right, and when its review
        card is due: all a question page needs, in one cheap query (it is the busiest page). With
        `attempt_id`, that attempt is read too (the result page), on the same connection."""
        with self.reads.connect() as conn:
            ((correct, due),) = self._question_state.rows(
                conn, {"learner": learner_id, "question": question_id, "fingerprint": fingerprint}
            )
            attempt = self._attempt_on(conn, learner_id, attempt_id) if attempt_id is not None else None
        return QuestionState(
            None if correct is None else bool(correct),
            as_utc(due) if due is not None else None,
            attempt,
        )

    def all_attempts(self) -> list[Attempt]:
        """Every attempt of every learner, oldest first (item statistics, the attempts CSV)."""
        with self._session() as s:
            return list(s.exec(select(Attempt).order_by(Attempt.id)))

    @reconnecting
    def attempt(self, learner_id: str, attempt_id: int) -> AttemptRow | None:
        with self.reads.connect() as conn:
            return self._attempt_on(conn, learner_id, attempt_id)

    def _attempt_on(self, conn: Any, learner_id: str, attempt_id: int) -> AttemptRow | None:
        """Attempt `attempt_id` when it is this learner's, read on `conn`."""
        found = self._attempt_by_id.rows(conn, {"id": attempt_id, "learner": learner_id})
        return _attempt(found[0]) if found else None

    @reconnecting
    def attempts_since(self, learner_id: str, since: datetime) -> list[AttemptRow]:
        """The learner's attempts made at or after `since`, oldest first (a review session's)."""
        with self.reads.connect() as conn:
            rows = conn.execute(_SINCE, {"learner": learner_id, "since": since}).all()
        return [_attempt(r) for r in rows]

    @reconnecting
    def stored_run(self, key: str) -> str | None:
        """A question run kept by `keep_run` (its JSON), or None."""
        with self.reads.connect() as conn:
            return conn.execute(_STORED_RUN, {"key": key}).scalar()

    @reconnecting
    def keep_run(self, key: str, result_json: str) -> None:
        """Keeps a question's run for every process; one already kept under `key` stays."""
        with self._writer, self.engine.begin() as conn:
            conn.execute(self._add_run, {"key": key, "result": result_json, "created_at": utcnow()})

    @reconnecting
    def learner_data(self, learner_id: str | None, recent: int = 100) -> LearnerData:
        """What one learner's pages need, summarised by the database: it grows with what the
        learner answered, never with all their attempts (or the bank)."""
        if not learner_id:
            return LearnerData()
        key = {"learner": learner_id}
        with self.reads.connect() as conn:
            latest = self._latest.rows(conn, key)
            by_topic = {t: (n, int(r or 0)) for t, n, r in self._by_topic.rows(conn, key)}
            cards = {r[1]: _card(r) for r in self._cards.rows(conn, key)}
            newest = [_attempt(r) for r in self._recent.rows(conn, {**key, "limit": recent})] if recent else []
        return LearnerData(latest, by_topic, cards, newest)


def _upsert(engine: Engine, table: Any, key: tuple[str, ...], update: Callable[[Any], dict[str, Any]]) -> Any:
    """INSERT of a row with `key`'s columns as its identity, which when that row is there already
    sets `update(the row offered)` on it instead (both databases ampquiz is tested on say it
    natively)."""
    name = engine.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        raise NotImplementedError(f"ampquiz keeps learners' summaries on SQLite and PostgreSQL, not {name}")
    insert = dialect_insert(table)
    return insert.on_conflict_do_update(index_elements=list(key), set_=update(insert.excluded))


def _fill_summaries(engine: Engine, missing: set[str]) -> None:
    """Fills the summary tables just made (`missing`) from the attempts already stored, once, when
    a database made by an earlier version is opened."""
    if not missing:
        return
    a = _ATTEMPTS.c
    with engine.begin() as conn:
        if _LAST.name in missing:
            last = select(func.max(a.id)).group_by(a.learner_id, a.question_id, a.fingerprint)
            rows = select(a.learner_id, a.question_id, a.fingerprint, a.id, a.correct).where(a.id.in_(last))
            conn.execute(_LAST.insert().from_select(["learner_id", "question_id", "fingerprint", "attempt_id", "correct"], rows))
        if _TOPICS.name in missing:
            rows = select(a.learner_id, a.topic, func.count(), func.sum(case((a.correct, 1), else_=0))).group_by(a.learner_id, a.topic)
            conn.execute(_TOPICS.insert().from_select(["learner_id", "topic", "attempts", "right_attempts"], rows))


def _insert_ignoring_duplicates(engine: Engine, table: Any, key: str = "id") -> Any:
    """INSERT that does nothing when the row is there already (both databases ampquiz is tested
    on say it natively; elsewhere, a plain INSERT guarded by NOT EXISTS)."""
    name = engine.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    elif name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        params = [bindparam(c.name) for c in table.columns]
        exists = select(table.c[key]).where(table.c[key] == bindparam(key)).exists()
        return table.insert().from_select([c.name for c in table.columns], select(*params).where(~exists))
    return dialect_insert(table).on_conflict_do_nothing()


def _card_write(card: CardRow | None, review: ReviewUpdate | None,
                reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None,
                values: dict[str, Any], key: dict[str, str]) -> dict[str, Any] | None:  # fmt: skip
    """The review card's row to write with an answer (None: the card stays as it is): `review`,
    or what `reschedule` makes of the card stored (None, or another version's card: afresh)."""
    fingerprint, correct = values["fingerprint"], values["correct"]
    same = card is not None and (not card.fingerprint or card.fingerprint == fingerprint)
    if reschedule is not None:
        review = reschedule(card if same else None)
    if review is None:
        return None
    lapses = (card.lapses if card is not None and same else 0) + (0 if correct else 1)
    return {**key, "card": review.card_json, "due": review.due, "lapses": lapses, "fingerprint": fingerprint}


def _answer_statement(*, with_card: bool) -> Any:
    """PostgreSQL: an answer as one statement. The attempt's INSERT returns its id, which the
    learner's last answer takes; the topic's score and (`with_card`) the review card are upserted
    beside it. Parameters: the attempt's columns, `right_attempts`, and the card's `card`, `due`
    and `lapses`."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    attempt = _ADD_ATTEMPT.values({name: bindparam(name) for name in _ATTEMPT_COLUMNS}).returning(_A.id).cte("new_attempt")
    who = {"learner_id": bindparam("learner_id"), "question_id": bindparam("question_id"), "fingerprint": bindparam("fingerprint")}
    last = pg_insert(_LAST).values(**who, attempt_id=select(attempt.c.id).scalar_subquery(), correct=bindparam("correct"))
    last = last.on_conflict_do_update(index_elements=["learner_id", "question_id", "fingerprint"],
                                      set_={"attempt_id": last.excluded.attempt_id, "correct": last.excluded.correct})  # fmt: skip
    topic = pg_insert(_TOPICS).values(learner_id=bindparam("learner_id"), topic=bindparam("topic"), attempts=literal_column("1"),
                                      right_attempts=bindparam("right_attempts"))  # fmt: skip
    topic = topic.on_conflict_do_update(index_elements=["learner_id", "topic"], set_={
        "attempts": _TOPICS.c.attempts + topic.excluded.attempts,
        "right_attempts": _TOPICS.c.right_attempts + topic.excluded.right_attempts,
    })  # fmt: skip
    writes = [last.cte("kept_last"), topic.cte("counted_topic")]
    if with_card:
        card = pg_insert(_CARDS_TABLE).values(**who, card=bindparam("card"), due=bindparam("due"), lapses=bindparam("lapses"))
        card = card.on_conflict_do_update(index_elements=["learner_id", "question_id"], set_={
            "card": card.excluded.card, "due": card.excluded.due, "lapses": card.excluded.lapses,
            "fingerprint": card.excluded.fingerprint,
        })  # fmt: skip
        writes.append(card.cte("moved_card"))
    return select(attempt.c.id).add_cte(*writes)


def _attempt(row: Any) -> AttemptRow:
    return AttemptRow(*row)  # positional: a row's mapping view costs more than the query


def _card(row: Any) -> CardRow:
    return CardRow(*row)


_LEARNER = Learner.__table__  # type: ignore[attr-defined]
_ATTEMPTS = Attempt.__table__  # type: ignore[attr-defined]
_CARDS_TABLE = ReviewCard.__table__  # type: ignore[attr-defined]
_RUNS = QuestionRun.__table__  # type: ignore[attr-defined]
_LAST = LastAnswer.__table__  # type: ignore[attr-defined]
_TOPICS = TopicScore.__table__  # type: ignore[attr-defined]
_STORED_RUN = select(_RUNS.c.result).where(_RUNS.c.key == bindparam("key"))
_A, _C = _ATTEMPTS.c, _CARDS_TABLE.c
_ATTEMPT_ROW = [_A[name] for name in AttemptRow._fields]
"""The attempt's columns in AttemptRow's order (rows are made from them by position)."""
_ADD_ATTEMPT = _ATTEMPTS.insert()
_ATTEMPT_COLUMNS = tuple(name for name in AttemptRow._fields if name != "id")
"""What recording an attempt gives (its id is the database's)."""
_BY_SUBMIT = select(*_ATTEMPT_ROW).where(_A.learner_id == bindparam("learner"), _A.submit_id == bindparam("submit"))
_ATTEMPT = select(*_ATTEMPT_ROW).where(_A.id == bindparam("id"), _A.learner_id == bindparam("learner"))
_SINCE = select(*_ATTEMPT_ROW).where(_A.learner_id == bindparam("learner"), _A.created_at >= bindparam("since")).order_by(_A.id)
_RECENT = select(*_ATTEMPT_ROW).where(_A.learner_id == bindparam("learner")).order_by(_A.id.desc()).limit(bindparam("limit"))
_THIS_CARD = (_C.learner_id == bindparam("learner"), _C.question_id == bindparam("question"))
_CARD = select(_C.learner_id, _C.question_id, _C.due, _C.lapses, _C.fingerprint, _C.card).where(*_THIS_CARD)
_CARDS = select(_C.learner_id, _C.question_id, _C.due, _C.lapses, _C.fingerprint).where(_C.learner_id == bindparam("learner"))
"""A learner's cards in CardRow's order, without the scheduler's JSON."""
_ADD_CARD = _CARDS_TABLE.insert().values(
    learner_id=bindparam("learner"), question_id=bindparam("question"), card=bindparam("card"),
    due=bindparam("due"), lapses=bindparam("lapses"), fingerprint=bindparam("fingerprint"),
)  # fmt: skip
_UPDATE_CARD = _CARDS_TABLE.update().where(*_THIS_CARD).values(
    card=bindparam("card"), due=bindparam("due"), lapses=bindparam("lapses"), fingerprint=bindparam("fingerprint")
)
_LATEST = (
    select(_LAST.c.question_id, _LAST.c.fingerprint, _LAST.c.correct)
    .where(_LAST.c.learner_id == bindparam("learner"))
    .order_by(_LAST.c.attempt_id)
)
"""The last attempt at each version of each question the learner answered, oldest first."""
_BY_TOPIC = select(_TOPICS.c.topic, _TOPICS.c.attempts, _TOPICS.c.right_attempts).where(
    _TOPICS.c.learner_id == bindparam("learner")
)
"""Attempts and right attempts per topic."""

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
