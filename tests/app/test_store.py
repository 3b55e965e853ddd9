"""The store's summaries of each learner (last answer per question version, attempts per topic),
kept with every attempt, against what the attempts themselves say, on a real SQLite file."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from app.store import ReviewUpdate, Store, migrate
from app.store.driver_statements import DriverQuery
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
    with migrate.migrating(store.engine) as conn:  # the first revision's tables, as then
        command.downgrade(migrate.config(conn), migrate.FIRST)
    with store.engine.begin() as conn:  # as an earlier version left it: attempts, no summaries
        conn.execute(text("DROP TABLE last_answer"))
        conn.execute(text("DROP TABLE topic_score"))
        conn.execute(text("DROP TABLE alembic_version"))  # nor migrations
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
def test_a_summary_kept_by_one_process_is_what_a_whole_read_gives(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A progress page's summary is kept between requests and brought up to date with what was
    answered since: after each answer, through this process or another, to any question, version
    or topic, with review cards moving, and with more answers than are caught up one by one, it
    must be what a process that never read it reads whole. And an answer stored out of order (its
    id older than one read already, as when two answers commit in the other order) is not missed."""
    url = (
        f"sqlite:///{tmp_path / 'a.db'}"
        if database == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    this, other = Store(url), Store(url)

    def whole(recent: int) -> object:
        fresh = Store(url)
        try:
            return fresh.learner_data("ann", recent=recent)
        finally:
            fresh.close()

    def check() -> None:
        for recent in (0, 20, 3, 100, 20):
            assert this.learner_data("ann", recent=recent) == whole(recent), recent

    check()  # nothing answered yet
    for step, (writer, question, topic, correct, fingerprint) in enumerate([
        (this, "q1", "autocast", False, "v1"), (other, "q1", "autocast", True, "v1"), (other, "q2", "scaler", False, "v1"),
        (this, "q1", "autocast", False, "v2"), (other, "q3", "autocast", True, "v1"), (this, "q2", "scaler", True, "v1"),
    ], start=1):  # fmt: skip
        due = datetime(2030, 1, step, tzinfo=UTC)
        writer.record_attempt("ann", question_id=question, set_id="s", topic=topic, kind="multiple_choice", answer=[step],
                              correct=correct, fingerprint=fingerprint, review=ReviewUpdate("{}", due))  # fmt: skip
        _answer(
            other, "bob", question, topic, correct
        )  # another learner's answers change nothing of ann's
        check()
    for n in range(Store.CATCH_UP + 5):  # more than are caught up one by one
        _answer(other, "ann", f"q{n % 7}", "loss", n % 3 == 0)
    check()

    # An answer whose id is older than the newest read: made as a late commit leaves it.
    _answer(other, "bob", "q9", "loss", True)
    with other.engine.begin() as conn:
        gap = conn.execute(
            text("SELECT max(id) FROM attempt WHERE learner_id = 'bob'")
        ).scalar_one()
    _answer(other, "ann", "q8", "loss", True)
    check()
    with other.engine.begin() as conn:
        conn.execute(text("DELETE FROM attempt WHERE id = :id"), {"id": gap})
        conn.execute(text("INSERT INTO attempt (id, learner_id, question_id, set_id, topic, kind, answer, correct, created_at, "
                          "fingerprint) VALUES (:id, 'ann', 'q9', 's', 'late', 'multiple_choice', '[0]', :f, :t, 'v1')"),
                     {"id": gap, "f": False, "t": datetime(2026, 1, 1)})  # fmt: skip
        conn.execute(
            text(
                "INSERT INTO topic_score (learner_id, topic, attempts, right_attempts) VALUES ('ann', 'late', 1, 0)"
            )
        )
        conn.execute(text("INSERT INTO last_answer (learner_id, question_id, fingerprint, attempt_id, correct) "
                          "VALUES ('ann', 'q9', 'v1', :id, :f)"), {"id": gap, "f": False})  # fmt: skip
    assert this.learner_data("ann", recent=20).by_topic["late"] == (1, 0)
    check()
    this.close()
    other.close()


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

    params = {
        "learner": "ann",
        "question": "q1",
        "fingerprint": "v1",
        "limit": 10,
        "id": oldest.id,
        "after": oldest.id,
    }
    for query in (
        store._after,
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


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_an_answer_is_written_as_sqlalchemy_would_write_it(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Recording an answer runs on the driver's own cursor: what it stores must read back as
    SQLAlchemy's own writes do (an aware time that SQLAlchemy's own queries compare right, booleans,
    the review card made then updated), a replayed form must still be found as the attempt stored,
    and on PostgreSQL an answer after the server dropped the connection is stored, once."""
    url = (
        f"sqlite:///{tmp_path / 'a.db'}"
        if database == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = Store(url)
    when = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    due = datetime(2031, 6, 1, tzinfo=UTC)

    def answer(submit: str, correct: bool, **extra: object) -> tuple:
        return store.record_attempt("cy", question_id="q1", set_id="s", topic="scaler", kind="predict_output",
                                    answer="torch.float16", correct=correct, fingerprint="v1", submit_id=submit,
                                    seconds=1.5, now=when, **extra)  # type: ignore[arg-type]  # fmt: skip

    def last_answer() -> int:
        with store.engine.connect() as conn:
            return conn.execute(
                text("SELECT attempt_id FROM last_answer WHERE learner_id = 'cy'")
            ).scalar_one()

    first, new = answer("form-1", False, review=ReviewUpdate('{"a": 1}', due))
    assert new and first.id is not None
    assert last_answer() == first.id  # the id the database gave, read by the database itself
    replayed, new_again = answer("form-1", True)
    assert (new_again, replayed.id, replayed.correct) == (False, first.id, False)
    second, _ = answer("form-2", False, review=ReviewUpdate('{"a": 2}', due))
    assert second.id > first.id  # (PostgreSQL spent an id on the replay it rolled back)
    assert last_answer() == second.id

    # stored as SQLAlchemy stores the same values (SQLite: the same text for the time)
    from app.store.sql import ATTEMPTS

    values = {"learner_id": "cy", "question_id": "q9", "set_id": "s", "topic": "scaler", "kind": "predict_output",
              "answer": '"torch.float16"', "correct": False, "created_at": when, "fingerprint": "v1",
              "submit_id": "by-sqlalchemy", "seconds": 1.5}  # fmt: skip
    with store.engine.begin() as conn:
        conn.execute(ATTEMPTS.insert(), values)
        raw = "SELECT learner_id, set_id, topic, kind, answer, correct, created_at, fingerprint, seconds FROM attempt"
        ours, theirs = (
            conn.execute(text(raw + " WHERE submit_id = :s"), {"s": s}).one()
            for s in ("form-1", "by-sqlalchemy")
        )
        assert ours == theirs
        conn.execute(text("DELETE FROM attempt WHERE submit_id = 'by-sqlalchemy'"))

    # SQLAlchemy's own query (its bound time compared with what was stored) finds both
    since = store.attempts_since("cy", datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    assert [(a.id, a.correct, a.seconds, a.created_at, a.answer_value) for a in since] == [
        (first.id, False, 1.5, when, "torch.float16"),
        (second.id, False, 1.5, when, "torch.float16"),
    ]
    assert store.attempts_since("cy", datetime(2031, 5, 6, 7, 8, 9, 123457, tzinfo=UTC)) == []
    card = store.card("cy", "q1", "v1")
    assert card is not None and (card.due, card.lapses, card.fingerprint) == (due, 2, "v1")
    data = store.learner_data("cy")
    assert data.by_topic == {"scaler": (2, 0)} and data.latest == [("q1", "v1", False)]

    if database == "postgresql":
        assert drop_connections(url) >= 1
        third, new = answer("form-3", True)  # its first try meets the dead connection
        assert new and third.id > second.id
        assert store.learner_data("cy").by_topic == {"scaler": (3, 1)}
    store.close()


OPEN_AT_ONCE = """
import os, sys, time
import app.web.factory  # every table a web process has
from app.store import Store
open(sys.argv[3], "w").close()  # ready
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
Store(sys.argv[1]).close()
"""


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_servers_opening_a_new_database_at_once_all_open_it(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`serve --processes N`, or several servers started together against one new database:
    every one of them makes the tables it does not find, at the same moment. None may fail
    because another made a table between its look and its CREATE."""
    url = (
        f"sqlite:///{tmp_path / 'new.db'}"
        if database == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(6)]
    openers = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, url, str(go), str(r)], stderr=subprocess.PIPE, text=True)
               for r in ready]  # fmt: skip
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    for opener in openers:
        _, err = opener.communicate(timeout=120)
        assert opener.returncode == 0, err[-2000:]


def test_a_database_server_that_never_answers_fails_the_store_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A port that accepts connections and never says a word (a stuck server, or not PostgreSQL
    at all): opening the store fails with the driver's reason after the connect timeout, where
    it waited for good; a timeout the URL or libpq's environment gives is theirs."""
    import socket
    import threading

    from sqlalchemy.exc import OperationalError

    import app.store.database

    monkeypatch.setattr(app.store.database, "CONNECT_TIMEOUT_S", 2)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; no one answers
        url = f"postgresql+psycopg://learner@127.0.0.1:{silent.getsockname()[1]}/db"
        for given, limit, environment in [
            (url, 2, None),
            (url + "?connect_timeout=4", 4, None),
            (url, 3, "3"),
        ]:
            if environment is not None:  # libpq's own setting is left to libpq
                monkeypatch.setenv("PGCONNECT_TIMEOUT", environment)
            outcome: list[BaseException | None] = []

            def open_store(
                given: str = given, outcome: list[BaseException | None] = outcome
            ) -> None:
                try:
                    Store(given).close()
                    outcome.append(None)
                except Exception as exc:  # noqa: BLE001 - handed to the test's thread
                    outcome.append(exc)

            started = time.monotonic()
            opener = threading.Thread(target=open_store, daemon=True)
            opener.start()
            opener.join(timeout=limit + 8)
            waited = time.monotonic() - started
            assert outcome, f"opening the store still waits after {waited:.0f} s"
            assert isinstance(outcome[0], OperationalError) and "timeout" in str(outcome[0]), (
                outcome[0]
            )
            assert limit - 0.5 <= waited < limit + 4, waited
