"""What a run gives back: its result, or a handle on a run in the background."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .._core._budget import Usage
from .._core._messages import Message
from ..errors import Aborted

__all__ = ["RunHandle", "RunResult"]


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced.

    Attributes:
        final_text: The last answer's text as the model wrote it (with `output=`, the JSON:
            the output tool's arguments in tool mode).
        messages: The messages the run added to the conversation.
        usage: Tokens and cost of every attempt of the run, failed ones included (an answer
            that was reasked, a summary for compaction).
        end_reason: The model's stop reason (end_turn, max_tokens, stop_sequence, ...).
        run_id: The run's id in the attempt log and the events.
        turns: How many requests the run's steps took (reasks not counted: see `reasks`).
        model: The model that gave the last answer.
        output: With `output=`, the validated answer: an instance of the schema's type (a
            dict, or another JSON value, for a JSON Schema dict); None otherwise.
        reasks: How many times a structured answer was asked for again.
    """

    final_text: str
    messages: list[Message]
    usage: Usage
    end_reason: str  # end_turn | max_tokens | stop_sequence | ...
    run_id: str
    turns: int
    model: str
    output: Any = None
    reasks: int = 0

    def __str__(self) -> str:
        return self.final_text


class RunHandle:
    """A run in a background task: await it, or `cancel()` it (the Stop button does)."""

    def __init__(self, task: asyncio.Task[RunResult]) -> None:
        self.task = task

    def cancel(self) -> None:
        self.task.cancel()

    def done(self) -> bool:
        return self.task.done()

    def result(self) -> RunResult:
        return self.task.result()

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> RunResult:
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if self.task.cancelled():
                raise Aborted("the run was cancelled") from None
            raise

    def __repr__(self) -> str:
        state = "done" if self.task.done() else "running"
        return f"<RunHandle {state}>"
