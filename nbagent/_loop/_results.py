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
    """What a finished run produced."""

    final_text: str
    messages: list[Message]
    usage: Usage
    end_reason: str  # end_turn | max_tokens | stop_sequence | ...
    run_id: str
    turns: int
    model: str

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
