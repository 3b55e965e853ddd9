"""The store's schema, kept by Alembic migrations (`migrations/versions/`, a revision a file).

What opening a database does (`open_schema`, from `Store`), whatever it holds:

- at this ampquiz's revision (the head): nothing more; one small read, and alembic is not even
  imported;
- empty (none of ampquiz's tables): upgraded to the head, on any database;
- made before ampquiz had migrations (its tables, no `alembic_version`): recognised as the first
  revision and stamped so. Tables an earlier ampquiz made only when first needed (interviews,
  instructors) are made then; what an older ampquiz lacked besides (columns, indexes, the
  summary tables, filled from the attempts) is added only where the database upgrades itself;
- behind: a SQLite database (the embedded default: its file belongs to this one server, and
  nobody else would upgrade it) upgrades itself; a server database (PostgreSQL) is upgraded only
  by `ampquiz db upgrade`, when its operator chooses (a backup first), and until then the store
  refuses it (`SchemaOutOfDate`, naming the command);
- at a revision this ampquiz does not know (a newer one upgraded it): refused.

Schema work is done in the schema's turn (`schema_turn`: `serve --processes N` opens the store in
every process at once), in one transaction, SQLite's included (`migrating`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Index, MetaData, Table, case, func, inspect, select, text
from sqlalchemy.engine import Connection, Engine

from app.store.database import SchemaOutOfDate, schema_turn, shown_url

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
VERSIONS = MIGRATIONS / "versions"
VERSION_TABLE = "alembic_version"
FIRST = "0001"
"""The revision a database made before migrations is: the schema ampquiz made then."""
SUMMARIES = ("last_answer", "topic_score")
"""Tables kept from the attempts: made later than the attempts, they are filled from them."""
UPGRADE = "run `ampquiz db upgrade`"
log = logging.getLogger("ampquiz.store")
for _name in ("alembic.runtime.migration", "alembic.runtime.plugins"):  # said here, a line a change
    if logging.getLogger(_name).level == logging.NOTSET:  # unless someone asked for alembic's lines
        logging.getLogger(_name).setLevel(logging.WARNING)


@functools.cache
def revisions() -> tuple[str, ...]:
    """This ampquiz's revisions, oldest first. A revision's file is named for it and revises the
    one before (`0002_courses.py` is revision "0002", down from "0001"; `ampquiz db revision`
    writes them so), so the head is a look at the folder, not alembic's reading of every file
    (tests check that alembic reads the same chain)."""
    return tuple(
        sorted(p.name.split("_", 1)[0] for p in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))
    )


def head() -> str:
    return revisions()[-1]


def upgrades_itself(engine: Engine) -> bool:
    """Whether the store upgrades this database when it opens it: SQLite (the embedded default,
    `sqlite:///var/ampquiz.db`, or any other SQLite file or memory), not a database server."""
    return engine.dialect.name == "sqlite"


def current(conn: Connection) -> str | None:
    """The database's revision; None where it has none (empty, or made before migrations)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    found = sorted(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    return "+".join(found) or None  # several heads: none this ampquiz knows


def has_tables(conn: Connection) -> bool:
    """Whether the database holds any of ampquiz's tables (those of the first revision)."""
    return bool(set(first_schema().tables) & set(inspect(conn).get_table_names()))


def open_schema(engine: Engine) -> list[str]:
    """Brings the database to this ampquiz's head where the store may (see the module), or raises
    `SchemaOutOfDate`. Returns what it did, in words (nothing, at the head). It looks in the
    schema's turn too, as the store always did (a server's start takes the connections it took)."""
    with schema_turn(engine):
        done = bring_up(engine, upgrade=upgrades_itself(engine))
    for step in done:
        log.info(
            "the database at %s: %s",
            shown_url(engine.url.render_as_string(hide_password=False)),
            step,
        )
    return done


def upgrade(engine: Engine) -> list[str]:
    """`ampquiz db upgrade`: the database brought to the head, whatever it is (`SchemaOutOfDate`
    only for a revision this ampquiz does not know). Returns what it did, in words."""
    with schema_turn(engine):
        return bring_up(engine, upgrade=True)


def bring_up(engine: Engine, *, upgrade: bool) -> list[str]:
    """The database at the head, in one transaction; `upgrade` False: only as far as changes
    nothing a database already holds (an empty one made, a pre-migration one stamped), and
    `SchemaOutOfDate` where more is needed. Call in the schema's turn."""
    target, done = head(), list[str]()
    with engine.connect() as conn:
        revision = current(conn)
    if revision == target:  # the usual case, done without importing alembic (a tenth of a second)
        return done
    from alembic import command

    where = shown_url(engine.url.render_as_string(hide_password=False))
    if revision is not None and revision not in revisions():
        raise SchemaOutOfDate(
            f"the database at {where} is at revision {revision}, which this ampquiz does not know "
            f"(it needs {target}): a newer ampquiz upgraded it; run that one"
        )
    with migrating(engine) as conn:
        settings = config(conn)
        if revision is None and has_tables(conn):  # made before migrations
            adoption = Adoption.of(conn)
            if adoption.changes_existing and not upgrade:
                raise SchemaOutOfDate(
                    f"the database at {where} was made by an earlier ampquiz and lacks "
                    f"{', '.join(adoption.changes())}; this ampquiz needs revision {target}: {UPGRADE}"
                )
            adoption.apply(conn)
            command.stamp(settings, FIRST)
            done.append(f"recognised as revision {FIRST} (made before migrations)"
                        + (f": added {', '.join(adoption.changes())}" if adoption.changes() else ""))  # fmt: skip
            revision = FIRST
        if revision != target:
            if revision is not None and not upgrade:
                raise SchemaOutOfDate(
                    f"the database at {where} is at revision {revision}, this ampquiz needs {target}: {UPGRADE}"
                )
            command.upgrade(settings, target)
            done.append(f"upgraded from {revision or 'empty'} to {target}")
    return done


@contextlib.contextmanager
def migrating(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction for a whole schema change, committed at the end. On
    SQLite too: its driver runs each CREATE and ALTER outside any transaction unless one is begun
    by hand, so a failed upgrade was left half done. SQLite's foreign keys are off meanwhile: a
    batch ALTER copies a table and drops the old one, which they would stop or cascade from."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        if sqlite:
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction
            conn.commit()
        try:
            with conn.begin():
                if sqlite:
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                yield conn
        finally:
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()


def config(connection: Connection | None = None, **attributes: Any) -> Config:
    """Alembic's configuration, made here (no alembic.ini): the migrations' folder, and the
    connection `migrations/env.py` runs them on."""
    from alembic.config import Config

    settings = Config()
    settings.set_main_option("script_location", str(MIGRATIONS))
    settings.set_main_option("path_separator", "os")
    settings.attributes.update(connection=connection, **attributes)
    return settings


@functools.cache
def first_schema() -> MetaData:
    """The first revision's tables, as its file declares them (kept as they are there, whatever
    the models become)."""
    from alembic.script import ScriptDirectory

    schema = MetaData()
    first = ScriptDirectory(str(MIGRATIONS)).get_revision(FIRST)
    assert first is not None
    first.module.tables(lambda name, *items: Table(name, schema, *items))
    return schema


@dataclass
class Adoption:
    """What a database made before migrations lacks of the first revision: what an earlier
    ampquiz made only when first needed (interviews, instructors), or not yet at all (columns,
    indexes, the summary tables). The same additions ampquiz made in place before it had
    migrations, nothing dropped; every column added since its table was first made has a
    default, so old rows stay valid."""

    tables: list[Table] = field(default_factory=list)
    columns: list[Column[Any]] = field(default_factory=list)
    indexes: list[Index] = field(default_factory=list)

    @classmethod
    def of(cls, conn: Connection) -> Adoption:
        found, adoption = inspect(conn), cls()
        have = set(found.get_table_names())
        for table in first_schema().sorted_tables:
            if table.name not in have:
                adoption.tables.append(table)
                continue
            columns = {c["name"] for c in found.get_columns(table.name)}
            adoption.columns += [c for c in table.columns if c.name not in columns]
            indexes = {i["name"] for i in found.get_indexes(table.name)}
            adoption.indexes += [i for i in table.indexes if i.name not in indexes]
        return adoption

    @property
    def summaries(self) -> list[str]:
        return [t.name for t in self.tables if t.name in SUMMARIES]

    @property
    def changes_existing(self) -> bool:
        """Whether it changes what the database holds (beyond new, empty tables)."""
        return bool(self.columns or self.indexes or self.summaries)

    def changes(self) -> list[str]:
        return ([f"table {t.name}" for t in self.tables] + [f"column {c.table.name}.{c.name}" for c in self.columns]
                + [f"index {i.name}" for i in self.indexes])  # fmt: skip

    def apply(self, conn: Connection) -> None:
        for table in self.tables:
            table.create(conn)
        for column in self.columns:
            kind = column.type.compile(conn.dialect)
            default = " NOT NULL DEFAULT ''" if not column.nullable else ""
            conn.execute(
                text(
                    f'ALTER TABLE "{column.table.name}" ADD COLUMN "{column.name}" {kind}{default}'
                )
            )
        for index in self.indexes:
            index.create(conn)
        if self.summaries:
            fill_summaries(conn, self.summaries)


def fill_summaries(conn: Connection, missing: list[str]) -> None:
    """Fills the summary tables just made (`missing`) from the attempts already stored."""
    schema = first_schema()
    attempts = schema.tables["attempt"].c
    if "last_answer" in missing:
        last = select(func.max(attempts.id)).group_by(
            attempts.learner_id, attempts.question_id, attempts.fingerprint
        )
        rows = select(
            attempts.learner_id,
            attempts.question_id,
            attempts.fingerprint,
            attempts.id,
            attempts.correct,
        )
        conn.execute(schema.tables["last_answer"].insert().from_select(
            ["learner_id", "question_id", "fingerprint", "attempt_id", "correct"], rows.where(attempts.id.in_(last))))  # fmt: skip
    if "topic_score" in missing:
        rows = select(
            attempts.learner_id,
            attempts.topic,
            func.count(),
            func.sum(case((attempts.correct, 1), else_=0)),
        )
        conn.execute(schema.tables["topic_score"].insert().from_select(
            ["learner_id", "topic", "attempts", "right_attempts"], rows.group_by(attempts.learner_id, attempts.topic)))  # fmt: skip
