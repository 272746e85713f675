"""The durable attempt log's file layout: what a file must hold to be ours, and setting it up
(create, check, migrate) so that many processes may start appending to one file at once.

The file carries its layout version in `nbagent_meta`. An older layout (fewer columns) is read
as it is, missing columns empty, and migrated (the columns added) when written to; a file that
is not ours, or newer than us, is refused with a `ConfigError` before anything in it changes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator

from ..errors import ConfigError
from ._frame import COLUMNS, FLOAT_COLUMNS, INT_COLUMNS

LogTarget = str | os.PathLike[str] | sqlite3.Connection
"""A durable attempt log, as `Agent(log=...)`, `nbagent.watch(log=...)` and `read_attempts`
take it: a SQLite file path (made when it does not exist), or an open `sqlite3.Connection`.
Many agents, processes and sessions may write to one file; each row names its agent."""

SCHEMA_VERSION = 1
KIND = "nbagent.attempts"
TABLE = "attempts"
META = "nbagent_meta"
BUSY_TIMEOUT_S = 30.0

_SQL_TYPE = {
    c: "INTEGER" if c in INT_COLUMNS else "REAL" if c in FLOAT_COLUMNS else "TEXT" for c in COLUMNS
}


def label_of(target: LogTarget) -> str:
    return "the sqlite3 connection given" if isinstance(target, sqlite3.Connection) else str(target)


def connect(target: LogTarget) -> sqlite3.Connection:
    """A connection to write to the log through (the one given, or one to the path)."""
    if isinstance(target, sqlite3.Connection):
        return target
    return sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )


def table_names(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(r[0]) for r in rows if not str(r[0]).startswith("sqlite_")}


def check_version(conn: sqlite3.Connection, label: str, tables: set[str]) -> int | None:
    """The file's layout version; None for an empty database. Refuses foreign and newer files."""
    if META not in tables:
        if tables:
            names = ", ".join(sorted(tables)[:5])
            raise ConfigError(
                f"{label} is not an nbagent attempt log (it holds other tables: {names}); "
                "give the log a file of its own"
            )
        return None
    meta = dict(conn.execute(f"SELECT key, value FROM {META}").fetchall())
    try:
        version = int(meta.get("version", ""))
    except ValueError:
        version = -1
    if meta.get("kind") != KIND or version < 0 or TABLE not in tables:
        raise ConfigError(f"{label} is not an nbagent attempt log (its nbagent_meta is not ours)")
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{label} was written by a newer nbagent (attempt log layout {version}; this one "
            f"knows up to {SCHEMA_VERSION}): upgrade nbagent to use it"
        )
    return version


def column_names(conn: sqlite3.Connection) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({TABLE})").fetchall()]


def prepare(conn: sqlite3.Connection, label: str) -> None:
    """Make the file ready to append to: create, check or migrate its layout, in one transaction
    (two processes starting at once take turns: try it `patiently`)."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    try:  # refuse a file that is not ours before changing anything in it
        check_version(conn, label, table_names(conn))
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc):
            raise ConfigError(f"{label} is not an nbagent attempt log ({exc})") from exc
        raise
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    # check again, now holding the write lock: another process may have set it up meanwhile
    with transaction(conn):
        version = check_version(conn, label, table_names(conn))
        if version is None:
            cols = ", ".join(f"{c} {_SQL_TYPE[c]}" for c in COLUMNS)
            conn.execute(
                f"CREATE TABLE {TABLE} (agent_id TEXT NOT NULL, seq INTEGER NOT NULL, "
                f"worker TEXT, logged_at REAL NOT NULL, {cols}, PRIMARY KEY (agent_id, seq))"
            )
            conn.execute(f"CREATE INDEX {TABLE}_logged_at ON {TABLE} (logged_at)")
            conn.execute(f"CREATE TABLE {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute(f"INSERT INTO {META} VALUES ('kind', ?)", (KIND,))
            conn.execute(f"INSERT INTO {META} VALUES ('version', ?)", (str(SCHEMA_VERSION),))
        elif version < SCHEMA_VERSION or set(COLUMNS) - set(column_names(conn)):
            have = set(column_names(conn))
            for c in COLUMNS:  # an older layout lacks the columns added since
                if c not in have:
                    conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {c} {_SQL_TYPE[c]}")
            conn.execute(
                f"UPDATE {META} SET value = ? WHERE key = 'version'", (str(SCHEMA_VERSION),)
            )


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (taking the write lock at once), rolled back if its body fails."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def patiently(do: Callable[[], None]) -> None:
    """`do()`, tried again while another connection has the file (`busy`), for as long as the
    busy timeout. SQLite's busy handler waits for most such cases, but some (a WAL being
    recovered or reset, another process setting the file up) come back at once as BUSY."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            return do()
        except sqlite3.Error as exc:
            if not busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(0.2, pause * 2)


def busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection has the file for now."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)
