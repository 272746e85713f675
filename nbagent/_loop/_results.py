"""What a run gives back: its result, or a handle on a run in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from .._core._budget import Usage
from .._core._messages import Message
from ..errors import Aborted

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's answer: `str` for plain text, the schema's type with `output=Review`
(`Agent[Review]`, `RunResult[Review]`), `dict[str, Any]` for a JSON Schema dict."""


@dataclass(frozen=True)
class RunResult(Generic[OutputT]):
    """What a finished run produced. `str(result)` is its final text.

    Generic in the answer's type, as pydantic-ai's `AgentRunResult[T]`: `Agent("demo")` runs
    give a `RunResult[str]`, `Agent("demo", output=Review)` runs a `RunResult[Review]`, so a
    type checker knows what `result.output` is.

    Attributes:
        final_text: The last assistant message's text: the answer (with `output=`, the JSON
            as the model wrote it: the output tool's arguments in tool mode).
        messages: The messages this run added to the conversation (the prompt, the model's
            replies, the tool results), in order.
        usage: Tokens, cost and requests of every attempt of the run, failed ones included
            (retries, an answer that was reasked, summaries for compaction).
        end_reason: The model's stop reason for its last reply ("end_turn", "max_tokens",
            "stop_sequence", ...).
        run_id: The run's id: the attempt log's `run_id` for its rows.
        turns: How many steps (model replies) it took (reasks not counted: see `reasks`).
        model: The model that gave the last reply (after a fallback, not the first one).
        output: The answer: with `output=`, the validated answer, an instance of the schema's
            type (a dict, or another JSON value, for a JSON Schema dict); for plain text, the
            final text.
        reasks: How many times a structured answer was asked for again.
    """

    final_text: str
    messages: list[Message]
    usage: Usage
    end_reason: str  # end_turn | max_tokens | stop_sequence | ...
    run_id: str
    turns: int
    model: str
    output: OutputT
    reasks: int = 0

    def __str__(self) -> str:
        return self.final_text


class RunHandle(Generic[OutputT]):
    """A run in a background task (`agent.start(...)`): await it, or `cancel()` it.

    `await handle` gives the `RunResult`, or raises the run's typed error; a cancelled run
    raises `Aborted`.

    Args:
        task: The task running it.

    Attributes:
        task: The task running it.
    """

    def __init__(self, task: asyncio.Task[RunResult[OutputT]]) -> None:
        self.task = task

    def cancel(self) -> None:
        """Cancel the run (what the widget's Stop button does); awaiting it raises `Aborted`."""
        self.task.cancel()

    def done(self) -> bool:
        """Whether the run has ended (well, with an error, or cancelled).

        Returns:
            True once it has ended.
        """
        return self.task.done()

    def result(self) -> RunResult[OutputT]:
        """The result of a run that has ended, without awaiting.

        Returns:
            The run's result.

        Raises:
            asyncio.InvalidStateError: The run has not ended yet.
            asyncio.CancelledError: The run was cancelled.
        """
        return self.task.result()

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self._wait().__await__()

    async def _wait(self) -> RunResult[OutputT]:
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if self.task.cancelled():
                raise Aborted("the run was cancelled") from None
            raise

    def __repr__(self) -> str:
        state = "done" if self.task.done() else "running"
        return f"<RunHandle {state}>"
