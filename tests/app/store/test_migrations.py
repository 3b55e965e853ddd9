"""The store's schema as Alembic migrations (`app.store.migrate`): the revisions make what the
models declare, on SQLite and PostgreSQL; a database holding rows is upgraded without losing
any; a database made before migrations is recognised as the first revision; a SQLite database
upgrades itself, a server database on an older schema is refused, naming `ampquiz db upgrade`.

An upgrade past the head is tried with a throwaway next revision (`SECOND`), written to a copy of
the migrations folder: it copies `learner` and `attempt` whole on SQLite (a batch ALTER: the
riskiest change a revision makes there), adds a column to each and a table. A database made
before migrations is made as the first revision left it: at the head, then downgraded to it."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlmodel import SQLModel

from app import instructors
from app.interview import model as interviews
from app.store import ReviewUpdate, Store, migrate
from app.store.database import SchemaOutOfDate, make_engine

ROOT = Path(__file__).resolve().parents[3]

HEAD = migrate.head()
NEXT = f"{int(HEAD) + 1:04d}"
"""The throwaway revision's number, after this ampquiz's head."""

SECOND = f'''"""A throwaway revision after the head, for the tests.

Revision ID: {NEXT}
Revises: {HEAD}
"""

import sqlalchemy as sa
from alembic import op

revision = "{NEXT}"
down_revision = "{HEAD}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("course", sa.Column("id", sa.String(64), primary_key=True))
    # SQLite: the tables copied whole, as any ALTER beyond an added column does there.
    recreate = "always" if op.get_context().dialect.name == "sqlite" else "auto"
    with op.batch_alter_table("learner", recreate=recreate) as batch:
        batch.add_column(sa.Column("nickname", sa.String(40), nullable=True))
    with op.batch_alter_table("attempt", recreate=recreate) as batch:
        batch.add_column(sa.Column("course_id", sa.String(64), nullable=False, server_default=""))
        batch.create_index("ix_attempt_course_id", ["course_id"])
    BREAK


def downgrade() -> None:
    op.drop_table("course")
'''


def models() -> sa.MetaData:
    """Every table the models declare (imported above: the store's, the interviews', the instructors')."""
    assert {"attempt", "interview", "sign_in_link"} <= set(SQLModel.metadata.tables)
    return SQLModel.metadata


def differences(url: str, metadata: sa.MetaData) -> list[Any]:
    """What alembic's autogenerate finds between the database and `metadata` (types compared)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), metadata
            )
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each kind (PostgreSQL: a database of the test's own)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'ampquiz.db'}"
    return request.getfixturevalue("postgres_url")


def second_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breaks: bool = False) -> Path:
    """The migrations, with `SECOND` after the head, as this process's (a copy in `tmp_path`)."""
    folder = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "versions" / f"{NEXT}_throwaway.py").write_text(
        SECOND.replace("BREAK", 'raise RuntimeError("half-way")' if breaks else "")
    )
    monkeypatch.setattr(migrate, "MIGRATIONS", folder)
    monkeypatch.setattr(migrate, "VERSIONS", folder / "versions")
    migrate.revisions.cache_clear()
    return folder


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    yield
    migrate.revisions.cache_clear()  # a test's own migrations folder is gone with it


def at_the_head(url: str) -> None:
    """The database made by this ampquiz's revisions, as the ampquiz before `SECOND` made it."""
    from alembic import command

    engine = make_engine(url)
    try:
        with migrate.migrating(engine) as conn:
            command.upgrade(migrate.config(conn), HEAD)
    finally:
        engine.dispose()


def down_to_the_first_revision(url: str) -> None:
    """The database taken back to the first revision (what later ones added dropped)."""
    from alembic import command

    engine = make_engine(url)
    try:
        with migrate.migrating(engine) as conn:
            command.downgrade(migrate.config(conn), migrate.FIRST)
    finally:
        engine.dispose()


def fill(store: Store) -> None:
    """A row or more in every table, as the app writes them: learners' attempts (with their
    summaries), review cards, a kept run, an interview and its events, an instructor and a
    sign-in link."""
    due = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    for i, (learner, correct) in enumerate([("ann", False), ("ann", True), ("bob", False)]):
        store.record_attempt(learner, question_id=f"q{i % 2}", set_id="s", topic="autocast", kind="multiple_choice",
                             answer=[i], correct=correct, fingerprint="v1", submit_id=f"form-{i}", seconds=1.5 + i,
                             review=None if correct else ReviewUpdate(card_json=json.dumps({"n": i}), due=due))  # fmt: skip
    store.keep_run("k" * 64, '{"stdout": "ok"}')
    made = interviews.create(
        store, ["q0", {"id": "snippet-1", "code": "print(1)"}], by="ida", minutes=30
    )
    interviews.append(store, made.interview.id, "note", {"text": "good"})
    instructors.add(store, "ida")
    instructors.new_link(store, "ida")


def rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table the first revision made, in a stable order."""
    engine = sa.create_engine(url)
    try:
        schema = migrate.first_schema()
        with engine.connect() as conn:
            return {name: sorted(conn.execute(sa.select(*table.columns)).all(), key=repr)
                    for name, table in schema.tables.items()}  # fmt: skip
    finally:
        engine.dispose()


def columns(engine: sa.Engine) -> dict[str, list[str]]:
    """Every table's columns, as the database describes them."""
    with engine.connect() as conn:
        found = sa.inspect(conn)
        return {name: [f"{c['name']} {c['type']} {c['nullable']}" for c in found.get_columns(name)]
                for name in found.get_table_names()}  # fmt: skip


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return migrate.current(conn)
    finally:
        engine.dispose()


# ---- the revisions and the models ---------------------------------------------------------------


def test_the_revisions_are_one_chain_named_as_alembic_reads_them() -> None:
    """The store finds the head from the folder's file names (alembic is not imported to open an
    up-to-date database): they must say what alembic reads in the files."""
    scripts = ScriptDirectory(str(migrate.MIGRATIONS))
    chain = [s.revision for s in reversed(list(scripts.walk_revisions()))]
    assert scripts.get_heads() == [migrate.head()] and tuple(chain) == migrate.revisions()
    for older, newer in itertools.pairwise(chain):
        assert scripts.get_revision(newer).down_revision == older
    for path in migrate.VERSIONS.glob("*.py"):
        assert path.name.startswith(scripts.get_revision(path.name[:4]).revision + "_"), path


def test_upgrading_an_empty_database_makes_what_the_models_declare(url: str) -> None:
    engine = make_engine(url)
    assert migrate.upgrade(engine) == [f"upgraded from empty to {migrate.head()}"]
    engine.dispose()
    assert differences(url, models()) == []
    assert revision_of(url) == migrate.head()


def test_the_check_finds_a_model_change_no_revision_made(url: str) -> None:
    """What the test above would say of a column, a table or an index added to a model and not
    to a revision: a difference, so it fails."""
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    for change in ("column", "table", "index"):
        changed = sa.MetaData()
        for table in models().sorted_tables:
            table.to_metadata(changed)
        if change == "column":
            changed.tables["attempt"].append_column(
                sa.Column("course_id", sa.String(64), nullable=True)
            )
        elif change == "table":
            sa.Table("course", changed, sa.Column("id", sa.String(64), primary_key=True))
        else:
            sa.Index("ix_review_card_fingerprint", changed.tables["review_card"].c.fingerprint)
        found = differences(url, changed)
        assert len(found) == 1 and found[0][0] == f"add_{change}", (change, found)


def test_a_fresh_store_opens_at_the_head_and_an_up_to_date_one_changes_nothing(url: str) -> None:
    store = Store(url)
    assert store.schema_changes == [f"upgraded from empty to {migrate.head()}"]
    fill(store)
    store.close()
    again = Store(url)
    assert again.schema_changes == [] and len(again.learner_data("ann").recent) == 2
    again.close()


# ---- upgrades keep every row ----------------------------------------------------------------------


def test_a_database_holding_rows_is_upgraded_and_keeps_every_one(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the head, with rows in every table; upgraded to a next revision that copies
    the learners' and the attempts' tables whole on SQLite (their foreign keys, the attempts'
    ids): every row is there after, as it was, and the app reads them as before."""
    at_the_head(url)
    store = Store(url)
    fill(store)
    before, progress = rows(url), store.learner_data("ann")
    store.close()
    assert all(before.values()), before

    second_revision(tmp_path, monkeypatch)
    if url.startswith("sqlite"):  # the embedded database upgrades itself
        store = Store(url)
        assert store.schema_changes == [f"upgraded from {HEAD} to {NEXT}"]
    else:
        with pytest.raises(SchemaOutOfDate):
            Store(url)
        assert rows(url) == before and revision_of(url) == HEAD  # refused, and nothing changed
        engine = make_engine(url)
        assert migrate.upgrade(engine) == [f"upgraded from {HEAD} to {NEXT}"]
        engine.dispose()
        store = Store(url)
    assert revision_of(url) == NEXT and rows(url) == before
    after = store.learner_data("ann")
    assert (after.latest, after.by_topic, after.recent) == (
        progress.latest,
        progress.by_topic,
        progress.recent,
    )
    assert instructors.names(store) == ["ida"]
    store.close()
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert (
            conn.execute(sa.text("SELECT count(*) FROM attempt WHERE course_id = ''")).scalar_one()
            == 3
        )
        if url.startswith("sqlite"):  # the copied tables' foreign keys still hold
            assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
    engine.dispose()


def test_an_upgrade_that_fails_half_way_leaves_the_database_as_it_was(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction for the whole upgrade, on SQLite too (whose driver runs each ALTER on its
    own unless a transaction is begun by hand)."""
    at_the_head(url)
    store = Store(url)
    fill(store)
    store.close()
    before = rows(url)
    engine = make_engine(url)
    tables = columns(engine)
    second_revision(tmp_path, monkeypatch, breaks=True)
    with pytest.raises(RuntimeError, match="half-way"):
        migrate.upgrade(engine)
    assert (
        columns(engine) == tables
    )  # no table made (the first thing it did), copied or left half copied
    engine.dispose()
    assert revision_of(url) == HEAD and rows(url) == before


def test_a_database_at_a_revision_this_ampquiz_does_not_know_is_refused(url: str) -> None:
    Store(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutOfDate, match="revision 9999, which this ampquiz does not know"):
        Store(url)


# ---- databases made before migrations ------------------------------------------------------------


def made_before_migrations(url: str, *, leave_out: tuple[str, ...] = ()) -> None:
    """A database as ampquiz made it before it had migrations (the first revision's tables, no
    `alembic_version`), with rows in every table; `leave_out`: tables it did not have."""
    store = Store(url)
    fill(store)
    store.close()
    down_to_the_first_revision(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for name in ("alembic_version", *leave_out):
            conn.execute(sa.text(f"DROP TABLE {name}"))
    engine.dispose()


def opened_from_before_migrations(url: str, recognised: str) -> None:
    """Opens a database made before migrations: stamped as the first revision (`recognised`
    says so), then upgraded to the head where the store upgrades (SQLite); a server database past
    the first revision is refused, changed in nothing, until `ampquiz db upgrade` does the same."""
    done = [recognised] + (
        [f"upgraded from {migrate.FIRST} to {HEAD}"] if HEAD != migrate.FIRST else []
    )
    if url.startswith("postgresql") and HEAD != migrate.FIRST:
        with pytest.raises(SchemaOutOfDate, match=f"needs {HEAD}: run `ampquiz db upgrade`"):
            Store(url)
        assert revision_of(url) is None
        engine = make_engine(url)
        assert migrate.upgrade(engine) == done
        engine.dispose()
    store = Store(url)
    assert store.schema_changes == (
        [] if url.startswith("postgresql") and HEAD != migrate.FIRST else done
    )
    store.close()
    assert revision_of(url) == HEAD


def test_a_database_made_before_migrations_is_taken_as_the_first_revision(url: str) -> None:
    """As every deployment before migrations made it (`create_all` of the models then, the first
    revision's tables): stamped, nothing changed, and upgraded from there."""
    made_before_migrations(url)
    assert differences(url, migrate.first_schema()) == []  # what `create_all` made then
    before = rows(url)

    opened_from_before_migrations(url, "recognised as revision 0001 (made before migrations)")
    assert rows(url) == before and differences(url, models()) == []


def test_one_made_before_the_interviews_were_ever_used_gets_their_tables_too(url: str) -> None:
    """Interviews' and instructors' tables were made when first used: a database without them
    is still the first revision, their tables made empty."""
    made_before_migrations(
        url, leave_out=("sign_in_link", "instructor", "interview_event", "interview")
    )
    made = "added table instructor, table interview, table interview_event, table sign_in_link"
    opened_from_before_migrations(
        url, f"recognised as revision 0001 (made before migrations): {made}"
    )
    store = Store(url)
    instructors.add(store, "ida")
    store.close()
    assert differences(url, models()) == []


def test_one_made_by_an_older_ampquiz_is_brought_up_where_it_may_be(url: str) -> None:
    """Before the summary tables, an answer's seconds and the attempts' index by question:
    SQLite brings itself up (the summaries filled from the attempts); a server database is
    refused, naming the command, until `ampquiz db upgrade` does the same."""
    store = Store(url)
    fill(store)
    progress = store.learner_data("ann")
    store.close()
    down_to_the_first_revision(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in ("DROP TABLE alembic_version", "DROP TABLE last_answer", "DROP TABLE topic_score",
                          "DROP INDEX ix_attempt_learner_question", "ALTER TABLE attempt DROP COLUMN seconds"):  # fmt: skip
            conn.execute(sa.text(statement))
    engine.dispose()

    if url.startswith("postgresql"):
        with pytest.raises(SchemaOutOfDate) as refused:
            Store(url)
        assert str(refused.value).endswith(
            f"this ampquiz needs revision {HEAD}: run `ampquiz db upgrade`"
        )
        assert (
            "lacks table last_answer, table topic_score, column attempt.seconds, index ix_attempt_learner_question"
            in str(refused.value)
        )
        assert revision_of(url) is None
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
    store = Store(url)
    after = store.learner_data("ann")
    assert (after.latest, after.by_topic) == (progress.latest, progress.by_topic)
    assert [a.seconds for a in after.recent] == [None, None]  # not kept then
    store.close()
    assert revision_of(url) == HEAD and differences(url, models()) == []


# ---- the server on an older schema -----------------------------------------------------------------

WITH_MIGRATIONS = """
import sys
from pathlib import Path
import app.store.migrate as migrate
migrate.MIGRATIONS = Path(sys.argv.pop(1))
migrate.VERSIONS = migrate.MIGRATIONS / "versions"
exec(sys.argv.pop(1))
"""
"""`python -c WITH_MIGRATIONS FOLDER CODE ARGS…`: CODE run with the migrations in FOLDER."""
AMPQUIZ = "from app.cli import main; sys.exit(main(sys.argv[1:]))"
WEB_PROCESS = "import app.web.server.process as p; p.create_app()"


def ampquiz_with(
    folder: Path, code: str, *args: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITH_MIGRATIONS, str(folder), code, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_serve_on_a_server_database_at_an_older_revision_refuses_and_names_the_command(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real `ampquiz serve` (its web processes, its sandbox pool) whose migrations are a revision
    ahead of the database: it says so in a line and stops, leaving the database as it was; so
    does a web process on its own (serve's check passed before a newer ampquiz was installed,
    say). `ampquiz db upgrade` upgrades it, and `ampquiz db current --check` then says so."""
    from tests.support.processes import eventually_empty, processes_with_environment
    from tests.support.server import Server

    at_the_head(postgres_url)
    folder = second_revision(tmp_path, monkeypatch)
    env = {**Server(tmp_path).env, "AMPQUIZ_DATABASE_URL": postgres_url, "AMPQUIZ_SECRET_KEY": "tests-secret-key-of-the-right-length-0123456789",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    needs = f"the database at {postgres_url} is at revision {HEAD}, this ampquiz needs {NEXT}: run `ampquiz db upgrade`"

    out = ampquiz_with(folder, AMPQUIZ, "serve", "--processes", "2", env=env, cwd=tmp_path)
    assert (
        out.returncode == 1 and "Traceback" not in out.stderr and "serving on" not in out.stderr
    ), out.stderr[-3000:]
    assert [line for line in out.stderr.splitlines() if line.startswith("ampquiz")] == [
        f"ampquiz serve: {needs}"
    ]
    assert eventually_empty(lambda: processes_with_environment(str(tmp_path))) == []
    out = ampquiz_with(folder, WEB_PROCESS, env=env, cwd=tmp_path)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.stderr.strip().splitlines()[-1] == f"ampquiz: a web process could not start: {needs}"
    assert revision_of(postgres_url) == HEAD

    assert (
        ampquiz_with(folder, AMPQUIZ, "db", "current", "--check", env=env, cwd=tmp_path).returncode
        == 1
    )
    upgraded = ampquiz_with(folder, AMPQUIZ, "db", "upgrade", env=env, cwd=tmp_path)
    assert upgraded.stdout == f"{postgres_url}: upgraded from {HEAD} to {NEXT}\n", upgraded
    checked = ampquiz_with(folder, AMPQUIZ, "db", "current", "--check", env=env, cwd=tmp_path)
    assert (
        checked.returncode == 0 and checked.stdout == f"{postgres_url}: {NEXT} (head): up to date\n"
    ), checked


def test_the_cli_says_where_a_database_stands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    env = {**os.environ, "AMPQUIZ_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}

    def ampquiz(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "app.cli", "db", *args], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
        return out.stdout

    assert (
        ampquiz("current")
        == f"{url}: none: an empty database (the server's first start, or `ampquiz db upgrade`, makes revision {HEAD})\n"
    )
    assert ampquiz("upgrade") == f"{url}: upgraded from empty to {HEAD}\n"
    assert ampquiz("upgrade") == f"{url}: at revision {HEAD} already, this ampquiz's own\n"
    assert ampquiz("current") == f"{url}: {HEAD} (head): up to date\n"
    history = ampquiz("history")
    assert history.startswith(f"{HEAD} (head)  ") and history.rstrip().splitlines()[-1].startswith(
        "0001 "
    )
    assert "  The first schema: every table and index" in history
