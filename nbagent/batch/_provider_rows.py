"""The rows of a provider batch, kept column by column in typed arrays as items' results arrive.

A batch of 100,000 items gives 100,000 results rows and at least as many attempt rows. Each
attempt is a handful of numbers appended to typed arrays (`array`: 8 bytes a float, a byte or
two for a code) and its request id; the values every row shares (the model, the turn, the
phase) are not stored per row at all, and the words (outcome, action, error kind, batch id) are
codes into a short table. No dict or tuple is kept per row, and nothing is sorted as Python
objects: the frames are built at the end straight from the arrays, in prompt order through one
`numpy.lexsort`. So memory is the frames' own and little more.

The results are the same columns as the other backends' (`RESULT_COLUMNS`, then with `output=`
the structured answers' `output`, `reasks` and typed field columns); the attempts are the
attempt log's, one row per item per submission (a reask is a row with `action="reask"`), with
`batch_id` (the provider's id of the batch that submission went in) after `agent_id` and
`worker`. Each attempt row is also announced as it is recorded (`_provider_events`: the attempt
events every subscriber and tracing see, and with `log=` the durable log's row).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._core._budget import Usage
from .._loop._frame import CATEGORIES, COLUMNS
from .._loop._output_schema import OutputSchema
from ..errors import Aborted, OutputInvalid, OutputTruncated, ProviderError
from ..providers import Completed
from ._frames import results_from_columns
from ._output_columns import structured_columns
from ._provider_events import ItemEvents

__all__ = ["BatchRows"]

_NAN = math.nan


class _Words:
    """Strings as small codes into a table of the distinct ones (-1: missing)."""

    def __init__(self, known: tuple[str, ...] = ()) -> None:
        self.table: list[str] = list(known)
        self._code = {w: i for i, w in enumerate(known)}
        self.codes = array("h")

    def append(self, word: str | None) -> None:
        self.codes.append(self.code(word))

    def code(self, word: str | None) -> int:
        if word is None:
            return -1
        code = self._code.get(word)
        if code is None:
            code = self._code[word] = len(self.table)
            self.table.append(word)
        return code

    def strings(self, order: np.ndarray[Any, Any] | None = None, *, fill: int = -1) -> Any:
        """The column as a string array (in `order`, when given; a missing word as the word of
        code `fill`, when one is given)."""
        codes = _np(self.codes, np.int16)
        if order is not None:
            codes = codes[order]
        if fill >= 0:
            codes = np.where(codes < 0, fill, codes)
        table = np.array([*self.table, None], dtype=object)
        return pd.array(table[codes], dtype="string")  # code -1 picks the None at the end

    def categorical(self, order: np.ndarray[Any, Any], categories: tuple[str, ...]) -> Any:
        codes = _np(self.codes, np.int16)[order]
        cat: Any = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(list(categories)))
        return cat


def _np(values: array[Any], dtype: Any) -> np.ndarray[Any, Any]:
    """A typed array as numpy, without a copy (an empty one too)."""
    if not len(values):
        return np.empty(0, dtype=dtype)
    return np.frombuffer(values, dtype=dtype)


def _floats(n: int) -> array[float]:
    return array("d", [_NAN]) * n


class _Attempts:
    """The attempt rows' columns (see the module docstring)."""

    def __init__(self) -> None:
        self.pos = array("q")
        self.attempt = array("q")
        self.started = array("d")
        self.ended = array("d")
        self.policy_delay = array("d")
        self.retry_after = array("d")
        self.delay = array("d")
        self.cost = array("d")
        self.tokens = [array("q") for _ in range(4)]  # input, output, cache read, cache write
        self.no_tokens = bytearray()  # 1: the row has no token counts
        self.status = array("h")  # -1: no status
        self.outcome = _Words(CATEGORIES["outcome"])
        self.action = _Words(CATEGORIES["action"])
        self.kind = _Words()
        self.batch = _Words()
        self.request_id: list[str | None] = []
        self.message: dict[int, str] = {}  # most rows have none

    def __len__(self) -> int:
        return len(self.pos)


class BatchRows:
    """Results (one per prompt position) and attempts (one per item per submission)."""

    def __init__(
        self,
        prompts: list[str],
        *,
        model: str,
        max_attempts: int,
        worker: str,
        run_tag: str,
        output: OutputSchema | None = None,
        events: ItemEvents | None = None,
    ) -> None:
        n = len(prompts)
        self.prompts = prompts
        self.model = model
        self.max_attempts = max_attempts
        self.worker = worker
        self.run_tag = run_tag
        self.output = output
        self.events = events
        self.final_text: list[str | None] = [None] * n
        self.end_reason = _Words()
        self.end_reason.codes = array("h", [-1]) * n
        self.error: dict[int, str] = {}
        self.error_message: dict[int, str] = {}
        self.input_tokens = array("q", [0]) * n
        self.output_tokens = array("q", [0]) * n
        self.cost = _floats(n)
        self.first_start = _floats(n)
        self.duration = array("d", [0.0]) * n
        self.reasks = array("q", [0]) * n
        self.values: list[Any] = [None] * n if output is not None else []
        self.done = bytearray(n)
        self._a = _Attempts()

    def run_id(self, pos: int) -> str:
        return f"{self.run_tag}-{pos}"

    # -- attempts ---------------------------------------------------------------------------

    def _attempt(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        *,
        started: float,
        ended: float,
        outcome: str,
        action: str,
        usage: Usage | None = None,
        status: int | None = None,
        kind: str | None = None,
        request_id: str | None = None,
        message: str | None = None,
        policy_delay_s: float | None = None,
        retry_after_s: float | None = None,
        delay_s: float | None = None,
        stop_reason: str | None = None,
    ) -> None:
        a = self._a
        row = len(a)
        first = math.isnan(self.first_start[pos])
        a.pos.append(pos)
        a.attempt.append(submission)
        a.started.append(started)
        a.ended.append(ended)
        a.policy_delay.append(_NAN if policy_delay_s is None else policy_delay_s)
        a.retry_after.append(_NAN if retry_after_s is None else retry_after_s)
        a.delay.append(_NAN if delay_s is None else delay_s)
        counts = _counts(usage)
        for col, v in zip(a.tokens, counts, strict=True):
            col.append(v)
        a.no_tokens.append(usage is None)
        a.cost.append(_NAN if usage is None or usage.cost_usd is None else usage.cost_usd)
        a.status.append(-1 if status is None else status)
        a.outcome.append(outcome)
        a.action.append(action)
        a.kind.append(kind)
        a.batch.append(batch_id)
        a.request_id.append(request_id)
        if message:
            a.message[row] = message
        if math.isnan(self.first_start[pos]):
            self.first_start[pos] = started
        self.duration[pos] = max(0.0, ended - self.first_start[pos])
        if usage is not None:
            self._add_usage(pos, usage)
        if self.events is not None:
            if first:
                self.events.started(self.run_id(pos), self.prompts[pos], started)
            self.events.attempt(
                self.run_id(pos),
                submission,
                batch_id,
                started=started,
                ended=ended,
                outcome=outcome,
                action=action,
                usage=usage,
                status=status,
                kind=kind,
                request_id=request_id,
                message=message,
                retry_after_s=retry_after_s,
                policy_delay_s=policy_delay_s,
                delay_s=delay_s,
                stop_reason=stop_reason,
            )

    def succeeded(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        done: Completed,
        started: float,
        ended: float,
        *,
        note: str = "",
        value: Any = None,
        raw: str | None = None,
    ) -> None:
        """An item answered: its row is final (`value`, `raw`: its structured answer)."""
        self._attempt(
            pos,
            submission,
            batch_id,
            started=started,
            ended=ended,
            outcome="ok",
            action="none",
            usage=done.usage,
            status=200,
            request_id=done.request_id or done.response_id,
            message=note or done.note or None,
            stop_reason=done.stop_reason,
        )
        self.final_text[pos] = done.message.text if raw is None else raw
        self.end_reason.codes[pos] = self.end_reason.code(done.stop_reason)
        if self.output is not None:
            self.values[pos] = value
        self.done[pos] = True
        self._finished(pos, ended, done.stop_reason or "end_turn")

    def failed(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        err: BaseException,
        *,
        action: str,
        started: float,
        ended: float,
        delay_s: float | None = None,
        policy_delay_s: float | None = None,
        why: str = "",
        request_id: str | None = None,
    ) -> None:
        """An item failed in this submission: `action` "retry" or "reask" (it goes again) or
        "fail". A structured answer refused afterwards (off its schema, cut at max_tokens)
        carries its usage: the row has its tokens and cost."""
        p = err if isinstance(err, ProviderError) else None
        answered = err if isinstance(err, (OutputInvalid, OutputTruncated)) else None
        message = str(err) or type(err).__name__
        if why:
            message += f" ({why})"
        self._attempt(
            pos,
            submission,
            batch_id,
            started=started,
            ended=ended,
            outcome="cancelled" if isinstance(err, Aborted) else "error",
            action=action,
            usage=answered.usage if answered else None,
            status=200 if answered else p.status_code if p else None,
            kind=type(err).__name__,
            request_id=p.request_id if p else request_id,
            message=message,
            policy_delay_s=policy_delay_s,
            retry_after_s=p.retry_after if p else None,
            delay_s=delay_s,
        )
        if action == "reask":
            self.reasks[pos] += 1
        elif action != "retry":
            if answered:
                self.final_text[pos] = answered.raw
            self.final(pos, err)

    def final(self, pos: int, err: BaseException) -> None:
        """The row of an item that ends with `err` (Aborted: cancelled)."""
        self.error[pos] = type(err).__name__
        self.error_message[pos] = str(err) or type(err).__name__
        reason = "cancelled" if isinstance(err, Aborted) else "error"
        self.end_reason.codes[pos] = self.end_reason.code(reason)
        self.done[pos] = True
        if not math.isnan(self.first_start[pos]):  # an item never sent has no run to end
            at = self.first_start[pos] + self.duration[pos]
            self._finished(pos, at, reason, self.error[pos], self.error_message[pos])

    def _finished(self, pos: int, at: float, reason: str, error: str = "", why: str = "") -> None:
        if self.events is not None:
            cost = None if math.isnan(self.cost[pos]) else self.cost[pos]
            usage = Usage(self.input_tokens[pos], self.output_tokens[pos], cost_usd=cost)
            text = self.final_text[pos] or ""
            self.events.finished(self.run_id(pos), at, reason, usage, error, why, text)

    def _add_usage(self, pos: int, u: Usage) -> None:
        self.input_tokens[pos] += u.input_tokens
        self.output_tokens[pos] += u.output_tokens
        if u.cost_usd is not None:
            before = self.cost[pos]
            self.cost[pos] = u.cost_usd + (0.0 if math.isnan(before) else before)

    # -- frames -----------------------------------------------------------------------------

    def results(self, index: pd.Index[Any] | None) -> pd.DataFrame:
        """The results frame (built once: the answers' text is handed over to it)."""
        n = len(self.prompts)
        reasons = self.end_reason  # a row that never ended was cancelled
        texts = self.final_text
        answered = np.fromiter((t is not None for t in texts), dtype=bool, count=n)
        columns: dict[str, Any] = {
            "prompt": _copied(self.prompts),
            "final_text": _handed_over(texts, range(n)),
            "end_reason": reasons.strings(fill=reasons.code("cancelled")),
            "error": _sparse(self.error, n),
            "error_message": _sparse(self.error_message, n),
            "input_tokens": _np(self.input_tokens, np.int64),
            "output_tokens": _np(self.output_tokens, np.int64),
            "cost_usd": _np(self.cost, np.float64),
            "turns": answered.astype(np.int64),
            "duration_s": _np(self.duration, np.float64),
            "run_id": _made(n, lambda i: f"{self.run_tag}-{i}"),
        }
        df = results_from_columns(columns, None)
        if self.output is not None:
            reasks = _np(self.reasks, np.int64)
            for name, column in structured_columns(self.output, self.values, reasks).items():
                df[name] = column
        if index is not None:
            df.index = index
        return df

    def attempts(self) -> pd.DataFrame:
        """One row per item per submission, in prompt order, then submission order (built
        once: the request ids are handed over to it)."""
        a = self._a
        rows = len(a)
        pos = _np(a.pos, np.int64)
        order = np.lexsort((_np(a.attempt, np.int64), pos))
        floats = {
            "started_at": a.started,
            "ended_at": a.ended,
            "policy_delay_s": a.policy_delay,
            "retry_after_s": a.retry_after,
            "delay_s": a.delay,
            "cost_usd": a.cost,
        }
        data: dict[str, Any] = {name: _np(v, np.float64)[order] for name, v in floats.items()}
        data["duration_s"] = data["ended_at"] - data["started_at"]
        data["ttft_s"] = np.full(rows, _NAN)
        missing = np.frombuffer(bytes(a.no_tokens), dtype=np.bool_)[order] if rows else None
        names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        for name, col in zip(names, a.tokens, strict=True):
            data[name] = _ints(_np(col, np.int64)[order], missing)
        status = _np(a.status, np.int16)[order].astype(np.int64)
        data["status_code"] = _ints(status, status < 0)
        data["attempt"] = _ints(_np(a.attempt, np.int64)[order])
        for name, value in (
            ("turn", 1),
            ("max_attempts", self.max_attempts),
            ("discarded_chars", 0),
        ):
            data[name] = _ints(np.full(rows, value, dtype=np.int64))
        data["phase"] = pd.Categorical.from_codes(
            np.zeros(rows, dtype=np.int16), dtype=pd.CategoricalDtype(list(CATEGORIES["phase"]))
        )
        data["outcome"] = a.outcome.categorical(order, CATEGORIES["outcome"])
        data["action"] = a.action.categorical(order, CATEGORIES["action"])
        data["error_kind"] = a.kind.strings(order)
        data["model"] = _same(self.model, rows)
        data["tool_name"] = _same(None, rows)
        data["request_id"] = _handed_over(a.request_id, order)
        messages = np.full(rows, None, dtype=object)
        for row, text in a.message.items():
            messages[row] = text
        data["message"] = pd.array(messages[order], dtype="string")
        sorted_pos = pos[order]
        # `reask`: the item's reasks before this row (its rows are in submission order)
        asked = pd.Series(np.asarray(data["action"] == "reask", dtype=np.int64))
        before = asked.groupby(sorted_pos).cumsum() - asked
        data["reask"] = _ints(before.to_numpy(dtype=np.int64))
        tag, where = self.run_tag, sorted_pos.tolist()
        data["run_id"] = _made(rows, lambda k: f"{tag}-{where[k]}")
        out: pd.DataFrame = pd.DataFrame({name: data[name] for name in COLUMNS}, copy=False)
        out.insert(0, "prompt_index", sorted_pos)
        out["agent_id"] = _made(rows, lambda k: f"{where[k]}.1")
        out["worker"] = _same(self.worker, rows)
        out["batch_id"] = a.batch.strings(order)
        return out


def _counts(usage: Usage | None) -> tuple[int, int, int, int]:
    if usage is None:
        return (0, 0, 0, 0)
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


def _ints(values: np.ndarray[Any, Any], missing: np.ndarray[Any, Any] | None = None) -> Any:
    mask = np.zeros(len(values), dtype=bool) if missing is None else np.asarray(missing, bool)
    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), mask)


def _same(value: str | None, rows: int) -> Any:
    return pd.array(np.full(rows, value, dtype=object), dtype="string")


_CHUNK = 16_384  # rows of Python strings made at once for a string column


def _strings(parts: list[Any]) -> Any:
    if not parts:
        return pd.array([], dtype="string")
    if len(parts) == 1:
        return parts[0]
    joined = pd.concat([pd.Series(p, copy=False) for p in parts], ignore_index=True)
    return joined.array


def _made(n: int, value: Callable[[int], str]) -> Any:
    """A string column of `n` values made chunk by chunk: at most one chunk of them exists as
    Python strings beside the column."""
    return _strings(
        [
            pd.array([value(i) for i in range(start, min(n, start + _CHUNK))], dtype="string")
            for start in range(0, n, _CHUNK)
        ]
    )


def _copied(values: list[str]) -> Any:
    """A string column of `values`, made chunk by chunk (one large conversion reserves about
    twice what the column holds while it grows)."""
    return _strings(
        [
            pd.array(values[start : start + _CHUNK], dtype="string")
            for start in range(0, len(values), _CHUNK)
        ]
    )


def _handed_over(values: list[str | None], order: Any) -> Any:
    """The column of `values` in `order`, made chunk by chunk, each value let go of once it is
    in the column (so the strings and their copy in the frame never both exist whole)."""
    parts = []
    indexes = list(order)
    for start in range(0, len(indexes), _CHUNK):
        chunk = indexes[start : start + _CHUNK]
        parts.append(pd.array([values[k] for k in chunk], dtype="string"))
        for k in chunk:
            values[k] = None
    return _strings(parts)


def _sparse(values: dict[int, str], n: int) -> list[str | None]:
    out: list[str | None] = [None] * n
    for i, v in values.items():
        out[i] = v
    return out
