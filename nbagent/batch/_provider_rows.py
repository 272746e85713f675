"""The rows of a provider batch, kept column by column as items' results arrive.

A batch of 100,000 items gives 100,000 results rows and at least as many attempt rows; each is
a handful of values appended to lists (not a dict per row), and the frames are built from the
lists at the end (`_frame.build_frame`), so memory is the frames' own and little more. The
results are the same columns as the other backends' (`RESULT_COLUMNS`); the attempts are the
attempt log's, one row per item per submission, with `batch_id` (the provider's id of the batch
that submission went in) after `agent_id` and `worker`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .._core._budget import Usage
from .._loop._frame import COLUMNS, build_frame
from ..errors import Aborted, ProviderError
from ..providers import Completed
from ._frames import results_from_columns

__all__ = ["BatchRows"]

_NAN = math.nan


class BatchRows:
    """Results (one per prompt position) and attempts (one per item per submission)."""

    def __init__(
        self, prompts: list[str], *, model: str, max_attempts: int, worker: str, run_tag: str
    ) -> None:
        n = len(prompts)
        self.prompts = prompts
        self.model = model
        self.max_attempts = max_attempts
        self.worker = worker
        self.run_tag = run_tag
        self.final_text: list[str | None] = [None] * n
        self.end_reason: list[str | None] = [None] * n
        self.error: list[str | None] = [None] * n
        self.error_message: list[str | None] = [None] * n
        self.input_tokens = [0] * n
        self.output_tokens = [0] * n
        self.cost: list[float | None] = [None] * n
        self.first_start: list[float | None] = [None] * n
        self.duration = [0.0] * n
        self.done = [False] * n
        self._cols: list[list[Any]] = [[] for _ in COLUMNS]
        self._pos: list[int] = []
        self._batch: list[str | None] = []

    def run_id(self, pos: int) -> str:
        return f"{self.run_tag}-{pos}"

    # -- attempts ---------------------------------------------------------------------------

    def _attempt(
        self, pos: int, submission: int, batch_id: str | None, row: dict[str, Any]
    ) -> None:
        values = {
            "run_id": self.run_id(pos),
            "turn": 1,
            "phase": "request",
            "attempt": submission,
            "max_attempts": self.max_attempts,
            "model": self.model,
            "discarded_chars": 0,
            **row,
        }
        for i, name in enumerate(COLUMNS):
            v = values.get(name)
            if v is None and name in (
                "started_at",
                "ended_at",
                "duration_s",
                "ttft_s",
                "policy_delay_s",
                "retry_after_s",
                "delay_s",
            ):
                v = _NAN
            self._cols[i].append(v)
        self._pos.append(pos)
        self._batch.append(batch_id)
        start = values.get("started_at")
        if isinstance(start, float) and self.first_start[pos] is None:
            self.first_start[pos] = start
        end = values.get("ended_at")
        first = self.first_start[pos]
        if isinstance(end, float) and first is not None:
            self.duration[pos] = max(0.0, end - first)

    def succeeded(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        done: Completed,
        started: float,
        ended: float,
        note: str = "",
    ) -> None:
        """An item answered: its row is final."""
        u: Usage = done.usage
        self._attempt(
            pos,
            submission,
            batch_id,
            {
                "started_at": started,
                "ended_at": ended,
                "duration_s": ended - started,
                "outcome": "ok",
                "status_code": 200,
                "action": "none",
                "request_id": done.request_id or done.response_id,
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cache_read_tokens": u.cache_read_tokens,
                "cache_write_tokens": u.cache_write_tokens,
                "cost_usd": u.cost_usd,
                "message": note or done.note or None,
            },
        )
        self._add_usage(pos, u)
        self.final_text[pos] = done.message.text
        self.end_reason[pos] = done.stop_reason
        self.done[pos] = True

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
    ) -> None:
        """An item failed in this submission: `action` "retry" (it goes again) or "fail"."""
        p = err if isinstance(err, ProviderError) else None
        message = str(err) or type(err).__name__
        if why:
            message += f" ({why})"
        self._attempt(
            pos,
            submission,
            batch_id,
            {
                "started_at": started,
                "ended_at": ended,
                "duration_s": ended - started,
                "outcome": "cancelled" if isinstance(err, Aborted) else "error",
                "error_kind": type(err).__name__,
                "status_code": p.status_code if p else None,
                "action": action,
                "policy_delay_s": policy_delay_s,
                "retry_after_s": p.retry_after if p else None,
                "delay_s": delay_s,
                "request_id": p.request_id if p else None,
                "message": message,
            },
        )
        if action != "retry":
            self.final(pos, err)

    def final(self, pos: int, err: BaseException) -> None:
        """The row of an item that ends with `err` (Aborted: cancelled)."""
        self.error[pos] = type(err).__name__
        self.error_message[pos] = str(err) or type(err).__name__
        self.end_reason[pos] = "cancelled" if isinstance(err, Aborted) else "error"
        self.done[pos] = True

    def _add_usage(self, pos: int, u: Usage) -> None:
        self.input_tokens[pos] += u.input_tokens
        self.output_tokens[pos] += u.output_tokens
        if u.cost_usd is not None:
            self.cost[pos] = (self.cost[pos] or 0.0) + u.cost_usd

    # -- frames -----------------------------------------------------------------------------

    def results(self, index: pd.Index[Any] | None) -> pd.DataFrame:
        n = len(self.prompts)
        columns: dict[str, Any] = {
            "prompt": self.prompts,
            "final_text": self.final_text,
            "end_reason": [r or "cancelled" for r in self.end_reason],
            "error": self.error,
            "error_message": self.error_message,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost,
            "turns": [0 if t is None else 1 for t in self.final_text],
            "duration_s": self.duration,
            "run_id": [self.run_id(i) for i in range(n)],
        }
        return results_from_columns(columns, index)

    def attempts(self) -> pd.DataFrame:
        """One row per item per submission, in prompt order, then submission order."""
        order = sorted(range(len(self._pos)), key=lambda k: (self._pos[k], self._cols[3][k]))
        cols = [[col[k] for k in order] for col in self._cols]
        out = build_frame(cols)
        positions = np.array([self._pos[k] for k in order], dtype=np.int64)
        out.insert(0, "prompt_index", positions)
        ids = [f"{self._pos[k]}.1" for k in order]
        out["agent_id"] = pd.array(ids, dtype="string")
        out["worker"] = pd.array([self.worker] * len(order), dtype="string")
        out["batch_id"] = pd.array([self._batch[k] for k in order], dtype="string")
        return out
