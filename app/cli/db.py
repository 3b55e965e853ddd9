"""`ampquiz db upgrade|current|history|revision`: the database's schema (Alembic migrations).

`upgrade` brings the database `AMPQUIZ_DATABASE_URL` names to this ampquiz's schema, in one
transaction; on a database server (PostgreSQL) it is the step an operator takes after installing
a new ampquiz and before starting it (`serve` refuses an older schema and names this command). A
SQLite database upgrades itself when the server starts. `current` says where the database is
(`--check`: exit status 1 unless it is up to date), `history` lists the revisions, and `revision`
writes a new one from the models (for developers: see `app.store.migrate`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _engine(command: str) -> tuple[Any, str] | int:
    """The engine of the configured database and its URL, or the exit status after saying why
    not: 2 for a malformed setting, 1 for a database that cannot be opened."""
    from app.settings import Settings, SettingsError
    from app.store.database import UNOPENABLE, make_engine, unopenable

    try:
        url = Settings.from_env().database_url
    except SettingsError as exc:
        print(f"ampquiz db {command}: {exc}", file=sys.stderr)
        return 2
    try:
        return make_engine(url), url
    except UNOPENABLE as exc:  # a SQLite folder that cannot be made, a driver not installed
        print(f"ampquiz db {command}: {unopenable(url, exc)}", file=sys.stderr)
        return 1


def _upgrade(_args: argparse.Namespace) -> int:
    from app.store import migrate
    from app.store.database import UNOPENABLE, shown_url, unopenable

    opened = _engine("upgrade")
    if isinstance(opened, int):
        return opened
    engine, url = opened
    where = shown_url(url)
    try:
        done = migrate.upgrade(engine)
    except UNOPENABLE as exc:
        print(f"ampquiz db upgrade: {unopenable(url, exc)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    for step in done:
        print(f"{where}: {step}")
    if not done:
        print(f"{where}: at revision {migrate.head()} already, this ampquiz's own")
    return 0


def _current(args: argparse.Namespace) -> int:
    from app.store import migrate
    from app.store.database import UNOPENABLE, shown_url, unopenable

    opened = _engine("current")
    if isinstance(opened, int):
        return opened
    engine, url = opened
    where = shown_url(url)
    head = migrate.head()
    try:
        with engine.connect() as conn:
            revision = migrate.current(conn)
            ours = revision is None and migrate.has_tables(conn)
    except UNOPENABLE as exc:
        print(f"ampquiz db current: {unopenable(url, exc)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    if revision == head:
        said = f"{revision} (head): up to date"
    elif revision is None and not ours:
        said = f"none: an empty database (the server's first start, or `ampquiz db upgrade`, makes revision {head})"
    elif revision is None:
        said = (f"none: made before ampquiz had migrations; taken as revision {migrate.FIRST}, "
                f"this ampquiz needs {head}: run `ampquiz db upgrade`")  # fmt: skip
    elif revision in migrate.revisions():
        said = f"{revision}: this ampquiz needs {head}: run `ampquiz db upgrade`"
    else:
        said = f"{revision}: a revision this ampquiz does not know (it needs {head}): a newer ampquiz upgraded it"
    print(f"{where}: {said}")
    return 1 if args.check and revision != head else 0


def _history(_args: argparse.Namespace) -> int:
    from alembic.script import ScriptDirectory

    from app.store import migrate

    for script in ScriptDirectory(str(migrate.MIGRATIONS)).walk_revisions():  # newest first
        print(f"{script.revision}{' (head)' if script.is_head else ''}  {script.doc}")
    return 0


def _revision(args: argparse.Namespace) -> int:
    """A new revision from what the models say beyond the head: a scratch SQLite database is
    upgraded to the head and compared with every model (written for SQLite and PostgreSQL alike,
    ALTERs in batches). Read it, and fix it by hand: autogenerate misses renames, and a new NOT
    NULL column needs a server default for the rows already there."""
    import tempfile

    from alembic import command
    from sqlmodel import SQLModel

    import app.instructors
    import app.interview.model
    import app.store.tables  # noqa: F401 - every model, for their tables
    from app.store import migrate
    from app.store.database import make_engine

    found: list[bool] = []

    def note(_context: object, _revision: object, directives: list[Any]) -> None:
        found.append(not directives[0].upgrade_ops.is_empty())

    with tempfile.TemporaryDirectory() as scratch:
        engine = make_engine(f"sqlite:///{scratch}/head.db")
        try:
            migrate.upgrade(engine)
            with migrate.migrating(engine) as conn:
                settings = migrate.config(conn, target_metadata=SQLModel.metadata)
                script = command.revision(settings, message=args.message, autogenerate=True,
                                          rev_id=f"{int(migrate.head()) + 1:04d}", process_revision_directives=note)  # fmt: skip
        finally:
            engine.dispose()
    assert script is not None and not isinstance(script, list)
    print(script.path)
    if not any(found):
        print(
            "(the models say nothing new: an empty revision, to fill in by hand)", file=sys.stderr
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="the database's schema: upgrade, current, history, revision",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser(
        "upgrade", help="bring the database (AMPQUIZ_DATABASE_URL) to this ampquiz's schema"
    ).set_defaults(func=_upgrade)
    current = actions.add_parser(
        "current", help="the database's revision, and whether it is this ampquiz's"
    )
    current.add_argument(
        "--check", action="store_true", help="exit status 1 unless the database is up to date"
    )
    current.set_defaults(func=_current)
    actions.add_parser("history", help="the revisions, newest first").set_defaults(func=_history)
    revision = actions.add_parser(
        "revision", help="(developers) write a new revision from the models' changes"
    )
    revision.add_argument("-m", "--message", required=True, help="what it changes, a line")
    revision.set_defaults(func=_revision)
