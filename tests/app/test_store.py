"""The store's summaries of each learner (last answer per question version, attempts per topic),
kept with every attempt, against what the attempts themselves say, on a real SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from app.database import DriverQuery
from app.store import ReviewUpdate, Store
from tests.support.postgres import drop_connections


def _answer(
    store: Store, learner: str, question: str, topic: str, correct: bool, fingerprint: str = "v1"
) -> None:
    store.record_attempt(learner, question_id=question, set_id="s", topic=topic, kind="multiple_choice",
                         answer=[0], correct=correct, fingerprint=fingerprint)  # fmt: skip


def _record_some(store: Store) -> None:
    _answer(store, "ann", "q1", "autocast", False)
    _answer(store, "ann", "q1", "autocast", True)  # the last answer to q1 v1 is right
    _answer(store, "ann", "q2", "scaler", False)
    _answer(store, "ann", "q1", "autocast", False, fingerprint="v2")  # another version of q1
    _answer(store, "bob", "q2", "scaler", True)


def test_a_learners_summary_follows_their_attempts(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    _record_some(store)
    ann = store.learner_data("ann", recent=10)
    assert ann.latest == [("q1", "v1", True), ("q2", "v1", False), ("q1", "v2", False)]
    assert ann.by_topic == {"autocast": (3, 1), "scaler": (1, 0)}
    assert [a.question_id for a in ann.recent] == ["q1", "q2", "q1", "q1"]
    assert store.learner_data("bob").by_topic == {"scaler": (1, 1)}
    store.close()


def test_a_replayed_submit_changes_no_summary(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    first, new = store.record_attempt("ann", question_id="q1", set_id="s", topic="t", kind="multiple_choice",
                                      answer=[0], correct=False, submit_id="form-1")  # fmt: skip
    again, new_again = store.record_attempt("ann", question_id="q1", set_id="s", topic="t", kind="multiple_choice",
                                            answer=[1], correct=True, submit_id="form-1")  # fmt: skip
    assert (new, new_again) == (True, False) and again.id == first.id and again.correct is False
    data = store.learner_data("ann")
    assert data.by_topic == {"t": (1, 0)} and data.latest == [("q1", "", False)]
    store.close()


def test_a_database_from_before_the_summaries_gets_them_from_its_attempts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = Store(url)
    _record_some(store)
    expected = store.learner_data("ann")
    with store.engine.begin() as conn:  # as an earlier version left it: attempts, no summaries
        conn.execute(text("DROP TABLE last_answer"))
        conn.execute(text("DROP TABLE topic_score"))
    store.close()

    reopened = Store(url)
    data = reopened.learner_data("ann")
    assert data.latest == expected.latest and data.by_topic == expected.by_topic
    _answer(reopened, "ann", "q2", "scaler", True)  # and they go on from there
    assert reopened.learner_data("ann").by_topic == {"autocast": (3, 1), "scaler": (2, 1)}
    reopened.close()


def test_an_answer_waits_for_another_processs_write_then_is_stored(tmp_path: Path) -> None:
    """Two server processes on one SQLite file take turns writing: an answer made while another
    process writes waits for that write to end (in the kernel, not in SQLite's sleeping retries)
    and is then stored, all of it."""
    import subprocess
    import sys
    import threading

    db = tmp_path / "a.db"
    store = Store(f"sqlite:///{db}")
    other = subprocess.Popen(
        [sys.executable, "-c", (
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(db) + '-writer.lock'!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('writing', flush=True)\n"
            "sys.stdin.readline()\n"  # holds its turn until told to commit
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert other.stdout is not None and other.stdin is not None
    assert other.stdout.readline() == "writing\n"
    answered = threading.Event()
    answering = threading.Thread(
        target=lambda: (_answer(store, "ann", "q1", "autocast", True), answered.set())
    )
    answering.start()
    assert not answered.wait(1.0), "the answer was written while another process held the turn"
    other.stdin.write("done\n")
    other.stdin.flush()
    assert answered.wait(10), "the answer never got its turn"
    answering.join()
    other.wait(10)
    assert store.learner_data("ann").latest == [("q1", "v1", True)]
    store.close()


def _stored_the_usual_way(store: Store, query: DriverQuery, params: dict) -> list[tuple]:
    with store.reads.connect() as conn:
        return [tuple(row) for row in conn.execute(query.statement, params).all()]


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_busiest_reads_give_what_sqlalchemy_gives(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A question's state and the progress page's summary are read on the driver's own cursor:
    every value must be what SQLAlchemy hands back (UTC-aware datetimes, booleans, not SQLite's
    text and integers), on both databases, and a connection the server dropped is replaced."""
    url = (
        f"sqlite:///{tmp_path / 'a.db'}"
        if database == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = Store(url)
    due = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    store.record_attempt("ann", question_id="q1", set_id="s", topic="autocast", kind="multiple_choice", answer=[1],
                         correct=False, fingerprint="v1", seconds=2.5, review=ReviewUpdate("{}", due))  # fmt: skip
    _record_some(store)
    ann = store.learner_data("ann", recent=10)
    assert ann.cards["q1"].due == due and ann.cards["q1"].lapses == 1
    assert all(type(right) is bool for _, _, right in ann.latest)
    oldest = ann.recent[-1]
    assert (oldest.correct, oldest.seconds, oldest.answer_value) == (
        False,
        2.5,
        [1],
    ) and oldest.created_at.tzinfo is not None
    state = store.question_state("ann", "q1", "v1", attempt_id=oldest.id)
    assert state == (True, due, oldest)

    params = {"learner": "ann", "question": "q1", "fingerprint": "v1", "limit": 10, "id": oldest.id}
    for query in (
        store._latest,
        store._cards,
        store._recent,
        store._question_state,
        store._attempt_by_id,
    ):
        with store.reads.connect() as conn:
            assert query.rows(conn, params) == _stored_the_usual_way(store, query, params), (
                query.sql
            )

    if database == "postgresql":
        assert (
            drop_connections(url) >= 1
        )  # the pooled connection is dead: the next read replaces it
        assert store.learner_data("ann", recent=10) == ann
    store.close()


def test_pages_use_as_many_threads_as_the_store_gains_from(
    tmp_path: Path, postgres_url: str
) -> None:
    """SQLite: one thread (its writers take turns, and more threads hand the GIL to each other for
    every row read); PostgreSQL: two, one running while the other waits for a round trip."""
    assert Store(f"sqlite:///{tmp_path / 'a.db'}").useful_threads == 1
    assert Store(postgres_url).useful_threads == 2
