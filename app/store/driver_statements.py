"""The learner's busiest statements run on the driver's own cursor: compiled once by SQLAlchemy
for an engine's dialect, their values converted by SQLAlchemy's column types both ways, but
without SQLAlchemy's per-execution work, which cost as much as the database's (`DriverQuery`,
`DriverWrite`; `rows_together` sends a page's reads in one round trip where the driver can).
`app.store.repository` builds them; `app.store.database` keeps the engines they run on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel.sql.sqltypes import UTCDateTime


class DriverQuery:
    """A SELECT compiled once for an engine's dialect and run on the driver's own cursor.

    For the learner's busiest reads (a question's state, the progress page's summary) SQLAlchemy's
    per-execution work (the compiled cache's lookup, result metadata, a processor per column and
    row) cost as much as the database's: the progress page's four queries took 0.52 ms through
    `Connection.execute` and 0.24 ms on the cursor, and the whole summary 0.685 -> 0.563 ms with
    the values converted as below (SQLite, 172 questions answered). Rows are plain tuples of the
    values SQLAlchemy would give. A driver error is handed to SQLAlchemy by running
    the statement its usual way once more, so a dropped connection is invalidated and reported as
    always (see `reconnecting`)."""

    def __init__(self, engine: Engine, statement: Any) -> None:
        self.statement = statement
        compiled = statement.compile(dialect=engine.dialect)
        self.sql = compiled.string
        self._names = compiled.positiontup  # None where the driver takes named parameters
        # Values fixed in the statement itself (a LIMIT 1 is a parameter too).
        self._fixed = {
            name: bind.value for name, bind in compiled.binds.items() if not bind.required
        }
        self._error = engine.dialect.loaded_dbapi.Error
        self._dialect = engine.dialect
        self._converters: list[tuple[int, Callable[[Any], Any]]] | None = (
            None  # from the first result
        )

    def _converters_for(self, description: Any) -> list[tuple[int, Callable[[Any], Any]]]:
        """Each column's values as SQLAlchemy would hand them back: its own result processors (for
        SQLite's text datetimes and integer booleans, a type decorator's UTC), chosen as it
        chooses them: by the column's type and the driver's type code. Only columns that have one."""
        dialect, columns = self._dialect, self.statement.selected_columns
        processors = (_fast_utc(c.type, dialect, d[1]) or c.type.dialect_impl(dialect).result_processor(dialect, d[1])
                      for c, d in zip(columns, description))  # fmt: skip
        return [(i, f) for i, f in enumerate(processors) if f is not None]

    def _args(self, params: dict[str, Any]) -> Any:
        given = {**self._fixed, **params} if self._fixed else params
        return given if self._names is None else [given[name] for name in self._names]

    def rows(self, conn: Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(self.sql, self._args(params))
            return self._converted(cursor)
        except self._error:
            return self._the_usual_way(conn, params)
        finally:
            cursor.close()

    def _the_usual_way(self, conn: Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in conn.execute(self.statement, params).all()]

    def _converted(self, cursor: Any) -> list[tuple[Any, ...]]:
        rows = cursor.fetchall()
        if self._converters is None:
            self._converters = self._converters_for(cursor.description)
        if not self._converters:
            return rows
        converted = []
        for row in rows:
            values = list(row)
            for i, convert in self._converters:
                values[i] = convert(values[i])
            converted.append(tuple(values))
        return converted


def rows_together(
    conn: Connection, reads: list[tuple[DriverQuery, dict[str, Any]]]
) -> list[list[tuple[Any, ...]]]:
    """The rows of several reads, as `DriverQuery.rows` gives each, in one round trip where the
    driver pipelines (psycopg on PostgreSQL: all the statements sent, then all the results read);
    one after another elsewhere (SQLite has no round trips to save). The progress page's four
    reads on PostgreSQL: 0.75 -> 0.39 ms and 420 -> 280 us of the web's CPU. A driver error
    (a dropped connection, say) ends the pipeline, and each read is then made on its own, so
    that it is reported or retried as any read is (see `reconnecting`)."""
    driver = conn.connection.driver_connection
    pipeline = getattr(driver, "pipeline", None)
    if driver is None or pipeline is None or len(reads) < 2:
        return [query.rows(conn, params) for query, params in reads]
    cursors = []
    try:
        try:
            with pipeline():
                for query, params in reads:
                    cursors.append(cursor := driver.cursor())
                    cursor.execute(query.sql, query._args(params))
            return [query._converted(cursor) for (query, _), cursor in zip(reads, cursors)]
        finally:
            for cursor in cursors:
                cursor.close()
    except reads[0][0]._error:
        return [query._the_usual_way(conn, params) for query, params in reads]


def _fast_utc(column_type: Any, dialect: Any, type_code: Any) -> Callable[[Any], Any] | None:
    """SQLite's text times as SQLModel's `UTCDateTime` hands them back (aware, UTC), parsed as
    aware in one C call: its type decorator parses a naive time, then `replace(tzinfo=UTC)`
    (0.9 us alone): 1.5 us a row, half of reading a learner's 172 review cards. What SQLite holds
    is UTC without an offset (the decorator's own bind step writes it so); anything that does not
    parse so goes SQLAlchemy's way."""
    if dialect.name != "sqlite" or not isinstance(column_type, UTCDateTime):
        return None
    usual = column_type.dialect_impl(dialect).result_processor(dialect, type_code)
    assert usual is not None
    parse = datetime.fromisoformat

    def as_utc(value: Any) -> Any:
        if value is None:
            return None
        try:
            moment = parse(value + "+00:00")
        except (TypeError, ValueError):
            return usual(value)
        return moment if moment.tzinfo is not None else usual(value)

    return as_utc


class DriverWrite:
    """An INSERT or UPDATE compiled once for an engine's dialect and run on the driver's own
    cursor, inside a transaction SQLAlchemy began (`engine.begin()`), which commits it.

    Recording an answer is five statements: through `Connection.execute` SQLAlchemy's own work
    per statement (the compiled cache, an execution context, a result object) was about half of
    the answer's CPU. Values go through SQLAlchemy's bind processors for their columns (SQLite's
    text datetimes, a type decorator's UTC), as they would there. A driver error is raised as
    SQLAlchemy raises it (an `IntegrityError` is one still), after the connection is invalidated
    when the error says it is gone, so `reconnecting` tries once more as for any other call.

    `columns`: the columns given at execution (an INSERT without `.values()`); every other
    parameter the statement needs is refused here, at construction, not at the first answer.
    With `returning`, `run` gives that column of the first row written (the new id); with
    `returns_value`, the first value of the first row the statement gives (one that returns
    already: a SELECT over data-modifying CTEs)."""

    def __init__(self, engine: Engine, statement: Any, columns: tuple[str, ...] | None = None,
                 returning: Any = None, *, returns_value: bool = False) -> None:  # fmt: skip
        dialect = engine.dialect
        if returning is not None:
            statement = statement.returning(returning)
        compiled = statement.compile(
            dialect=dialect, column_keys=list(columns) if columns is not None else None
        )
        if columns is not None and set(compiled.binds) - set(columns):
            raise ValueError(
                f"{statement!r} also needs {sorted(set(compiled.binds) - set(columns))}"
            )
        self.sql = compiled.string
        self._names = compiled.positiontup  # None where the driver takes named parameters
        self._bind = {
            name: process for name, bind in compiled.binds.items()
            if (process := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }  # fmt: skip
        self._returning = returning is not None or returns_value
        self._dialect = dialect
        self._error = dialect.loaded_dbapi.Error

    def run(self, conn: Connection, params: dict[str, Any]) -> Any:
        given = {
            name: (self._bind[name](value) if name in self._bind else value)
            for name, value in params.items()
        }
        args = given if self._names is None else [given[name] for name in self._names]
        dbapi_connection = conn.connection.dbapi_connection
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(self.sql, args)
            return cursor.fetchone()[0] if self._returning else cursor.rowcount
        except self._error as exc:
            gone = self._dialect.is_disconnect(exc, dbapi_connection, cursor)
            if gone:
                conn.invalidate(exc)
            raise DBAPIError.instance(self.sql, args, exc, self._error, connection_invalidated=gone,
                                      dialect=self._dialect) from exc  # fmt: skip
        finally:
            cursor.close()
