"""The request path: the next assistant message for a conversation, whatever it takes.

`Requester.next_message` walks the model chain (the fallback models), and for each model runs
one `AttemptLoop`: the attempt streams the reply (`stream_once`), the loop decides about each
failure (retry after a wait, compact and retry, fall back, fail), the rate limiter paces each
request. Before the first attempt the conversation is brought inside the context window
(`ContextKeeper.prepare`, then `Requester._fit` past `compaction_threshold`); with
`context_window=` given, a request the estimate still puts over the window after every
compaction allowed is not sent but fails with `ContextOverflow`; an overflow the provider
reports compacts it (`ContextKeeper.compact`, given the error). The request is built afresh for
every attempt from the current conversation, so a retry sends the same snapshot and a compacted
conversation is what the next attempt sends.

`Requester.summarize` is the summary request compaction asks for: phase "compaction", the same
attempt loop, quiet (no deltas), its usage counted in the run's.

With `output=` (`StructuredOutput`), each request carries the model's `OutputFormat` (and the
output tool, or the schema in the system prompt), and each answer is checked inside its attempt:
an answer off its schema fails the attempt, and the loop's decision is a reask (`Reask`, which
the run turns into a new request) or, past `output_retries`, the failure; a server refusing the
native form in `auto` mode gets the next form at once (`StructuredOutput.reform`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core._attempts import AttemptLoop, Fallback, Sent
from .._core._event_types import AttemptPhase
from .._core._messages import Message
from ..errors import ContextOverflow
from ..events import Event, FallbackStarted, Stamp, ToolSourceUnavailable
from ..providers import Completed, ModelRequest, Provider, ToolSpec
from ._context import ContextKeeper
from ._output_step import Checked, StructuredOutput, answer_limit
from ._parts import AgentParts, RunState
from ._stream import Streamed, stream_once

SUMMARY_SYSTEM = "You summarise conversations faithfully and briefly."


@dataclass
class _Step:
    """One step's conversation as compaction changes it, and the request last sent."""

    working: list[Message]
    tools: tuple[ToolSpec, ...]
    compactions: int = 0
    sent: ModelRequest | None = None


@dataclass
class Requester:
    """The run's requests, under the agent's configuration (read as it is used: `AgentParts`)."""

    agent: AgentParts
    state: RunState
    output: StructuredOutput | None = None
    keeper: ContextKeeper = field(init=False)
    _reported: set[str] = field(default_factory=set)  # tool sources announced unavailable

    def __post_init__(self) -> None:
        a = self.agent
        self.keeper = ContextKeeper(a.compaction, system=a.system, emit=self.emit)

    def emit(self, event: Event) -> None:
        """Deliver `event`, stamped with the run, its current turn and the clock's time."""
        self.agent.events.emit(
            event, Stamp(self.state.run_id, self.agent.clock.now(), self.state.turn)
        )

    @property
    def model(self) -> str:
        return self.agent.models[min(self.state.model_index, len(self.agent.models) - 1)]

    @property
    def provider(self) -> Provider:
        return self.agent._providers[self.state.model_index]

    def _window(self) -> int | None:
        return self.agent.context_window or getattr(self.provider, "context_window", None)

    async def _tools(self) -> tuple[ToolSpec, ...]:
        """The tools offered now; a tool source that cannot offer any is announced once a run."""
        specs = tuple(await self.agent.toolbox.specs())
        for source, reason in self.agent.toolbox.unavailable.items():
            if source not in self._reported:
                self._reported.add(source)
                self.emit(ToolSourceUnavailable(source=source, reason=reason))
        return specs

    async def next_message(
        self, working: list[Message], *, reasks_left: int = 0
    ) -> tuple[Completed, list[Message], Checked | None]:
        """The next assistant message, the conversation it answered (compacted or not), and
        its checked structured answer (None without `output=`, or when it calls tools).

        Raises `Reask` (a structured answer off its schema, `reasks_left` > 0) or the final
        error."""
        tools = await self._tools()
        step = _Step(await self.keeper.prepare(working, tools), tools)
        await self._fit(step)
        while True:
            model = self.model
            try:
                streamed = await self._ask(self.provider, model, step, reasks_left)
            except Fallback as fallback:
                self.state.model_index += 1
                self.emit(
                    FallbackStarted(
                        from_model=model,
                        to_model=self.model,
                        error=type(fallback.error).__name__,
                        message=str(fallback.error),
                    )
                )
                continue
            assert step.sent is not None
            self.keeper.calibrate(step.sent, streamed.completed.usage.input_tokens)
            return streamed.completed, step.working, streamed.checked

    async def _fit(self, step: _Step) -> None:
        """Before the first attempt, compact once if the estimate passes `compaction_threshold`
        of the model's window (it counts against the step's allowance). With `context_window=`
        given, never send what the estimate says will not fit: shed more (each round sheds
        more) while the step's allowance lasts, then fail before sending. A server sent an
        oversized prompt may just cut the stream, with no word of the context, so the failure
        is named here, where it is known."""
        window = self._window()
        estimate = self.keeper.estimate(step.working, step.tools)
        if not window or estimate <= self.agent.compaction_threshold * window:
            return  # the threshold is at most 1: inside the window too
        allowed = self.agent.max_compactions_per_step
        while True:  # the first round is the proactive one, whatever the allowance
            shed = await self._shed(step, None, window)
            if shed:
                estimate = self.keeper.estimate(step.working, step.tools)
            if not self.agent.context_window or estimate <= window:
                return
            if not shed and step.compactions > 1:
                why = "compaction has nothing more to shed"
            elif step.compactions >= allowed:
                why = f"the {allowed} compactions allowed per step are spent"
            else:
                continue
            raise ContextOverflow(
                f"the request is about {estimate:,} tokens (estimated), over the "
                f"{window:,}-token context window, and {why}, so it was not sent",
                tokens=estimate,
                limit=window,
                provider=self.provider.name,
                code="context_window",
            )

    async def _ask(
        self, provider: Provider, model: str, step: _Step, reasks_left: int = 0
    ) -> Streamed:
        """One model's attempt loop for this step; raises `Fallback` to hand over, `Reask` to
        ask for a structured answer again."""
        a, out, index = self.agent, self.output, self.state.model_index
        max_tokens = answer_limit(a.max_tokens, a.options)

        async def attempt(n: int) -> Streamed:
            tools = tuple(await self._tools())
            request = ModelRequest(
                tuple(step.working),
                system=a.system if out is None else out.system(index, a.system),
                tools=tools if out is None else out.tools(index, tools),
                max_tokens=a.max_tokens,
                options=a.options,
                cache=a.cache,
                output=None if out is None else out.plans[index].format,
            )
            step.sent = request
            streamed = await stream_once(
                provider, request, attempt=n, clock=a.clock, emit=self.emit
            )
            if out is not None:
                streamed.checked = out.check(
                    streamed.completed, index, max_tokens=max_tokens, sent=streamed.sent()
                )
            return streamed

        def describe(streamed: Streamed) -> Sent:
            if out is None or streamed.checked is None:
                return streamed.sent()
            return streamed.sent(f"structured answer ({out.plans[index].why})")

        async def compact(error: ContextOverflow) -> bool:
            return await self._shed(step, error, error.limit or self._window())

        loop = self._attempt_loop(
            "request",
            model,
            provider,
            compactions_left=a.max_compactions_per_step - step.compactions,
            can_fall_back=self.state.model_index + 1 < len(a._providers),
            reasks_left=reasks_left,
        )
        reform = None if out is None else lambda error: out.reform(index, error)
        return await loop.run(attempt, describe=describe, compact=compact, reform=reform)

    async def _shed(self, step: _Step, error: ContextOverflow | None, target: int | None) -> bool:
        """The step's next round of compaction towards `target` tokens: before sending
        (`error` None) or after the provider's overflow. Whether it shed anything."""
        step.compactions += 1
        shorter = await self.keeper.compact(
            step.working, step.tools, self.summarize, error, step.compactions, target=target
        )
        if shorter is not None:
            step.working = shorter
        return shorter is not None

    async def summarize(self, messages: Sequence[Message], instruction: str) -> str:
        """A summary from the current model, under the same policy; raises its final error."""
        provider = self.provider
        request = ModelRequest(
            (*messages, Message.user(instruction)),
            system=SUMMARY_SYSTEM,
            max_tokens=min(self.agent.max_tokens, 2048),
        )
        loop = self._attempt_loop("compaction", self.model, provider)
        streamed = await loop.run(
            lambda n: stream_once(provider, request, attempt=n, clock=self.agent.clock, emit=None),
            describe=Streamed.sent,
        )
        self.state.usage = self.state.usage + streamed.completed.usage
        return streamed.completed.message.text

    def _attempt_loop(
        self, phase: AttemptPhase, model: str, provider: Provider, **limits: Any
    ) -> AttemptLoop:
        """The attempt loop of one request to `provider` (`limits`: its compactions, fallback
        and reasks left), under the agent's policy, clock, pacer and deadline."""
        a = self.agent
        return AttemptLoop(
            a.retry,
            clock=a.clock,
            emit=self.emit,
            phase=phase,
            model=model,
            provider=provider.name,
            rng=a._rng,
            deadline=self.state.deadline,
            pacer=a.pacer_for(provider),
            **limits,
        )
