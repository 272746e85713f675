"""Events in, one row per attempt out: the attempt log behind `agent.attempts`.

`AttemptLog` is an ordinary event subscriber. It turns the event stream into rows, one per
provider request attempt, compaction request, tool call and rate-limiter wait, and hands them
out as a pandas DataFrame with the columns of DESIGN.md ("Attempt log")::

    log = AttemptLog()
    bus.subscribe(log)
    ...
    log.frame()          # a DataFrame with exactly COLUMNS, cached until a row changes

Conventions of the rows:

* times are seconds on the agent's clock; `duration_s = ended_at - started_at`;
* the wait *after* a row is `[ended_at, ended_at + delay_s]`: a failed attempt carries the
  backoff that follows it (`delay_s` the wait taken, `policy_delay_s` what the policy alone
  said, `retry_after_s` the server's wish), a `paced` row the shared rate limiter's hold;
* `attempt` counts from 1 within one logical request; tool rows have no attempt number.

Rows are stored column-wise and compactly (`_columns`: typed arrays, words as codes), so a log
of 100,000 rows (a provider batch's items) is small and its frame cheap to build. `extra=` names
labels of the events kept as columns after COLUMNS (a provider batch: `batch_id`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from .._core._words import shortened
from ..events import (
    AttemptEvent,
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    CompactionFinished,
    CompactionStarted,
    Event,
    FallbackStarted,
    Handlers,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from ._frame import COLUMNS, build_frame, cell, new_columns

_NAN = math.nan
MESSAGE_LIMIT = 500
"""Tool error contents longer than this are cut in the `message` column."""

# column indices, for the hot paths
_RUN, _TURN, _REASK, _PHASE, _ATTEMPT, _MAXATT, _MODEL = range(7)
_START, _END, _DUR, _TTFT, _OUTCOME, _KIND, _STATUS, _ACTION = range(7, 15)
_PDELAY, _RA, _DELAY, _REQID, _IN, _OUT, _CREAD, _CWRITE, _COST, _DISC, _TOOL, _MSG = range(15, 27)
assert COLUMNS[_REASK] == "reask" and COLUMNS[_MSG] == "message" and len(COLUMNS) == _MSG + 1
_COL = {c: i for i, c in enumerate(COLUMNS)}
_EMPTY = [cell(c, None) for c in COLUMNS]  # a new row: NaN times and costs, the rest missing
_USAGE = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")


def _s(value: str | None) -> str | None:
    return value if value else None


RowSink = Callable[[int, dict[str, Any]], None]
"""Told `(index, row)` each time a row ends, and again if an ended row is completed later (a
failed attempt learns the wait that follows it from `RetryScheduled`): the durable log writes
rows as they finish through one of these, keyed by the index."""


class AttemptLog(Handlers):
    """A subscriber that builds the attempt log from events, across any number of runs.

    Call it with each event (or `bus.subscribe(log)`); `frame()` gives the DataFrame. `on_row`
    receives every row as it ends (see `RowSink`).
    """

    def __init__(self, on_row: RowSink | None = None, *, extra: tuple[str, ...] = ()) -> None:
        self.on_row = on_row
        self.names = (*COLUMNS, *extra)
        self._version = 0
        self._frame: pd.DataFrame | None = None
        self._frame_version = -1
        self._reset()

    def _reset(self) -> None:
        self._cols: list[Any] = new_columns(self.names[len(COLUMNS) :])
        self._appends = [c.append for c in self._cols]
        self._version += 1
        # (run_id, phase) -> row index of the attempt in flight
        self._open: dict[tuple[str, str], int] = {}
        # (run_id, call_id) -> row index of the tool call in flight
        self._open_tools: dict[tuple[str, str], int] = {}
        # (run_id, phase) -> row index of the last attempt that ended
        self._last: dict[tuple[str, str], int] = {}
        # run_id -> row index of the last failed request attempt
        self._last_failed: dict[str, int] = {}
        # run_id -> [CompactionStarted, whether a compaction attempt row came with it]
        self._compaction: dict[str, list[Any]] = {}
        self._run_model: dict[str, str] = {}
        # run_id -> reasks so far: a request row's `reask` (0 the first answer, 1 the first
        # reask, ...), known from the failed attempts whose action was "reask"
        self._reasks: dict[str, int] = {}

    # -- public ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._cols[0])

    def __repr__(self) -> str:
        return f"AttemptLog({len(self)} rows)"

    def frame(self, order: Any = None, *, release: bool = False) -> pd.DataFrame:
        """The rows as a DataFrame with exactly COLUMNS (then the `extra` ones); rebuilt only
        after a change. With `order` (row indexes), those rows in that order (not kept). With
        `release`, the log lets go of each column once it is in the frame: it is empty after
        (a log read once, at the end, so that it and its frame are not held at once)."""
        if release:
            cols, self._cols = self._cols, []
            self._reset()
            return build_frame(cols, order, self.names, release=True)
        if order is not None:
            return build_frame(self._cols, order, self.names)
        if self._frame is None or self._frame_version != self._version:
            self._frame = build_frame(self._cols, names=self.names)
            self._frame_version = self._version
        df: pd.DataFrame = self._frame.copy(deep=False)
        return df

    def column(self, name: str) -> Any:
        """One column as the log keeps it (`_columns`: typed arrays, words as codes)."""
        return self._cols[self.names.index(name)]

    def update(self, run_id: str, attempt: int, **fields: Any) -> None:
        """Complete the row of `run_id`'s request attempt `attempt`, which has ended, with
        `fields` (a watched SDK's wait, measured when its next attempt begins); the sink is
        told again. Nothing happens when that attempt is not the run's last one ended."""
        idx = self._ended(run_id, "request", attempt)
        if idx is not None:
            for name, value in fields.items():
                self._set(idx, self.names.index(name), cell(name, value))
            self._finished(idx)

    # -- rows -----------------------------------------------------------------------------

    def _finished(self, idx: int) -> None:
        """Row `idx` has ended (or an ended row was completed): hand it to the sink."""
        if self.on_row is not None:
            self.on_row(idx, dict(zip(self.names, (c[idx] for c in self._cols), strict=True)))

    def _append(self, row: list[Any]) -> int:
        for append, value in zip(self._appends, row, strict=True):
            append(value)
        self._version += 1
        return len(self._cols[0]) - 1

    def _ended(self, run_id: str, phase: str, attempt: int) -> int | None:
        """The row of the run's last attempt of `phase` that ended, if it is attempt `attempt`."""
        idx = self._last.get((run_id, phase))
        return idx if idx is not None and self._cols[_ATTEMPT][idx] == attempt else None

    def _set(self, idx: int, col: int, value: Any) -> None:
        self._cols[col][idx] = value
        self._version += 1

    def _new_row(
        self,
        event: Event,
        phase: str,
        started_at: float,
        *,
        attempt: int | None = None,
        max_attempts: int | None = None,
        model: str = "",
    ) -> int:
        row: list[Any] = [*_EMPTY]
        row += [_s(getattr(event, name, None)) for name in self.names[len(COLUMNS) :]]
        row[_RUN] = event.run_id
        row[_TURN] = event.turn
        if phase == "request":
            row[_REASK] = self._reasks.get(event.run_id, 0)
        row[_PHASE] = phase
        row[_ATTEMPT] = attempt
        row[_MAXATT] = max_attempts
        if phase != "tool":  # a tool call has no model (not even the run's)
            row[_MODEL] = model or self._run_model.get(event.run_id) or None
        row[_START] = started_at
        return self._append(row)

    def _attempt_row(self, event: AttemptEvent | RetryScheduled, started_at: float) -> int:
        """A row for the attempt `event` names (`started_at` NaN: an end seen without its
        start)."""
        return self._new_row(
            event,
            event.phase,
            started_at,
            attempt=event.attempt,
            max_attempts=event.max_attempts,
            model=event.model,
        )

    def _close(self, idx: int, end: float, outcome: str, action: str) -> None:
        cols = self._cols
        cols[_END][idx] = end
        start = cols[_START][idx]
        cols[_DUR][idx] = end - start if not math.isnan(start) else _NAN
        cols[_OUTCOME][idx] = outcome
        cols[_ACTION][idx] = action
        self._version += 1

    def _take_open(
        self,
        event: AttemptSucceeded | AttemptFailed,
    ) -> int:
        key = (event.run_id, event.phase)
        idx = self._open.pop(key, None)
        if idx is None:
            # an end without its start: a row of its own, with no start time
            idx = self._attempt_row(event, _NAN)
        elif event.model and not self._cols[_MODEL][idx]:
            self._cols[_MODEL][idx] = event.model
        self._last[key] = idx
        return idx

    def _copy(self, idx: int, event: Event, *names: str) -> None:
        """Row `idx`'s columns `names` from the event's fields of the same names ("": none)."""
        for name in names:
            value = getattr(event, name)
            self._cols[_COL[name]][idx] = cell(name, None if value == "" else value)

    def _failure(self, idx: int, event: AttemptFailed | RetryScheduled) -> None:
        """What a failed attempt's row says of its error (the request's last failure, too)."""
        self._cols[_KIND][idx] = _s(event.error)
        self._cols[_DISC][idx] = len(event.discarded_text) + len(event.discarded_thinking)
        self._copy(idx, event, "status_code", "request_id", "message")
        if event.phase == "request":
            self._last_failed[event.run_id] = idx

    # -- handlers -------------------------------------------------------------------------

    def _on_run_started(self, event: RunStarted) -> None:
        if event.model:
            self._run_model[event.run_id] = event.model

    def _on_attempt_started(self, event: AttemptStarted) -> None:
        key = (event.run_id, event.phase)
        stale = self._open.pop(key, None)
        if stale is not None:  # the previous attempt never ended: say so
            self._close(stale, event.time, "cancelled", "none")
            self._set(stale, _MSG, "no end event before the next attempt started")
            self._finished(stale)
        if event.phase == "compaction" and event.run_id in self._compaction:
            self._compaction[event.run_id][1] = True
        self._open[key] = self._attempt_row(event, event.time)

    def _on_attempt_succeeded(self, event: AttemptSucceeded) -> None:
        idx = self._take_open(event)
        self._close(idx, event.time, "ok", "none")
        self._copy(idx, event, "ttft_s", "request_id", "status_code", *_USAGE)
        if event.message:
            self._cols[_MSG][idx] = event.message
        self._finished(idx)

    def _on_attempt_failed(self, event: AttemptFailed) -> None:
        idx = self._take_open(event)
        self._close(idx, event.time, "cancelled" if event.cancelled else "error", event.action)
        self._copy(idx, event, "ttft_s", "retry_after_s")
        self._failure(idx, event)
        if event.input_tokens is not None or event.output_tokens is not None:
            # an answer that arrived and was refused (reask, truncation) cost what it cost
            self._copy(idx, event, *_USAGE)
        if event.phase == "request" and event.action == "reask":
            # the next answer is the run's next reask
            self._reasks[event.run_id] = self._reasks.get(event.run_id, 0) + 1
        self._finished(idx)

    def _on_retry_scheduled(self, event: RetryScheduled) -> None:
        idx = self._ended(event.run_id, event.phase, event.attempt)
        if idx is None:
            # a retry with no failed attempt before it: the event says enough for a row
            idx = self._attempt_row(event, _NAN)
            self._close(idx, event.time, "error", "retry")
            self._failure(idx, event)
            self._last[(event.run_id, event.phase)] = idx
        self._copy(idx, event, "delay_s", "policy_delay_s")
        if event.retry_after_s is not None:
            self._copy(idx, event, "retry_after_s")
        if self._cols[_ACTION][idx] in (None, "none"):
            self._cols[_ACTION][idx] = "retry"
        self._version += 1
        self._finished(idx)

    def _on_paced_wait(self, event: PacedWait) -> None:
        idx = self._new_row(event, "request", event.time, model=event.model)
        self._close(idx, event.time, "ok", "paced")
        self._cols[_DELAY][idx] = float(event.delay_s)
        self._cols[_MSG][idx] = _s(event.reason) or "held back by the shared rate limiter"
        self._finished(idx)

    def _on_tool_call_started(self, event: ToolCallStarted) -> None:
        idx = self._new_row(event, "tool", event.time)
        self._cols[_TOOL][idx] = _tool_name(event.name, event.source)
        self._open_tools[(event.run_id, event.call_id)] = idx

    def _on_tool_call_finished(self, event: ToolCallFinished) -> None:
        idx = self._open_tools.pop((event.run_id, event.call_id), None)
        if idx is None:
            idx = self._new_row(event, "tool", event.time - event.duration_s)
        cols = self._cols
        cols[_TOOL][idx] = _tool_name(event.name, event.source) or cols[_TOOL][idx]
        if event.is_error:
            self._close(idx, event.time, "error", "tool_result")
            cols[_KIND][idx] = _s(event.error) or "tool_error"
            cols[_MSG][idx] = _s(shortened(event.content, MESSAGE_LIMIT))
        else:
            self._close(idx, event.time, "ok", "none")
        self._finished(idx)

    def _on_compaction_started(self, event: CompactionStarted) -> None:
        self._compaction[event.run_id] = [event, False]

    def _on_compaction_finished(self, event: CompactionFinished) -> None:
        pending = self._compaction.pop(event.run_id, None)
        strategy = event.strategy or (pending[0].strategy if pending else "") or "compaction"
        before = event.tokens_before or (pending[0].tokens_before if pending else 0)
        text = f"{strategy}: {before:,} → {event.tokens_after:,} tokens"
        if not event.ok:
            text = f"{strategy} failed" + (f": {event.message}" if event.message else "")
        if pending is not None and pending[1]:
            # the compaction request(s) have rows of their own; label the last one
            idx = self._last.get((event.run_id, "compaction"))
            if idx is not None and not self._cols[_MSG][idx]:
                self._set(idx, _MSG, text)
                self._finished(idx)
            return
        started = pending[0].time if pending is not None else event.time
        idx = self._new_row(event, "compaction", started, attempt=1, max_attempts=1)
        self._close(idx, event.time, "ok" if event.ok else "error", "none" if event.ok else "fail")
        if not event.ok:
            self._cols[_KIND][idx] = "CompactionFailed"
        self._cols[_MSG][idx] = text
        self._finished(idx)

    def _on_fallback_started(self, event: FallbackStarted) -> None:
        idx = self._last_failed.get(event.run_id)
        if idx is not None and self._cols[_ACTION][idx] != "fallback":
            self._set(idx, _ACTION, "fallback")
            self._finished(idx)

    def _on_run_finished(self, event: RunFinished) -> None:
        run = event.run_id
        cancelled = event.end_reason == "cancelled"
        outcome = "cancelled" if cancelled else "error"
        why = _s(event.message) or (
            "cancelled" if cancelled else f"run ended ({event.end_reason or 'unknown'})"
        )
        for still_open in (self._open, self._open_tools):  # attempts, then tool calls
            for key in [k for k in still_open if k[0] == run]:
                idx = still_open.pop(key)
                self._close(idx, event.time, outcome, "fail")
                self._cols[_KIND][idx] = _s(event.error) or ("Aborted" if cancelled else None)
                self._cols[_MSG][idx] = why
                self._finished(idx)
        self._compaction.pop(run, None)
        self._last_failed.pop(run, None)
        self._run_model.pop(run, None)
        self._reasks.pop(run, None)
        for key in [k for k in self._last if k[0] == run]:
            del self._last[key]


def _tool_name(name: str, source: str) -> str | None:
    if not name:
        return None
    return f"{source}:{name}" if source else name
