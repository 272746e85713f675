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

The file's layout (its version, creating and migrating it) is in `_durable_layout`. Every
connection is closed by the code that opened it, never left to the garbage collector: the writer
thread closes its own when the last log using it is closed or collected, and at exit.
"""

from __future__ import annotations

import atexit
import os
import queue
import socket
import sqlite3
import threading
import time
import warnings
import weakref
from typing import Any

from ..errors import ConfigError, HostError
from ._durable_layout import TABLE, LogTarget, connect, label_of, patiently, prepare, transaction
from ._frame import COLUMNS

LINGER_S = 0.005
"""How long the writer lets rows gather before a commit: rows reach the disk within a few ms."""

_KEY = ("agent_id", "seq")
_EXTRA = ("worker", "logged_at")  # logged_at: wall-clock seconds (Unix time) of the first write
_WRITTEN = (*_KEY, *_EXTRA, *COLUMNS)
_UPSERT = (
    f"INSERT INTO {TABLE} ({', '.join(_WRITTEN)}) VALUES ({', '.join('?' * len(_WRITTEN))}) "
    f"ON CONFLICT (agent_id, seq) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in ("worker", *COLUMNS))
)


def default_worker() -> str:
    """Which process wrote a row: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _row(item: tuple[str, str, int, dict[str, Any], float]) -> tuple[Any, ...]:
    # NaN (a missing time) is stored as NULL by SQLite itself
    agent_id, worker, seq, row, logged_at = item
    return (agent_id, seq, worker, logged_at, *map(row.get, COLUMNS))


# -- the writer thread ---------------------------------------------------------------------------

_STOP = object()
_DROPPED = object()  # a log using this writer was collected unclosed: one user fewer
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

    def _open(self) -> sqlite3.Connection | None:
        """The connection, ready to append to; None (and `error` set) if the file cannot be
        used, in which case the connection opened here is closed here."""
        conn: sqlite3.Connection | None = None
        try:
            conn = connect(self.target)
            patiently(lambda: prepare(conn, self.label))
            return conn
        except ConfigError as exc:
            self.error = exc
        except sqlite3.ProgrammingError:  # a connection tied to the thread that made it
            self.error = ConfigError(
                "log= got a sqlite3 connection that only the thread that opened it may use; "
                "open it with sqlite3.connect(path, check_same_thread=False), or pass the path"
            )
        except Exception as exc:  # sqlite3's own errors, and never a thread dead before
            # `ready` (its DurableLog would hang)
            self.error = self._host_error(exc)
        if conn is not None and conn is not self.target:
            conn.close()
        return None

    def _main(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = self._open()
            self.ready.set()
            self._serve(conn)
        finally:  # the connection opened in this thread is closed in it, whatever happens
            self.ready.set()
            if conn is not None and conn is not self.target:
                conn.close()

    def _serve(self, conn: sqlite3.Connection | None) -> None:
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
                elif i is _STOP or (i is _DROPPED and _let_go_of(self)):
                    stop = True

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        def write() -> None:
            with transaction(conn):
                conn.executemany(_UPSERT, rows)

        try:
            patiently(write)
        except sqlite3.Error as exc:
            self.error = self._host_error(exc)

    def _host_error(self, exc: Exception) -> HostError:
        return HostError(
            f"the durable attempt log {self.label} cannot be written ({exc}); runs go on and "
            "agent.attempts keeps every row, but no more rows are saved to the file"
        )

    def flush(self, timeout: float | None) -> bool:
        if not self.thread.is_alive():  # stopped (at exit): nothing is left to commit
            return True
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
    """At interpreter exit: commit what is queued and close the files (the writer threads are
    daemons; a closed file has its WAL checkpointed, leaving no `-wal` file beside it)."""
    with _writers_lock:
        writers = list(_writers.values())
        _writers.clear()
    for w in writers:
        w.queue.put(_STOP)
    for w in writers:
        w.thread.join(5.0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
atexit.register(_flush_all)


def _let_go_of(w: _Writer) -> bool:
    """One user fewer; True if that was the last (the writer is then no longer handed out)."""
    with _writers_lock:
        w.refs -= 1
        if w.refs > 0:
            return False
        if _writers.get(_key(w.target)) is w:
            del _writers[_key(w.target)]
        return True


def _dropped(w: _Writer) -> None:
    # A finalizer may run in any thread, at any allocation, even one holding `_writers_lock`
    # or the writer thread itself: it only queues a note (SimpleQueue.put is reentrant), and
    # the writer thread does the rest.
    w.queue.put(_DROPPED)


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
        self._writer: _Writer | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        w = self._hold(_acquire(self.target))
        w.ready.wait()
        if isinstance(w.error, ConfigError):
            self._let_go(None)
            raise w.error
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
        self.put(self.agent_id, index, row)

    def put(self, agent_id: str, index: int, row: dict[str, Any]) -> None:
        """Hand over the row `index` of the agent `agent_id` (a provider batch's rows are
        each item's: one log, many agent ids)."""
        w = self._writer
        if w is None or w.generation != _generation:
            w = self._hold(_acquire(self.target))
        if w.error is not None:
            self._report()
            return
        w.queue.put((agent_id, self.worker or w.worker, index, row, time.time()))

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every row handed over so far is committed (or the writer gave up)."""
        if self._writer is not None:
            self._writer.flush(timeout)
            self._report()

    def close(self, timeout: float | None = 30.0) -> None:
        """Commit what is queued and let go of the file (the last user closes the connection)."""
        w = self._writer
        if w is None:
            return
        self.flush(timeout)
        self._last_error = w.error or self._last_error
        self._let_go(timeout)

    def _hold(self, w: _Writer) -> _Writer:
        """Use `w`; a log dropped unclosed (an agent never closed) lets go of it when collected,
        so the last one gone closes the file (its queued rows are still committed first)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._writer = w
        self._finalizer = weakref.finalize(self, _dropped, w)
        self._finalizer.atexit = False  # at exit, `_flush_all` commits and closes
        return w

    def _let_go(self, timeout: float | None) -> None:
        w, self._writer = self._writer, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if w is not None and _let_go_of(w):  # the last user: the writer commits and closes
            w.queue.put(_STOP)
            w.thread.join(timeout)

    def _report(self) -> None:
        """Warn once per file and process that rows are no longer saved; the run goes on."""
        w = self._writer
        if w is None or w.error is None:
            return
        with _writers_lock:
            if w.warned:
                return
            w.warned = True
        warnings.warn(str(w.error), RuntimeWarning, stacklevel=3)
