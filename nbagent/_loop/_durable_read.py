"""Reading a durable attempt log back: `read_attempts`, the typed frame of every session that
wrote to the file (the writing is in `_durable_log`)."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pandas as pd

from ..errors import ConfigError, HostError
from ._durable_layout import (
    BUSY_TIMEOUT_S,
    TABLE,
    LogTarget,
    check_version,
    column_names,
    label_of,
    table_names,
)
from ._frame import COLUMNS, ORIGIN_COLUMNS, coerce, with_origin


def _since_seconds(since: Any) -> float:
    """Unix seconds from a datetime, date, Timestamp, ISO string, timedelta (ago) or number."""
    if isinstance(since, bool):
        raise ConfigError(f"since= takes a time, not {since!r}")
    if isinstance(since, (int, float)):
        return float(since)
    if isinstance(since, timedelta):
        return time.time() - since.total_seconds()
    try:
        ts = pd.Timestamp(since)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"since= takes a datetime, a date, an ISO time such as '2025-06-01 14:00', a "
            f"timedelta (that long ago) or Unix seconds, not {since!r}"
        ) from exc
    if ts.tzinfo is None:  # a naive time is local time, as datetime.now() gives it
        return float(ts.to_pydatetime().timestamp())
    return float(ts.timestamp())


def read_attempts(
    log: LogTarget, since: Any = None, model: str | Iterable[str] | None = None
) -> pd.DataFrame:
    """Every attempt in a durable log, across every session that wrote there, oldest first.

    The frame is typed exactly like `agent.attempts`, with `agent_id` and `worker` after the
    attempt columns; `nbagent.analysis` takes it unchanged. `since` keeps the attempts logged at
    or after a time (a datetime, an ISO string, a timedelta meaning "that long ago", or Unix
    seconds). `model` keeps one model's attempts ("anthropic:claude-…", or several), with the
    tool calls of the runs that used it. Times in the frame are each agent's own clock.

    Args:
        log: The durable log (`Agent(log=...)`): a SQLite file path or an open connection.
        since: Keep attempts logged at or after this time; None for all.
        model: Keep this model's attempts (or these models'); None for all.

    Returns:
        The attempts, one row each, oldest first.

    Raises:
        ConfigError: There is no log at the path, `log` is neither a path nor a connection,
            the file is not an nbagent attempt log, or `since` is not a time.
        HostError: The file exists but SQLite cannot open it.
    """
    label = label_of(log)
    if isinstance(log, sqlite3.Connection):
        conn, own = log, False
    elif isinstance(log, (str, os.PathLike)):
        path = os.fspath(log)
        if not os.path.isfile(path):
            raise ConfigError(f"there is no attempt log at {path}")
        try:  # read-write but never create: a WAL file is only readable with its -shm
            conn = sqlite3.connect(
                f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S
            )
        except sqlite3.Error as exc:
            raise HostError(f"cannot open the attempt log {path}: {exc}") from exc
        own = True
    else:
        raise ConfigError(
            "read_attempts() takes a file path or an open sqlite3.Connection, "
            f"not {type(log).__name__}"
        )
    try:
        try:
            tables = table_names(conn)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{label} is not an nbagent attempt log ({exc})") from exc
        if check_version(conn, label, tables) is None:
            raise ConfigError(f"{label} is not an nbagent attempt log (it is an empty database)")
        have = set(column_names(conn))
        wanted = [c for c in (*COLUMNS, *ORIGIN_COLUMNS) if c in have]
        where, params = _filters(since, model)
        sql = f"SELECT {', '.join(wanted)} FROM {TABLE}{where} ORDER BY logged_at, rowid"
        rows = conn.execute(sql, params).fetchall()
    finally:
        if own:
            conn.close()
    raw = pd.DataFrame.from_records(rows, columns=wanted)
    # missing columns (an older layout) come back empty, typed
    gathered = [raw[c] if c in raw.columns else [None] * len(raw) for c in ORIGIN_COLUMNS]
    return with_origin(coerce(raw), *gathered)


def _filters(since: Any, model: str | Iterable[str] | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if since is not None:
        clauses.append("logged_at >= ?")
        params.append(_since_seconds(since))
    if model is not None:
        models = [model] if isinstance(model, str) else [str(m) for m in model]
        marks = ", ".join("?" * len(models))
        clauses.append(
            f"(model IN ({marks}) OR (model IS NULL AND run_id IN "
            f"(SELECT run_id FROM {TABLE} WHERE model IN ({marks}))))"
        )
        params += models + models
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
