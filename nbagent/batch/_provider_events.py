"""A provider batch's items in the one event stream, and the rows they end in.

An item of `map(..., backend="provider")` is announced as any agent's run is: `RunStarted` when
its first submission's result is read, `AttemptStarted` and then `AttemptSucceeded` or
`AttemptFailed` for every submission (stamped with the provider's batch id and the submission),
`RetryScheduled` for the wait before it is sent again, and `RunFinished` when its row is final.
They go through an `EventBus` to every `subscribe_everywhere` subscriber (tracing, a
process-wide handler) and to the one attempt log (`AttemptLog`, compact: 100,000 items' rows
are typed arrays), whose rows are `result.attempts` and, with `log=`, the durable log's (one
agent id per item, its run id; the row's index its submission less one).

What the results frame needs of an item besides its attempts (its answer, its end, its usage
summed over its submissions) is kept here, one typed array per column, one value per prompt.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
import pandas as pd

from .._core._attempts import error_fields, usage_fields
from .._core._budget import Usage
from .._core._decision import Decision
from .._loop._attempt_log import AttemptLog
from .._loop._columns import numpy_of, string_array
from .._loop._frame import with_origin
from .._loop._output_schema import OutputSchema
from .._loop._output_step import Checked
from ..errors import Aborted, OutputInvalid, OutputTruncated
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    EventBus,
    RetryScheduled,
    RunFinished,
    RunStarted,
)
from ..providers import Completed
from ._frames import results_frame

_NAN = math.nan


class ItemEvents:
    """The events of a batch's items and their results rows (see the module docstring)."""

    def __init__(
        self,
        prompts: list[str],
        *,
        model: str,
        max_attempts: int,
        worker: str,
        run_tag: str,
        output: OutputSchema | None = None,
    ) -> None:
        n = len(prompts)
        self.prompts, self.model, self.max_attempts = prompts, model, max_attempts
        self.worker, self.run_tag, self.output = worker, run_tag, output
        self.bus = EventBus()
        self.log = AttemptLog(extra=("batch_id",))
        self.bus.subscribe(self.log)
        self.final_text: list[str | None] = [None] * n
        self.end_reason: list[str | None] = [None] * n  # None: the item's row has not ended
        self.error: dict[int, str] = {}
        self.error_message: dict[int, str] = {}
        self.input_tokens = array("q", [0]) * n
        self.output_tokens = array("q", [0]) * n
        self.cost = array("d", [_NAN]) * n
        self.first_start = array("d", [_NAN]) * n
        self.duration = array("d", [0.0]) * n
        self.reasks = array("q", [0]) * n
        self.values: list[Any] = [None] * n if output is not None else []

    def run_id(self, pos: int) -> str:
        return f"{self.run_tag}-{pos}"

    # -- attempts ---------------------------------------------------------------------------

    def _attempt(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        started: float,
        ended: float,
        usage: Usage | None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Announce one submission of an item (its run first, the first time): its labels, and
        the fields its end's event shares (the labels, the batch, the time and the tokens)."""
        run_id = self.run_id(pos)
        if math.isnan(self.first_start[pos]):
            self.first_start[pos] = started
            self.bus.emit(
                RunStarted(
                    run_id=run_id,
                    time=started,
                    turn=1,
                    prompt=self.prompts[pos],
                    model=self.model,
                    agent_id=run_id,
                )
            )
        self.duration[pos] = max(0.0, ended - self.first_start[pos])
        tokens: dict[str, Any] = {}
        if usage is not None:  # the attempt's tokens and cost, added to the item's
            tokens = dict(usage_fields(usage))
            self.input_tokens[pos] += usage.input_tokens
            self.output_tokens[pos] += usage.output_tokens
            if usage.cost_usd is not None:
                before = self.cost[pos]
                self.cost[pos] = usage.cost_usd + (0.0 if math.isnan(before) else before)
        labels: dict[str, Any] = {
            "run_id": run_id,
            "turn": 1,
            "phase": "request",
            "attempt": submission,
            "max_attempts": self.max_attempts,
            "model": self.model,
        }
        batch: dict[str, Any] = {"batch_id": batch_id or "", "submission": submission}
        self.bus.emit(AttemptStarted(**labels, **batch, time=started))
        return labels, {**labels, **batch, **tokens, "time": ended}

    def succeeded(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        done: Completed,
        started: float,
        ended: float,
        checked: Checked | None = None,
    ) -> None:
        """An item answered: its row is final (`checked`: its structured answer)."""
        _, ending = self._attempt(pos, submission, batch_id, started, ended, done.usage)
        self.bus.emit(
            AttemptSucceeded(
                **ending,
                status_code=200,
                request_id=done.request_id or done.response_id,
                stop_reason=done.stop_reason,
                message=done.note or "",
            )
        )
        self.final_text[pos] = done.message.text if checked is None else checked.raw
        if checked is not None:
            self.values[pos] = checked.value
        self._end(pos, done.stop_reason or "end_turn")

    def failed(
        self,
        pos: int,
        submission: int,
        batch_id: str | None,
        decision: Decision,
        started: float,
        ended: float,
        request_id: str | None = None,
    ) -> None:
        """An item failed in this submission, and `decision` says what follows: "retry" or
        "reask" (it goes again, after the decision's wait) or "fail" (its row ends, the
        decision's `why` after its message). A structured answer refused afterwards (off its
        schema, cut at max_tokens) carries its usage: the row has its tokens and cost."""
        err, action, wait = decision.error, decision.action, decision.plan
        answered = err if isinstance(err, (OutputInvalid, OutputTruncated)) else None
        usage = answered.usage if answered else None
        labels, ending = self._attempt(pos, submission, batch_id, started, ended, usage)
        said: dict[str, Any] = {**error_fields(err), "message": str(err) or type(err).__name__}
        said["request_id"] = said["request_id"] or request_id  # an answer's, kept by its read
        if decision.why:
            said["message"] += f" ({decision.why})"
        if answered:  # the answer came, with a 200
            said["status_code"] = 200
        self.bus.emit(
            AttemptFailed(
                **ending,
                **said,
                action=action,
                cancelled=isinstance(err, Aborted),
            )
        )
        if wait is not None:
            self.bus.emit(
                RetryScheduled(
                    **labels,
                    **said,
                    time=ended,
                    next_attempt=submission + 1,
                    delay_s=wait.delay_s,
                    policy_delay_s=wait.policy_delay_s,
                )
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
        self._end(pos, "cancelled" if isinstance(err, Aborted) else "error")

    def _end(self, pos: int, reason: str) -> None:
        """The item's row is final: its run ends (an item never sent has no run to end)."""
        self.end_reason[pos] = reason
        if math.isnan(self.first_start[pos]):
            return
        cost = None if math.isnan(self.cost[pos]) else self.cost[pos]
        self.bus.emit(
            RunFinished(
                run_id=self.run_id(pos),
                time=self.first_start[pos] + self.duration[pos],
                turn=1,
                end_reason=reason,
                usage=Usage(self.input_tokens[pos], self.output_tokens[pos], cost_usd=cost),
                model=self.model,
                error=self.error.get(pos, ""),
                message=self.error_message.get(pos, ""),
                final_text=self.final_text[pos] or "",
            )
        )

    # -- frames -----------------------------------------------------------------------------

    def results(self, index: pd.Index[Any] | None) -> pd.DataFrame:
        """The results frame, one row per prompt (a row that never ended was cancelled)."""
        n = len(self.prompts)
        turns = np.fromiter((t is not None for t in self.final_text), bool, n).astype(int)
        columns: dict[str, Any] = {
            "prompt": string_array(self.prompts),
            "final_text": string_array(self.final_text, hand_over=True),
            "end_reason": [r or "cancelled" for r in self.end_reason],
            "error": [self.error.get(i) for i in range(n)],
            "error_message": [self.error_message.get(i) for i in range(n)],
            "input_tokens": numpy_of(self.input_tokens, np.int64),
            "output_tokens": numpy_of(self.output_tokens, np.int64),
            "cost_usd": numpy_of(self.cost, np.float64),
            "turns": turns,
            "duration_s": numpy_of(self.duration, np.float64),
            "run_id": string_array(range(n), lambda ks: [self.run_id(k) for k in ks]),
            "output": self.values,
            "reasks": numpy_of(self.reasks, np.int64),
        }
        return results_frame(columns, index, self.output)

    def attempts(self) -> pd.DataFrame:
        """The attempt log's rows, in prompt order, then submission order, with the prompt's
        position first and the agent (`<position>.1`) and worker after COLUMNS."""
        # the run ids are `<tag>-<position>`: the log keeps the positions as numbers
        pos = numpy_of(self.log.column("run_id").numbers, np.int64)
        order = np.lexsort((numpy_of(self.log.column("attempt").data, np.int64), pos))
        out = self.log.frame(order, release=True)  # the log is read once, at the end
        batch_ids = out.pop("batch_id")
        out.insert(0, "prompt_index", pos[order])
        out = with_origin(out, [f"{p}.1" for p in pos[order].tolist()], self.worker)
        out["batch_id"] = batch_ids.astype("string")
        return out
