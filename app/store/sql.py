"""The store's SQL (`app.store.repository`): the statements it runs, built once at import with SQLAlchemy
Core (SQLAlchemy then only looks their compiled forms up in its cache), the builders of those
whose words differ per database (the upserts, an answer as one statement on PostgreSQL).

Parameters are named as the statements say: the reads take `learner`, `question`, `fingerprint`
and so on; the writes take their columns' names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, literal_column, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from app.store.rows import AttemptRow
from app.store.tables import Attempt, LastAnswer, Learner, QuestionRun, ReviewCard, TopicScore

LEARNER = Learner.__table__  # type: ignore[attr-defined]
ATTEMPTS = Attempt.__table__  # type: ignore[attr-defined]
CARDS_TABLE = ReviewCard.__table__  # type: ignore[attr-defined]
RUNS = QuestionRun.__table__  # type: ignore[attr-defined]
LAST = LastAnswer.__table__  # type: ignore[attr-defined]
TOPICS = TopicScore.__table__  # type: ignore[attr-defined]
_A, _C = ATTEMPTS.c, CARDS_TABLE.c

# ---- reads ------------------------------------------------------------------------------------

STORED_RUN = select(RUNS.c.result).where(RUNS.c.key == bindparam("key"))
ATTEMPT_ROW = [_A[name] for name in AttemptRow._fields]
"""The attempt's columns in AttemptRow's order (rows are made from them by position)."""
BY_SUBMIT = select(*ATTEMPT_ROW).where(
    _A.learner_id == bindparam("learner"), _A.submit_id == bindparam("submit")
)
ATTEMPT = select(*ATTEMPT_ROW).where(
    _A.id == bindparam("id"), _A.learner_id == bindparam("learner")
)
SINCE = (
    select(*ATTEMPT_ROW)
    .where(_A.learner_id == bindparam("learner"), _A.created_at >= bindparam("since"))
    .order_by(_A.id)
)
RECENT = (
    select(*ATTEMPT_ROW)
    .where(_A.learner_id == bindparam("learner"))
    .order_by(_A.id.desc())
    .limit(bindparam("limit"))
)
AFTER = (
    select(*ATTEMPT_ROW)
    .where(_A.learner_id == bindparam("learner"), _A.id > bindparam("after"))
    .order_by(_A.id)
    .limit(bindparam("limit"))
)
"""A learner's attempts newer than one they made, oldest first."""
CARD = select(_C.learner_id, _C.question_id, _C.due, _C.lapses, _C.fingerprint, _C.card).where(
    _C.learner_id == bindparam("learner"), _C.question_id == bindparam("question")
)
CARDS = select(_C.learner_id, _C.question_id, _C.due, _C.lapses, _C.fingerprint).where(
    _C.learner_id == bindparam("learner")
)
"""A learner's cards in CardRow's order, without the scheduler's JSON."""
LATEST = (
    select(LAST.c.question_id, LAST.c.fingerprint, LAST.c.correct, LAST.c.attempt_id)
    .where(LAST.c.learner_id == bindparam("learner"))
    .order_by(LAST.c.attempt_id)
)
"""The last attempt at each version of each question the learner answered, oldest first."""
BY_TOPIC = select(TOPICS.c.topic, TOPICS.c.attempts, TOPICS.c.right_attempts).where(
    TOPICS.c.learner_id == bindparam("learner")
)
"""Attempts and right attempts per topic."""

_SAME_VERSION: Any = bindparam("fingerprint")
QUESTION_STATE = select(
    select(col(Attempt.correct))
    .where(
        col(Attempt.learner_id) == bindparam("learner"),
        col(Attempt.question_id) == bindparam("question"),
        or_(col(Attempt.fingerprint) == _SAME_VERSION, col(Attempt.fingerprint) == ""),
    )
    .order_by(col(Attempt.id).desc())
    .limit(1)
    .scalar_subquery(),
    select(col(ReviewCard.due))
    .where(
        col(ReviewCard.learner_id) == bindparam("learner"),
        col(ReviewCard.question_id) == bindparam("question"),
        or_(col(ReviewCard.fingerprint) == _SAME_VERSION, col(ReviewCard.fingerprint) == ""),
    )
    .scalar_subquery(),
)
"""Whether the last attempt at this version of a question was right, and when its card is due."""

# ---- writes -----------------------------------------------------------------------------------

ADD_ATTEMPT = ATTEMPTS.insert()
ATTEMPT_COLUMNS = tuple(name for name in AttemptRow._fields if name != "id")
"""What recording an attempt gives (its id is the database's)."""
CARD_COLUMNS = ("learner_id", "question_id", "card", "due", "lapses", "fingerprint")
"""What writing a review card gives (`move_card`)."""


def _dialect_insert(engine: Engine) -> Any:
    """The dialect's own `insert` (with ON CONFLICT), on the two databases ampquiz is tested on."""
    name = engine.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    return None


def upsert(
    engine: Engine, table: Any, key: tuple[str, ...], update: Callable[[Any], dict[str, Any]]
) -> Any:
    """INSERT of a row with `key`'s columns as its identity, which when that row is there already
    sets `update(the row offered)` on it instead (both databases ampquiz is tested on say it
    natively)."""
    dialect_insert = _dialect_insert(engine)
    if dialect_insert is None:
        raise NotImplementedError(
            f"ampquiz keeps learners' summaries on SQLite and PostgreSQL, not {engine.dialect.name}"
        )
    insert = dialect_insert(table)
    return insert.on_conflict_do_update(index_elements=list(key), set_=update(insert.excluded))


def insert_ignoring_duplicates(engine: Engine, table: Any, key: str = "id") -> Any:
    """INSERT that does nothing when the row is there already (both databases ampquiz is tested
    on say it natively; elsewhere, a plain INSERT guarded by NOT EXISTS)."""
    dialect_insert = _dialect_insert(engine)
    if dialect_insert is None:
        params: list[Any] = [bindparam(c.name) for c in table.columns]
        exists = select(table.c[key]).where(table.c[key] == bindparam(key)).exists()
        return table.insert().from_select(
            [c.name for c in table.columns], select(*params).where(~exists)
        )
    return dialect_insert(table).on_conflict_do_nothing()


def keep_last(engine: Engine) -> Any:
    """The learner's last answer to this version of a question: the attempt just stored."""
    return upsert(engine, LAST, ("learner_id", "question_id", "fingerprint"), lambda new: {
        "attempt_id": new.attempt_id, "correct": new.correct,
    })  # fmt: skip


def count_topic(engine: Engine) -> Any:
    """The learner's attempts and right attempts in a topic, counted on."""
    return upsert(engine, TOPICS, ("learner_id", "topic"), lambda new: {
        "attempts": TOPICS.c.attempts + new.attempts, "right_attempts": TOPICS.c.right_attempts + new.right_attempts,
    })  # fmt: skip


def move_card(engine: Engine) -> Any:
    """The learner's review card for a question, made or moved (one per learner and question)."""
    return upsert(engine, CARDS_TABLE, ("learner_id", "question_id"), lambda new: {
        "card": new.card, "due": new.due, "lapses": new.lapses, "fingerprint": new.fingerprint,
    })  # fmt: skip


def answer_statement(engine: Engine, *, with_card: bool) -> Any:
    """PostgreSQL: an answer as one statement (data-modifying CTEs). The attempt's INSERT returns
    its id, which the learner's last answer takes; the topic's score and (`with_card`) the review
    card are upserted beside it, by the same upserts the answer's single statements use.
    Parameters: the attempt's columns, `right_attempts`, and the card's `card`, `due`, `lapses`."""
    attempt = (
        ADD_ATTEMPT.values({name: bindparam(name) for name in ATTEMPT_COLUMNS})
        .returning(_A.id)
        .cte("new_attempt")
    )
    who: dict[str, Any] = {
        name: bindparam(name) for name in ("learner_id", "question_id", "fingerprint")
    }
    writes = [
        keep_last(engine).values(**who, attempt_id=select(attempt.c.id).scalar_subquery(), correct=bindparam("correct"))
        .cte("kept_last"),
        count_topic(engine).values(learner_id=bindparam("learner_id"), topic=bindparam("topic"),
                                   attempts=literal_column("1"), right_attempts=bindparam("right_attempts"))
        .cte("counted_topic"),
    ]  # fmt: skip
    if with_card:
        card = move_card(engine).values(
            **who, card=bindparam("card"), due=bindparam("due"), lapses=bindparam("lapses")
        )
        writes.append(card.cte("moved_card"))
    return select(attempt.c.id).add_cte(*writes)
