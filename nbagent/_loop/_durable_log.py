"""The durable attempt log: every finished attempt, as it finishes, in a SQLite file.

Exploratory prompting goes on for hours and kernels die; `agent.attempts` lives in memory.
`Agent(log="runs.sqlite")` gives the agent's `AttemptLog` a `DurableLog` as its row sink, and
`read_attempts("runs.sqlite")` gives back the same typed frame, across every session and process
that wrote there (plus `agent_id` and `worker`; the reading is in `_durable_read`).

How it stays cheap and safe:

* The run's thread only puts the row on a queue (a few µs). One writer thread per database file
  and process owns the connection and commits whatever has queued up, in one transaction: rows
  are on disk within milliseconds, and a slow or locked disk never blocks the event loop.
* WAL mode with `synchronous=NORMAL`: a committed row survives the process being killed (not a
  power cut); readers never block the writers; many processes append at once (each waits its
  turn for the write lock, up to 30 s).
* A row is keyed by `(agent_id, seq)`, its index in the agent's log, and upserted: a failed
  attempt is written when it ends and completed when the wait that follows it is announced.
* A file that cannot be opened or written (read-only, a full disk) never changes how a run ends:
  nbagent warns once with a `HostError` sentence and goes on; `agent.attempts` still has every
  row. A file that is not an nbagent attempt log, or one written by a newer nbagent, is refused
  with a `ConfigError` before anything is sent.

The file carries its layout version in `nbagent_meta`. An older layout (fewer columns) is read
as it is, missing columns empty, and migrated (the columns added) when written to.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import socket
import sqlite3
import threading
import time
import warnings
from typing import Any

from ..errors import ConfigError, HostError
from ._frame import COLUMNS, FLOAT_COLUMNS, INT_COLUMNS

__all__ = [
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "TABLE",
    "DurableLog",
    "LogTarget",
    "check_version",
    "column_names",
    "label_of",
    "table_names",
]

LogTarget = str | os.PathLike[str] | sqlite3.Connection
"""What `Agent(log=...)` and `read_attempts` take: a file path, or an open connection."""

SCHEMA_VERSION = 1
KIND = "nbagent.attempts"
TABLE = "attempts"
META = "nbagent_meta"
BUSY_TIMEOUT_S = 30.0
LINGER_S = 0.005
"""How long the writer lets rows gather before a commit: rows reach the disk within a few ms."""

_KEY = ("agent_id", "seq")
_EXTRA = ("worker", "logged_at")  # logged_at: wall-clock seconds (Unix time) of the first write
_SQL_TYPE = {
    c: "INTEGER" if c in INT_COLUMNS else "REAL" if c in FLOAT_COLUMNS else "TEXT" for c in COLUMNS
}
_WRITTEN = (*_KEY, *_EXTRA, *COLUMNS)
_UPSERT = (
    f"INSERT INTO {TABLE} ({', '.join(_WRITTEN)}) VALUES ({', '.join('?' * len(_WRITTEN))}) "
    f"ON CONFLICT (agent_id, seq) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in ("worker", *COLUMNS))
)


def default_worker() -> str:
    """Which process wrote a row: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


# -- the file's layout -------------------------------------------------------------------------


def label_of(target: LogTarget) -> str:
    return "the sqlite3 connection given" if isinstance(target, sqlite3.Connection) else str(target)


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


def _prepare(conn: sqlite3.Connection, label: str) -> None:
    """Make the file ready to append to: create, check or migrate its layout, in one transaction
    (two processes starting at once take turns)."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    try:  # refuse a file that is not ours before changing anything in it
        check_version(conn, label, table_names(conn))
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc):
            raise ConfigError(f"{label} is not an nbagent attempt log ({exc})") from exc
        raise
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    try:  # again, now holding the write lock: another process may have set it up meanwhile
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
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _prepare_patiently(conn: sqlite3.Connection, label: str) -> None:
    """`_prepare`, tried again while another process is setting the same file up."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            _prepare(conn, label)
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection has the file for now."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)


def _row(item: tuple[str, str, int, dict[str, Any], float]) -> tuple[Any, ...]:
    # NaN (a missing time) is stored as NULL by SQLite itself
    agent_id, worker, seq, row, logged_at = item
    return (agent_id, seq, worker, logged_at, *map(row.get, COLUMNS))


# -- the writer thread ---------------------------------------------------------------------------

_STOP = object()
_generation = 0  # bumped in a forked child: the parent's writer threads do not exist there

LogError = ConfigError | HostError


class _Writer:
    """The one connection to a database in this process, owned by a thread of its own."""

    def __init__(self, target: LogTarget) -> None:
        self.target = target
        self.label = label_of(target)
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.error: LogError | None = None
        self.warned = False
        self.refs = 0
        self.generation = _generation
        self.worker = default_worker()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="nbagent-durable-log", daemon=True)
        self.thread.start()

    def _connect(self) -> sqlite3.Connection:
        if isinstance(self.target, sqlite3.Connection):
            return self.target
        return sqlite3.connect(
            self.target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )

    def _main(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            _prepare_patiently(conn, self.label)
        except ConfigError as exc:
            self.error = exc
        except sqlite3.ProgrammingError:  # a connection tied to the thread that made it
            self.error = ConfigError(
                "log= got a sqlite3 connection that only the thread that opened it may use; "
                "open it with sqlite3.connect(path, check_same_thread=False), or pass the path"
            )
        except sqlite3.Error as exc:
            self.error = self._host_error(exc)
        self.ready.set()
        stop = False
        while not stop:
            items = [self.queue.get()]
            if isinstance(items[0], tuple):
                # Let a burst of rows gather: one transaction for them all, and the run's
                # thread is not made to share the interpreter with a wake-up per row.
                time.sleep(LINGER_S)
            while True:  # everything queued meanwhile goes into the same transaction
                try:
                    items.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            # a row handed over twice (ended, then completed) is written once, as it is last
            latest = {(i[0], i[2]): i for i in items if isinstance(i, tuple)}
            rows = [_row(i) for i in latest.values()]
            if rows and conn is not None and self.error is None:
                self._write(conn, rows)
            for i in items:
                if isinstance(i, threading.Event):
                    i.set()
                elif i is _STOP:
                    stop = True
        if conn is not None and conn is not self.target:
            conn.close()

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.005
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(_UPSERT, rows)
                conn.execute("COMMIT")
                return
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                # Another process holds the file: SQLite's busy handler waits for most such
                # cases, but some (a WAL being recovered or reset) come back at once as BUSY.
                # Those pass: try again, for as long as the busy timeout, before giving up.
                if _busy(exc) and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(0.2, pause * 2)
                    continue
                self.error = self._host_error(exc)
                return

    def _host_error(self, exc: sqlite3.Error) -> HostError:
        return HostError(
            f"the durable attempt log {self.label} cannot be written ({exc}); runs go on and "
            "agent.attempts keeps every row, but no more rows are saved to the file"
        )

    def flush(self, timeout: float | None) -> bool:
        done = threading.Event()
        self.queue.put(done)
        return done.wait(timeout)


_writers: dict[Any, _Writer] = {}
_writers_lock = threading.Lock()


def _key(target: LogTarget) -> Any:
    if isinstance(target, sqlite3.Connection):
        return ("connection", id(target))
    return ("path", os.path.realpath(target))


def _acquire(target: LogTarget) -> _Writer:
    with _writers_lock:
        w = _writers.get(_key(target))
        if w is None:
            w = _writers[_key(target)] = _Writer(target)
        w.refs += 1
        return w


def _forked() -> None:
    global _generation
    _writers.clear()
    _generation += 1


def _flush_all() -> None:
    """At interpreter exit: commit what is queued (the writer threads are daemons)."""
    with _writers_lock:
        writers = list(_writers.values())
    for w in writers:
        w.flush(5.0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
atexit.register(_flush_all)


def _release(w: _Writer, timeout: float | None) -> None:
    with _writers_lock:
        w.refs -= 1
        if w.refs > 0:
            return
        if _writers.get(_key(w.target)) is w:
            del _writers[_key(w.target)]
    w.queue.put(_STOP)
    w.thread.join(timeout)


# -- the sink ------------------------------------------------------------------------------------


class DurableLog:
    """An `AttemptLog` row sink that appends every finished row to a SQLite database.

    Made by `Agent(log=...)`; raises `ConfigError` at once for a target that is not a path or a
    connection, a file that is not an nbagent attempt log, or one written by a newer nbagent.
    `close()` waits for the rows handed over so far to be committed; a later row opens the
    log again (`Agent.run_sync` closes its connections after every run).
    """

    def __init__(self, target: LogTarget, agent_id: str, *, worker: str | None = None) -> None:
        if not isinstance(target, (str, os.PathLike, sqlite3.Connection)):
            raise ConfigError(
                "log= takes a file path such as 'runs.sqlite' or an open sqlite3.Connection, "
                f"not {type(target).__name__}"
            )
        self.target: LogTarget = target
        if not isinstance(target, sqlite3.Connection):
            path = os.fspath(target)
            # absolute now: the log reopens after aclose(), perhaps after an os.chdir
            self.target = path if path == ":memory:" else os.path.abspath(path)
        self.agent_id = agent_id
        self.worker = worker
        self._last_error: LogError | None = None
        self._writer: _Writer | None = _acquire(self.target)
        self._writer.ready.wait()
        error = self._writer.error
        if isinstance(error, ConfigError):
            _release(self._writer, None)
            self._writer = None
            raise error
        self._report()

    def __repr__(self) -> str:
        return f"DurableLog({label_of(self.target)}, agent_id={self.agent_id!r})"

    @property
    def error(self) -> LogError | None:
        """Why rows are no longer saved (the warning's sentence), or None."""
        if self._writer is not None and self._writer.error is not None:
            self._last_error = self._writer.error
        return self._last_error

    def __call__(self, index: int, row: dict[str, Any]) -> None:
        w = self._writer
        if w is None or w.generation != _generation:
            w = self._writer = _acquire(self.target)
        if w.error is not None:
            self._report()
            return
        w.queue.put((self.agent_id, self.worker or w.worker, index, row, time.time()))

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every row handed over so far is committed (or the writer gave up)."""
        if self._writer is not None:
            self._writer.flush(timeout)
            self._report()

    def close(self, timeout: float | None = 30.0) -> None:
        """Commit what is queued and let go of the file (the last user closes the connection)."""
        w, self._writer = self._writer, None
        if w is None:
            return
        w.flush(timeout)
        self._report(w)
        self._last_error = w.error or self._last_error
        _release(w, timeout)

    def _report(self, w: _Writer | None = None) -> None:
        """Warn once per file and process that rows are no longer saved; the run goes on."""
        w = w or self._writer
        if w is None or w.error is None:
            return
        with _writers_lock:
            if w.warned:
                return
            w.warned = True
        warnings.warn(str(w.error), RuntimeWarning, stacklevel=3)
