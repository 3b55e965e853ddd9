"""Alembic's environment for the store's migrations.

`app.store.migrate` runs it (the store at start, `ampquiz db`) with the connection to migrate in
`config.attributes["connection"]`, already in the transaction the whole upgrade is one of, and
with the models' metadata in `config.attributes["target_metadata"]` when autogenerating.
Given `sqlalchemy.url` instead (alembic's own command line), it opens that database itself the
same way. No alembic.ini: the configuration is made in code (`app.store.migrate.config`).
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy.types import TypeDecorator

from app.store.migrate import migrating

config = context.config


def render_item(kind: str, obj: Any, _autogen: Any) -> str | Literal[False]:
    """SQLModel's column types (`AutoString`, `UTCDateTime`) written as the SQLAlchemy types
    under them: a revision stays as it was written whatever the models' library becomes."""
    if (
        kind == "type"
        and isinstance(obj, TypeDecorator)
        and type(obj).__module__.startswith("sqlmodel")
    ):
        return f"sa.{obj.impl_instance!r}"
    return False


def configure(**given: Any) -> None:
    context.configure(
        **given,
        target_metadata=config.attributes.get("target_metadata"),
        # Autogenerate writes SQLite-proof ALTERs (a batch copies the table there; elsewhere it
        # is the plain ALTER): a revision must run on the SQLite default and on PostgreSQL alike.
        render_as_batch=True,
        render_item=render_item,
        compare_type=True,
    )


def run(connection: Any) -> None:
    configure(connection=connection)
    with context.begin_transaction():  # nothing when `connection` is in its transaction already
        context.run_migrations()


if context.is_offline_mode():  # `alembic upgrade --sql`: the statements, printed
    configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif (given := config.attributes.get("connection")) is not None:
    run(given)
else:
    from app.store.database import make_engine

    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        with migrating(engine) as connection:
            run(connection)
    finally:
        engine.dispose()
