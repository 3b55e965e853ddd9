"""The store: persistence of learners' attempts and review cards (SQLModel over SQLite or any SQLAlchemy URL).

Learners are anonymous: an id from a signed cookie. A learner row is written with the first
attempt, so browsing pages never writes. No FastAPI here: the CLI or a report can read the same
store.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col, select

from app.store import migrate, sql
from app.store.database import SqliteWriterTurn, make_engine, reconnecting
from app.store.driver_statements import DriverQuery, DriverWrite, rows_together
from app.store.learner_summaries import KeptSummaries, KeptSummary, as_asked
from app.store.rows import AttemptRow, CardRow, LearnerData, QuestionState, ReviewUpdate, card_write
from app.store.tables import (
    Attempt,
    as_utc,
    utcnow,
)


class Store:
    """The one object the web layer talks to for persistence.

    The learner's hot paths (a question's state, an answer, the progress page) are SQLAlchemy Core
    statements built once at import, one connection per call, no ORM objects: the ORM's session
    and identity map cost more CPU than the queries. Every method blocks for the database's round
    trip, so the web calls them from worker threads, never on its event loop."""

    CATCH_UP = 20
    """At most this many attempts made since a learner's kept summary are read to bring it up to
    date; with more, the summary is read whole (about as cheap by then)."""

    KNOWN_LEARNERS = 100_000
    """Learners whose row this process saw written, so their next attempt skips that INSERT
    (learner rows are never deleted)."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        try:  # the migrations own the schema: at this ampquiz's revision, or refused
            self.schema_changes = migrate.open_schema(self.engine)
            """What opening the database did to its schema, in words (nothing, mostly)."""
        except BaseException:
            self.engine.dispose()
            raise
        # Single statements (reads; on PostgreSQL an answer's one statement too) run on an engine
        # whose connections are in autocommit for good (see `make_engine`). SQLite's driver
        # begins transactions only for writes already: its engine serves both.
        postgres = self.engine.dialect.name == "postgresql"
        self.reads = make_engine(url, autocommit=True) if postgres else self.engine
        self._add_run = sql.insert_ignoring_duplicates(self.engine, sql.RUNS, key="key")
        # Recording an answer, on the driver's cursor (see DriverWrite).
        self._write_learner = DriverWrite(self.engine, sql.insert_ignoring_duplicates(self.engine, sql.LEARNER),
                                          columns=("id", "created_at"))  # fmt: skip
        self._card_of = DriverQuery(self.engine, sql.CARD)
        if postgres:  # one statement, with and without a card to write
            self._answer_at_once: dict[bool, DriverWrite] | None = {
                with_card: DriverWrite(self.engine, sql.answer_statement(self.engine, with_card=with_card), returns_value=True)
                for with_card in (True, False)
            }  # fmt: skip
        else:  # a statement each, in one transaction
            self._answer_at_once = None
            self._write_attempt = DriverWrite(
                self.engine,
                sql.ADD_ATTEMPT,
                columns=sql.ATTEMPT_COLUMNS,
                returning=sql.ATTEMPTS.c.id,
            )
            self._write_last = DriverWrite(self.engine, sql.keep_last(self.engine),
                                           columns=("learner_id", "question_id", "fingerprint", "attempt_id", "correct"))  # fmt: skip
            self._write_topic = DriverWrite(self.engine, sql.count_topic(self.engine),
                                            columns=("learner_id", "topic", "attempts", "right_attempts"))  # fmt: skip
            self._write_card = DriverWrite(
                self.engine, sql.move_card(self.engine), columns=sql.CARD_COLUMNS
            )
        self._known_learners: set[str] = set()
        # The learner's busiest reads, on the driver's cursor (see DriverQuery).
        (
            self._question_state,
            self._attempt_by_id,
            self._latest,
            self._by_topic,
            self._cards,
            self._recent,
            self._after,
        ) = (
            DriverQuery(self.engine, q)
            for q in (
                sql.QUESTION_STATE,
                sql.ATTEMPT,
                sql.LATEST,
                sql.BY_TOPIC,
                sql.CARDS,
                sql.RECENT,
                sql.AFTER,
            )
        )
        self._summaries = KeptSummaries()
        self._writer: contextlib.AbstractContextManager[Any] = (
            SqliteWriterTurn(self.engine.url.database)
            if self.engine.dialect.name == "sqlite"
            else contextlib.nullcontext()
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

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction of its own, committed when the block ends (rolled back
        when it raises), in SQLite's writers' turn: for a conditional write elsewhere in the app
        (an interview's event, a sign-in), whose second try must see what the first committed."""
        with self._writer, self.engine.begin() as conn:
            yield conn

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
        values: dict[str, Any] = {
            "learner_id": learner_id, "question_id": question_id, "set_id": set_id, "topic": topic,
            "kind": kind, "answer": json.dumps(answer), "correct": correct, "created_at": now,
            "fingerprint": fingerprint, "submit_id": submit_id, "seconds": seconds,
        }  # fmt: skip
        try:
            if self._answer_at_once is not None:
                attempt_id = self._record_at_once(values, review, reschedule)
            else:
                attempt_id = self._record_in_turn(values, review, reschedule)
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

    def _record_in_turn(self, values: dict[str, Any], review: ReviewUpdate | None,
                        reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None) -> int:  # fmt: skip
        """SQLite: the answer's statements in one transaction, in the writers' turn."""
        with self._writer, self.engine.begin() as conn:
            # A submit already stored is found by the unique (learner, submit) index: the attempt's
            # INSERT fails, everything here rolls back, and `record_attempt` reads the stored one
            # (no SELECT before every answer for the rare replay).
            card_row = self._before_the_attempt(conn, values, review, reschedule)
            attempt_id = self._write_attempt.run(conn, values)
            who = {name: values[name] for name in ("learner_id", "question_id", "fingerprint")}
            self._write_last.run(
                conn, {**who, "attempt_id": attempt_id, "correct": values["correct"]}
            )
            self._write_topic.run(conn, {"learner_id": values["learner_id"], "topic": values["topic"], "attempts": 1,
                                         "right_attempts": int(values["correct"])})  # fmt: skip
            if card_row is not None:
                self._write_card.run(conn, card_row)
        return attempt_id

    def _record_at_once(self, values: dict[str, Any], review: ReviewUpdate | None,
                        reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None) -> int:  # fmt: skip
        """PostgreSQL: the answer in two round trips, each a statement of its own in autocommit:
        the card's read, then the attempt with the learner's last answer, topic score and card
        written by one statement (`sql.answer_statement`), where a transaction of single
        statements took seven (BEGIN, the read, four writes, COMMIT). One statement is atomic:
        when the attempt's INSERT fails (a replayed submit), nothing of it is written."""
        assert self._answer_at_once is not None
        with self.reads.connect() as conn:
            card_row = self._before_the_attempt(conn, values, review, reschedule)
            params = {**values, "right_attempts": int(values["correct"]), **(card_row or {})}
            return self._answer_at_once[card_row is not None].run(conn, params)

    def _before_the_attempt(self, conn: Any, values: dict[str, Any], review: ReviewUpdate | None,
                            reschedule: Callable[[CardRow | None], ReviewUpdate | None] | None) -> dict[str, Any] | None:  # fmt: skip
        """Reads the learner's card for the question and works out its row to write
        (`_card_write`); writes the learner's row on their first answer this process sees."""
        stored = self._card_of.rows(
            conn, {"learner": values["learner_id"], "question": values["question_id"]}
        )
        card_row = card_write(_card(stored[0]) if stored else None, review, reschedule, values)
        if values["learner_id"] not in self._known_learners:
            self._write_learner.run(
                conn, {"id": values["learner_id"], "created_at": values["created_at"]}
            )
        return card_row

    @reconnecting
    def submitted(self, learner_id: str, submit_id: str) -> AttemptRow | None:
        with self.reads.connect() as conn:
            row = conn.execute(sql.BY_SUBMIT, {"learner": learner_id, "submit": submit_id}).first()
        return _attempt(row) if row is not None else None

    @reconnecting
    def card(self, learner_id: str, question_id: str, fingerprint: str = "") -> CardRow | None:
        """The learner's review card for this version of the question (None for another's)."""
        with self.reads.connect() as conn:
            row = conn.execute(sql.CARD, {"learner": learner_id, "question": question_id}).first()
        card = _card(row) if row is not None else None
        if (
            card is not None
            and card.fingerprint
            and fingerprint
            and card.fingerprint != fingerprint
        ):
            return None
        return card

    @reconnecting
    def question_state(
        self,
        learner_id: str,
        question_id: str,
        fingerprint: str = "",
        attempt_id: int | None = None,
    ) -> QuestionState:
        """Whether the last attempt at this version of one question was right, and when its review
        card is due: all a question page needs, in one cheap query (it is the busiest page). With
        `attempt_id`, that attempt is read too (the result page), in the same round trip."""
        reads: list[tuple[DriverQuery, dict[str, Any]]] = [
            (
                self._question_state,
                {"learner": learner_id, "question": question_id, "fingerprint": fingerprint},
            )
        ]
        if attempt_id is not None:
            reads.append((self._attempt_by_id, {"id": attempt_id, "learner": learner_id}))
        with self.reads.connect() as conn:
            ((correct, due),), *found = rows_together(conn, reads)
        attempt = _attempt(found[0][0]) if found and found[0] else None
        return QuestionState(
            None if correct is None else bool(correct),
            as_utc(due) if due is not None else None,
            attempt,
        )

    def all_attempts(self) -> list[Attempt]:
        """Every attempt of every learner, oldest first (item statistics, the attempts CSV)."""
        with self._session() as s:
            return list(s.exec(select(Attempt).order_by(col(Attempt.id))))

    @reconnecting
    def attempt(self, learner_id: str, attempt_id: int) -> AttemptRow | None:
        """Attempt `attempt_id` when it is this learner's."""
        with self.reads.connect() as conn:
            found = self._attempt_by_id.rows(conn, {"id": attempt_id, "learner": learner_id})
        return _attempt(found[0]) if found else None

    @reconnecting
    def attempts_since(self, learner_id: str, since: datetime) -> list[AttemptRow]:
        """The learner's attempts made at or after `since`, oldest first (a review session's)."""
        with self.reads.connect() as conn:
            rows = conn.execute(sql.SINCE, {"learner": learner_id, "since": since}).all()
        return [_attempt(r) for r in rows]

    @reconnecting
    def stored_run(self, key: str) -> str | None:
        """A question run kept by `keep_run` (its JSON), or None."""
        with self.reads.connect() as conn:
            return conn.execute(sql.STORED_RUN, {"key": key}).scalar()

    @reconnecting
    def keep_run(self, key: str, result_json: str) -> None:
        """Keeps a question's run for every process; one already kept under `key` stays."""
        with self._writer, self.engine.begin() as conn:
            conn.execute(self._add_run, {"key": key, "result": result_json, "created_at": utcnow()})

    @reconnecting
    def learner_data(self, learner_id: str | None, recent: int = 100) -> LearnerData:
        """What one learner's pages need, summarised by the database: it grows with what the
        learner answered, never with all their attempts (or the bank). A summary this process
        read before is brought up to date with the attempts made since (see
        `app.store.learner_summaries`) instead of read whole again."""
        if not learner_id:
            return LearnerData()
        key, asked = {"learner": learner_id}, recent
        kept = self._summaries.get(learner_id)
        with self.reads.connect() as conn:
            if kept is not None and kept.recent_kept >= recent:
                # The attempts since, then the count: one stored between the two reads makes the
                # count larger than what was read, never the other way round.
                since_rows, topic_rows = rows_together(conn, [
                    (self._after, {**key, "after": kept.last_id, "limit": self.CATCH_UP + 1}), (self._by_topic, key),
                ])  # fmt: skip
                since = [_attempt(r) for r in since_rows]
                by_topic = _by_topic(topic_rows)
                if len(since) <= self.CATCH_UP and kept.whole_with(since, by_topic):
                    if since:
                        kept = kept.catch_up(
                            since,
                            by_topic,
                            self._cards_of(conn, learner_id, {a.question_id for a in since}),
                        )
                        self._summaries.put(learner_id, kept)
                    return as_asked(kept, asked)
            recent = max(recent, kept.recent_kept if kept is not None else 0)
            reads: list[tuple[DriverQuery, dict[str, Any]]] = [
                (self._latest, key),
                (self._by_topic, key),
                (self._cards, key),
            ]
            if recent:
                reads.append((self._recent, {**key, "limit": recent}))
            latest, topic_rows, cards, *newest = rows_together(conn, reads)
        data = LearnerData(
            [(q, f, right) for q, f, right, _ in latest], _by_topic(topic_rows), {r[1]: _card(r) for r in cards},
            [_attempt(r) for r in newest[0]] if newest else [],
        )  # fmt: skip
        kept = KeptSummary.of(data, latest, recent)
        self._summaries.put(learner_id, kept)
        return as_asked(kept, asked)

    def _cards_of(self, conn: Any, learner_id: str, question_ids: set[str]) -> dict[str, CardRow]:
        """The learner's cards for these questions, as read now (without the scheduler's JSON)."""
        found = {}
        for question_id in question_ids:
            for row in self._card_of.rows(conn, {"learner": learner_id, "question": question_id}):
                found[question_id] = _card(row[:5])
        return found


def _by_topic(rows: list[Any]) -> dict[str, tuple[int, int]]:
    return {t: (n, int(r or 0)) for t, n, r in rows}


def _attempt(row: Any) -> AttemptRow:
    return AttemptRow(*row)  # positional: a row's mapping view costs more than the query


def _card(row: Any) -> CardRow:
    return CardRow(*row)
