"""One run of the agent: steps until the model ends its turn.

A step sends the conversation (`Requester.next_message`: retries, compaction and fallback happen
there), runs the tools the reply asks for (every call gets one result, in call order), and
commits the new messages all at once. Nothing is committed before the step succeeds, so a hard
failure leaves the conversation exactly as it was before the step.

Between steps the budget is checked (a soft cap: the step that passes it finishes). A reply cut
off at max_tokens with nothing in it is asked for again (`max_length_resumes` times); a reply the
server paused (`pause_turn`) is sent back as it is and continued, and the two parts become one
assistant message. The run ends with `RunFinished`, whatever happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from .._core._attempts import Emit
from .._core._budget import Budget
from .._core._clock import Clock
from .._core._messages import Block, Message, TextBlock
from ..errors import Aborted, BudgetExceeded, LengthResumeExhausted
from ..events import BudgetWarning, MessageCommitted, RunFinished
from ._request import Requester, RunState
from ._results import RunResult
from ._toolbox import Toolbox
from ._tools import ToolCall

__all__ = ["Run"]

Commit = Callable[[list[Message], list[Message]], int]
"""`(history, new) -> index of the first new message in the transcript`: the agent's record."""


@dataclass
class Run:
    state: RunState
    requester: Requester
    toolbox: Toolbox
    budget: Budget
    clock: Clock
    emit: Emit
    history: list[Message]
    commit: Commit
    max_tokens: int
    max_length_resumes: int

    async def __call__(self, user: Message) -> RunResult:
        state = self.state
        try:
            final_text, added, end_reason = await self._steps(user)
        except asyncio.CancelledError:
            self._finished("cancelled", error="Aborted", message="the run was cancelled")
            raise
        except BaseException as exc:
            reason = "budget" if isinstance(exc, BudgetExceeded) else "error"
            if isinstance(exc, KeyboardInterrupt):
                reason = "cancelled"
            self._finished(reason, error=type(exc).__name__, message=str(exc))
            if isinstance(exc, KeyboardInterrupt):
                raise Aborted("the run was interrupted") from exc
            raise
        self._finished(end_reason, final_text=final_text)
        return RunResult(
            final_text,
            added,
            state.usage,
            end_reason,
            state.run_id,
            state.turn,
            self.requester.model,
        )

    async def _steps(self, user: Message) -> tuple[str, list[Message], str]:
        state = self.state
        pending: list[Message] = [user]
        paused: Message | None = None  # a reply the server paused, sent back to be continued
        added: list[Message] = []
        resumes = 0
        while True:
            state.turn += 1
            completed, working = await self.requester.next_message(self.history + pending)
            # what the request answered, less this step's messages, is the (compacted) history
            history = working[: len(working) - len(pending)]
            state.usage = state.usage + completed.usage
            assistant = completed.message
            if paused is not None:
                pending.pop()
                assistant = Message("assistant", (*paused.blocks, *assistant.blocks))
                paused = None
            if completed.stop_reason == "pause_turn":
                paused = assistant
                pending.append(assistant)
                self._check_budget()
                continue
            truncated = completed.stop_reason == "max_tokens"
            if truncated and not (assistant.text.strip() or assistant.tool_uses):
                resumes += 1
                if resumes > self.max_length_resumes:
                    raise LengthResumeExhausted(
                        f"the model stopped at max_tokens ({self.max_tokens}) without any "
                        f"output {resumes} times; raise max_tokens or shorten the prompt"
                    )
                self._check_budget()
                continue
            calls = [ToolCall.from_block(b, truncated=truncated) for b in assistant.tool_uses]
            new = [*pending, assistant]
            if calls:
                new.append(await self._tool_results(calls))
            self._commit(history, new)
            added += new
            pending = []
            if not calls:
                return assistant.text, added, completed.stop_reason
            self._check_budget()

    async def _tool_results(self, calls: list[ToolCall]) -> Message:
        """Run the calls; their results (and the budget's wrap-up note) as one user message."""
        results = await self.toolbox.run_batch(calls, self.emit, self.clock.now)
        blocks: tuple[Block, ...] = tuple(results)
        note = self.budget.wrap_up_note(self.state.turn)
        if note:
            blocks += (TextBlock(note),)
            self.emit(
                BudgetWarning(
                    limit="max_turns",
                    actual=self.state.turn,
                    limit_value=self.budget.max_turns or 0,
                    message=note,
                )
            )
        return Message("user", blocks)

    def _commit(self, history: list[Message], new: list[Message]) -> None:
        start = self.commit(history, new)
        self.history = [*history, *new]
        for i, m in enumerate(new):
            self.emit(MessageCommitted(message=m, index=start + i))

    def _check_budget(self) -> None:
        state = self.state
        self.budget.check(state.usage, turns=state.turn, elapsed_s=self.clock.now() - state.started)

    def _finished(
        self, end_reason: str, *, error: str = "", message: str = "", final_text: str = ""
    ) -> None:
        self.emit(
            RunFinished(
                end_reason=end_reason,
                usage=self.state.usage,
                model=self.requester.model,
                error=error,
                message=message,
                final_text=final_text,
            )
        )
