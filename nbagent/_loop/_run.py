"""One run of the agent: steps until the model ends its turn.

A step sends the conversation (`Requester.next_message`: retries, compaction and fallback happen
there), runs the tools the reply asks for (every call gets one result, in call order), and
commits the new messages all at once. Nothing is committed before the step succeeds, so a hard
failure leaves the conversation exactly as it was before the step.

Between steps the budget is checked (a soft cap: the step that passes it finishes). A reply cut
off at max_tokens with nothing in it is asked for again (`max_length_resumes` times); a reply the
server paused (`pause_turn`) is sent back as it is and continued, and the two parts become one
assistant message. The run ends with `RunFinished`, whatever happened.

With `output=`, the step whose answer passes its schema ends the run (`RunResult.output`). An
answer off its schema is asked for again (a reask: the same turn, a new request): the failed
answer and the errors ride along uncommitted, only the latest pair of them, so every reask's
prompt is the first reask's size give or take one answer; the budgets count each reask as a
turn, with its tokens, cost and time. Nothing of it is committed unless an answer passes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._core._attempts import Reask
from .._core._messages import Block, Message, TextBlock
from ..errors import (
    Aborted,
    BudgetExceeded,
    LengthResumeExhausted,
    OutputInvalid,
    OutputTruncated,
)
from ..events import BudgetWarning, MessageCommitted, RunFinished
from ._request import Requester
from ._results import RunResult
from ._stream import has_content
from ._tools import ToolCall


class Run(Requester):
    """One run: the steps, over the run's requests (`Requester`: the agent, the run's state,
    where its events go, and the structured answer asked for)."""

    async def __call__(self, user: Message) -> RunResult[Any]:
        state = self.state
        self._value: object = None
        try:
            final_text, added, end_reason = await self._steps(user)
        except (OutputInvalid, OutputTruncated) as exc:
            # the refused answer cost what it cost: the run's usage says so
            if exc.usage is not None:
                state.usage = state.usage + exc.usage
            if isinstance(exc, OutputInvalid) and state.reasks:
                exc = exc.with_reasks(state.reasks)
            self._finished("error", error=type(exc).__name__, message=str(exc))
            raise exc from None
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
            self.model,
            # a plain-text run's output is its text (RunResult[str]), as in pydantic-ai
            output=final_text if self.output is None else self._value,
            reasks=state.reasks,
        )

    async def _steps(self, user: Message) -> tuple[str, list[Message], str]:
        state = self.state
        pending: list[Message] = [user]
        paused: Message | None = None  # a reply the server paused, sent back to be continued
        added: list[Message] = []
        resumes = 0
        tail: list[Message] = []  # the latest failed structured answer and its reask
        retries = self.output.retries if self.output is not None else 0
        while True:
            if not tail:
                state.turn += 1  # a reask is the same turn, asked again
            sent = [*pending, *tail]
            try:
                completed, working, checked = await self.next_message(
                    self.agent.history + sent, reasks_left=retries - state.reasks
                )
            except Reask as reask:
                if paused is not None:  # the answer continued a paused turn: one message
                    pending.pop()
                tail = self._reask(reask.error, paused)
                paused = None
                continue
            # what the request answered, less this step's messages, is the (compacted) history
            history = working[: len(working) - len(sent)]
            tail = []
            state.usage = state.usage + completed.usage
            assistant = completed.message
            if paused is not None:
                pending.pop()
                assistant = Message("assistant", (*paused.blocks, *assistant.blocks))
                paused = None
            if checked is not None and self.output is not None:
                self._value = checked.value
                index = self.state.model_index
                new = [*pending, assistant, *self.output.final_messages(completed, index)]
                self._commit(history, new)
                added += new
                return checked.raw, added, completed.stop_reason
            if completed.stop_reason == "pause_turn":
                paused = assistant
                pending.append(assistant)
                self._check_budget()
                continue
            truncated = completed.stop_reason == "max_tokens"
            if truncated and not has_content(assistant):
                resumes += 1
                if resumes > self.agent.max_length_resumes:
                    raise LengthResumeExhausted(
                        f"the model stopped at max_tokens ({self.agent.max_tokens}) without any "
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

    def _reask(self, error: OutputInvalid, paused: Message | None = None) -> list[Message]:
        """Count a reask (its answer's usage, a turn for the budgets) and build the pair that
        replaces the previous one: the failed answer (after the paused part it continued), and
        the errors asking again."""
        state = self.state
        state.reasks += 1
        if error.usage is not None:
            state.usage = state.usage + error.usage
        self._check_budget()
        assert self.output is not None
        before = paused.blocks if paused is not None else ()
        return self.output.reask(error, self.state.model_index, before)

    async def _tool_results(self, calls: list[ToolCall]) -> Message:
        """Run the calls; their results (and the budget's wrap-up note) as one user message."""
        results = await self.agent.toolbox.run_batch(calls, self.emit, self.agent.clock.now)
        blocks: tuple[Block, ...] = tuple(results)
        note = self.agent.budget.wrap_up_note(self.state.turn)
        if note:
            blocks += (TextBlock(note),)
            self.emit(
                BudgetWarning(
                    limit="max_turns",
                    actual=self.state.turn,
                    limit_value=self.agent.budget.max_turns or 0,
                    message=note,
                )
            )
        return Message("user", blocks)

    def _commit(self, history: list[Message], new: list[Message]) -> None:
        start = self.agent._commit(history, new)
        for i, m in enumerate(new):
            self.emit(MessageCommitted(message=m, index=start + i))

    def _check_budget(self) -> None:
        state = self.state
        turns = state.turn + state.reasks  # a reask is a turn for the budgets
        elapsed = self.agent.clock.now() - state.started
        self.agent.budget.check(state.usage, turns=turns, elapsed_s=elapsed)

    def _finished(
        self, end_reason: str, *, error: str = "", message: str = "", final_text: str = ""
    ) -> None:
        self.emit(
            RunFinished(
                end_reason=end_reason,
                usage=self.state.usage,
                model=self.model,
                error=error,
                message=message,
                final_text=final_text,
            )
        )
