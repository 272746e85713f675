"""The loop: the one place that decides what to do about each failure.

A run is a sequence of steps. A step sends the conversation, streams the reply, runs the tools the
reply asks for, and commits the new messages all at once. Nothing is committed before the step
succeeds: a failed attempt is retried with the same snapshot, and a hard failure leaves
`agent.history` exactly as it was before the step, so the user can fix things and run again.

Every decision comes from `nbagent.errors.classify`; every wait from the `RetryPolicy`; every sleep
from the clock; everything that happens is an event on the bus, delivered before the agent acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._core._budget import Budget
from .._core._clock import Clock, RealClock
from .._core._messages import Message, TextBlock, load_session, repair_tool_pairing, save_session
from .._core._pacing import Pacer
from .._core._presenter import presenter
from .._core._retry import RetryPlan, RetryPolicy
from ..errors import (
    Aborted,
    Action,
    ConfigError,
    ContextOverflow,
    EmptyResponse,
    HostError,
    LengthResumeExhausted,
    ModelNotFound,
    ProviderError,
    RateLimited,
    StreamInterrupted,
    TransportError,
    classify,
)
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    BudgetWarning,
    Event,
    EventBus,
    FallbackStarted,
    MessageCommitted,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    Subscriber,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSourceUnavailable,
)
from ..providers._base import (
    Completed,
    ModelRequest,
    Provider,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from ._args import ModelSpec, check_arguments, resolve_model_spec
from ._attempt_log import AttemptLog
from ._compaction import Compactor, DefaultCompaction
from ._compactor import CompactingMixin
from ._durable_log import DurableLog, LogTarget
from ._limiter import shared_limiter
from ._results import (
    RunHandle,
    RunResult,
    RunState,
    StreamFailed,
    error_fields,
    partial_forbids_retry,
)
from ._tools import Tool, Toolbox, ToolCall, ToolSource

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Agent", "RunHandle", "RunResult"]


class Agent(CompactingMixin):
    """An LLM agent that makes every failure visible.

    `model` is a model string ("demo", "anthropic:claude-…", "openai:gpt-…", "openrouter:…",
    "ollama:…"), a `Provider`, or a list of them: a fallback chain, tried in order when a model's
    retries are spent or it does not exist.
    """

    def __init__(
        self,
        model: ModelSpec | Sequence[ModelSpec] = "demo",
        *,
        tools: Iterable[Tool | ToolSource | Callable[..., Any]] = (),
        system: str | None = None,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        compaction: Compactor | None = None,
        clock: Clock | None = None,
        subscribers: Iterable[Subscriber] = (),
        max_tokens: int = 4096,
        max_length_resumes: int = 2,
        max_compactions_per_step: int = 2,
        context_window: int | None = None,
        compaction_threshold: float = 0.85,
        allowed_tools: Iterable[str] | None = None,
        tool_timeout: float | None = None,
        strict_tool_pairing: bool = False,
        history: Sequence[Message] = (),
        api_key: str | None = None,
        base_url: str | None = None,
        options: dict[str, Any] | None = None,
        limiter: Pacer | bool = True,
        cache: bool = True,
        log: LogTarget | None = None,
    ) -> None:
        specs: list[ModelSpec] = (
            list(model) if isinstance(model, (list, tuple)) else [model]  # type: ignore[list-item]
        )
        if not specs:
            raise ConfigError("model= needs at least one model, e.g. model='demo'")
        subscribers, history = check_arguments(
            system=system,
            clock=clock,
            subscribers=subscribers,
            max_tokens=max_tokens,
            max_length_resumes=max_length_resumes,
            max_compactions_per_step=max_compactions_per_step,
            context_window=context_window,
            compaction_threshold=compaction_threshold,
            history=history,
            options=options,
            compaction=compaction,
        )
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive whole number, not {max_tokens!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError("retry= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=5)")
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError("budget= takes a Budget(...), e.g. Budget(max_cost_usd=0.50)")
        self._providers: list[Provider] = [
            resolve_model_spec(s, api_key=api_key, base_url=base_url) for s in specs
        ]
        self.system = system
        self.retry = retry or RetryPolicy()
        self.budget = budget or Budget()
        self.compaction: Compactor = compaction or DefaultCompaction()
        self.clock: Clock = clock or RealClock()
        self.max_tokens = max_tokens
        self.max_length_resumes = max(0, int(max_length_resumes))
        self.max_compactions_per_step = max(0, int(max_compactions_per_step))
        if context_window is not None and (
            not isinstance(context_window, int) or context_window < 1
        ):
            raise ConfigError(
                f"context_window must be a positive number of tokens, not {context_window!r}"
            )
        if not 0 < compaction_threshold <= 1:
            raise ConfigError(
                "compaction_threshold is a share of the window in (0, 1], "
                f"not {compaction_threshold!r}"
            )
        self.context_window = context_window
        self.compaction_threshold = compaction_threshold
        self.options = dict(options or {})
        self.strict_tool_pairing = strict_tool_pairing
        self.toolbox = Toolbox(tools, allowed_tools=allowed_tools, default_timeout=tool_timeout)
        self.events = EventBus()
        self._log = AttemptLog()
        self.events.subscribe(self._log)
        for s in subscribers:
            self.events.subscribe(s)
        repaired = repair_tool_pairing(list(history), strict=strict_tool_pairing)
        self.history: list[Message] = list(repaired)
        self.transcript: list[Message] = list(repaired)
        self._rng = self.retry.rng()
        self._run: RunState | None = None
        self._reported_unavailable: set[str] = set()
        if not isinstance(limiter, (bool, Pacer)):
            raise ConfigError("limiter= takes True (shared), False (off) or a RateLimiter")
        self.limiter = limiter
        if not isinstance(cache, bool):
            raise ConfigError(
                f"cache= takes True (use the provider's prompt cache) or False, not {cache!r}"
            )
        self.cache = cache
        # agent_id names this agent in traces and in the durable log (`log=`: a SQLite path or
        # connection that every finished attempt is appended to, as it finishes); opened last,
        # once every other argument has been checked
        self.agent_id = uuid.uuid4().hex[:8]
        self._durable = DurableLog(log, self.agent_id) if log is not None else None
        self._log.on_row = self._durable

    # -- public surface ---------------------------------------------------------------------

    def __repr__(self) -> str:
        models = ", ".join(self.models)
        return f"Agent(models=[{models}], messages={len(self.history)})"

    @property
    def models(self) -> list[str]:
        return [f"{p.name}:{p.model}" if p.name != "demo" else "demo" for p in self._providers]

    @property
    def attempts(self) -> pd.DataFrame:
        """One row per attempt (request, compaction, tool call) across all runs."""
        return self._log.frame()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        return self.events.subscribe(fn)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the conversation (and its full transcript) atomically. No keys are stored."""
        try:
            save_session(
                path,
                self.history,
                {"models": self.models, "transcript": [m.to_dict() for m in self.transcript]},
            )
        except OSError as exc:
            # strerror, not str(exc): the latter names the hidden temporary file, not `path`
            why = exc.strerror or str(exc)
            raise HostError(f"saving the session to {path} failed: {why}") from exc

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace the conversation with a saved one (tool calls without results are repaired)."""
        messages, meta = load_session(path, strict_tool_pairing=self.strict_tool_pairing)
        transcript = meta.get("transcript")
        self.history = messages
        if isinstance(transcript, list):
            try:
                self.transcript = [Message.from_dict(m) for m in transcript]
            except ValueError:
                self.transcript = list(messages)
        else:
            self.transcript = list(messages)

    async def aclose(self) -> None:
        """Close the HTTP connections the providers opened in this event loop. A script that
        ends its loop (`asyncio.run`) should call it, or use `async with Agent(...) as agent:`.
        Tool sources are not closed: they may serve other agents (close an MCPSource yourself).
        """
        for p in self._providers:
            await p.aclose()
        if self._durable is not None:  # commit the rows still queued (a later run reopens it)
            await asyncio.to_thread(self._durable.close)

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, prompt: str | Message, *, show: bool | None = None) -> RunResult:
        """Run the agent on `prompt` until the model ends its turn.

        Raises a typed `NbAgentError` on hard failure; `agent.history` is then as it was
        before the failed step. In a notebook the live timeline widget is shown (`show=False`
        to opt out); its Stop button cancels this run, which then raises `Aborted`.
        """
        if not _showing(show):
            return await self._run_guarded(prompt)
        task = asyncio.current_task()
        stopped = False

        def stop() -> None:
            nonlocal stopped
            stopped = True
            if task is not None:
                task.cancel()

        view = presenter().open(stop)
        detach = self.subscribe(view)
        try:
            return await self._run_guarded(prompt)
        except asyncio.CancelledError:
            if not stopped:
                raise
            if task is not None and hasattr(task, "uncancel"):  # Python 3.11+
                task.uncancel()
            raise Aborted("the run was stopped with the Stop button") from None
        finally:
            detach()
            view.close()

    def start(self, prompt: str | Message, *, show: bool | None = None) -> RunHandle:
        """Run in a background task; the kernel stays responsive. Returns an awaitable handle."""
        loop = asyncio.get_running_loop()
        if not _showing(show):
            return RunHandle(loop.create_task(self._run_guarded(prompt)))
        # The view is opened here, from the calling cell: output a task displays after the
        # cell has finished reaches no cell. Its Stop button cancels the task.
        tasks: list[asyncio.Task[RunResult]] = []

        def stop() -> None:
            for t in tasks:
                t.cancel()

        view = presenter().open(stop)

        async def shown() -> RunResult:
            detach = self.subscribe(view)
            try:
                return await self._run_guarded(prompt)
            finally:
                detach()
                view.close()

        task = loop.create_task(shown())
        task.add_done_callback(_mark_retrieved)
        tasks.append(task)
        return RunHandle(task)

    def run_sync(self, prompt: str | Message, *, show: bool | None = None) -> RunResult:
        """Run to completion from synchronous code: a script, or a notebook cell.

        Inside a running event loop (a notebook) the run happens on a worker thread with its own
        loop; nothing is patched. An interrupt cancels the run and raises `Aborted`.
        """
        from ._blocking import run_blocking

        # The view is opened from this (the cell's) thread; the run goes to a worker thread.
        view = presenter().open() if _showing(show) else None
        detach = self.subscribe(view) if view is not None else None

        async def once() -> RunResult:
            try:
                return await self._run_guarded(prompt)
            finally:
                # This loop ends with the run: close the connections opened on it (the next
                # run_sync gets a new loop and a new client), or their sockets leak.
                await self.aclose()

        try:
            return run_blocking(once)
        finally:
            if detach is not None and view is not None:
                detach()
                view.close()

    # -- the loop --------------------------------------------------------------------------

    async def _run_guarded(self, prompt: str | Message) -> RunResult:
        if self._run is not None:
            raise ConfigError(
                "this agent is already running; await the running call, or use another Agent"
            )
        if not isinstance(prompt, (str, Message)):
            raise ConfigError(
                f"a prompt is a string or a Message.user(...), not {type(prompt).__name__}"
            )
        user = Message.user(prompt) if isinstance(prompt, str) else prompt
        if user.role != "user":
            raise ConfigError("a prompt must be a user message")
        now = self.clock.now()
        deadline = now + self.budget.max_wall_s if self.budget.max_wall_s else None
        run = RunState(uuid.uuid4().hex[:8], now, deadline)
        self._run = run
        self.toolbox.retry_unavailable()  # a server that could not start may be up by now
        self._reported_unavailable.clear()
        try:
            self._emit(RunStarted, prompt=user.text, model=self.models[0], agent_id=self.agent_id)
            return await self._steps(run, user)
        finally:
            self._run = None

    def _emit(self, cls: type[Event], **fields: Any) -> None:
        run = self._run
        fields.setdefault("turn", run.turn if run else 0)
        self.events.emit(cls(run_id=run.run_id if run else "", time=self.clock.now(), **fields))

    async def _steps(self, run: RunState, user: Message) -> RunResult:
        pending: list[Message] = [user]
        added: list[Message] = []
        resumes = 0
        end_reason = "end_turn"
        final_text = ""
        try:
            while True:
                run.turn += 1
                working = self.history + pending
                completed, working = await self._produce(run, working)
                run.usage = run.usage + completed.usage
                assistant = completed.message
                truncated = completed.stop_reason == "max_tokens"
                if truncated and not assistant.blocks:
                    resumes += 1
                    if resumes > self.max_length_resumes:
                        raise LengthResumeExhausted(
                            f"the model stopped at max_tokens ({self.max_tokens}) without any "
                            f"output {resumes} times; raise max_tokens or shorten the prompt"
                        )
                    self._check_budget(run)
                    continue
                calls = [ToolCall.from_block(b, truncated=truncated) for b in assistant.tool_uses]
                new = [*pending, assistant]
                if calls:
                    results = await self.toolbox.run_batch(calls, self._emit, self.clock.now)
                    blocks: tuple[Any, ...] = tuple(results)
                    note = self.budget.wrap_up_note(run.turn)
                    if note:
                        blocks += (TextBlock(note),)
                        self._emit(
                            BudgetWarning,
                            limit="max_turns",
                            actual=run.turn,
                            limit_value=self.budget.max_turns or 0,
                            message=note,
                        )
                    new.append(Message("user", blocks))
                self._commit(working[: len(working) - len(pending)], new)
                added += new
                pending = []
                if not calls:
                    end_reason = completed.stop_reason
                    final_text = assistant.text
                    break
                self._check_budget(run)
        except asyncio.CancelledError:
            self._emit(
                RunFinished,
                end_reason="cancelled",
                usage=run.usage,
                error="Aborted",
                message="the run was cancelled",
                model=self._model_name(run),
            )
            raise
        except BaseException as exc:
            kind = type(exc).__name__
            reason = "budget" if kind == "BudgetExceeded" else "error"
            if isinstance(exc, KeyboardInterrupt):
                reason = "cancelled"
            self._emit(
                RunFinished,
                end_reason=reason,
                usage=run.usage,
                error=kind,
                message=str(exc),
                model=self._model_name(run),
            )
            if isinstance(exc, KeyboardInterrupt):
                raise Aborted("the run was interrupted") from exc
            raise
        self._emit(
            RunFinished,
            end_reason=end_reason,
            usage=run.usage,
            final_text=final_text,
            model=self._model_name(run),
        )
        return RunResult(
            final_text, added, run.usage, end_reason, run.run_id, run.turn, self._model_name(run)
        )

    def _model_name(self, run: RunState) -> str:
        return self.models[min(run.model_index, len(self.models) - 1)]

    def _commit(self, history: list[Message], new: list[Message]) -> None:
        """Append a finished step to history (possibly compacted) and to the full transcript."""
        self.history = [*history, *new]
        start = len(self.transcript)
        self.transcript = [*self.transcript, *new]
        for i, m in enumerate(new):
            self._emit(MessageCommitted, message=m, index=start + i)

    def _check_budget(self, run: RunState) -> None:
        self.budget.check(run.usage, turns=run.turn, elapsed_s=self.clock.now() - run.started)

    async def _request(self, working: list[Message]) -> ModelRequest:
        tools = tuple(await self.toolbox.specs())
        for source, reason in self.toolbox.unavailable.items():
            if source not in self._reported_unavailable:
                self._reported_unavailable.add(source)
                self._emit(ToolSourceUnavailable, source=source, reason=reason)
        return ModelRequest(
            tuple(working),
            system=self.system,
            tools=tools,
            max_tokens=self.max_tokens,
            options=self.options,
            cache=self.cache,
        )

    async def _produce(
        self, run: RunState, working: list[Message]
    ) -> tuple[Completed, list[Message]]:
        """Get the next assistant message, retrying, compacting and falling back as classified."""
        policy = self.retry
        compactions = 0
        empties = 0
        window = self.context_window or getattr(
            self._providers[run.model_index], "context_window", None
        )
        working = await self._apply_remembered(working)
        if window:
            specs = tuple(await self.toolbox.specs())
            estimate = self._estimate(working, specs)
            if estimate > self.compaction_threshold * window:
                compactions += 1
                shorter = await self._compact(working, None, compactions, target=window)
                if shorter is not None:
                    working = shorter
        while True:
            provider = self._providers[run.model_index]
            model = self._model_name(run)
            attempt = 0
            while True:
                attempt += 1
                self._emit(
                    AttemptStarted,
                    phase="request",
                    attempt=attempt,
                    max_attempts=policy.max_attempts,
                    model=model,
                )
                request = await self._request(working)
                lim = self._limiter_for(provider)
                try:
                    if lim is not None:
                        await self._acquire(lim, model, provider.name, run.deadline)
                    completed, ttft = await self._stream_once(provider, request, attempt)
                except asyncio.CancelledError:
                    self._attempt_cancelled("request", attempt, model)
                    raise
                except StreamFailed as failed:
                    err = failed.error
                    if isinstance(err, ProviderError):
                        err = policy.escalate(err)
                    action = classify(err)
                    budget_note = ""
                    if lim is not None and not failed.paced:
                        lim.failed(self.clock.now(), err)
                    if action is Action.RETRY:
                        if lim is not None and not failed.paced and not lim.allow_retry(err):
                            action = Action.FAIL
                            budget_note = " (retry budget exhausted: too many failures lately)"
                        if isinstance(err, EmptyResponse):
                            empties += 1
                            if empties > policy.max_empty_retries:
                                action = Action.FAIL
                        if partial_forbids_retry(policy.retry_after_partial, failed):
                            action = Action.FAIL
                    plan = None
                    if action is Action.RETRY:
                        left = None if run.deadline is None else run.deadline - self.clock.now()
                        plan = policy.plan(err, attempt, rng=self._rng, time_left=left)
                        if plan is None:
                            action = Action.FAIL
                    if action is Action.COMPACT and compactions >= self.max_compactions_per_step:
                        action = Action.FAIL
                    fallback = (
                        action is Action.FAIL
                        and run.model_index + 1 < len(self._providers)
                        and (isinstance(err, ModelNotFound) or classify(err) is Action.RETRY)
                    )
                    shown = "fallback" if fallback else action.value
                    info = error_fields(err)
                    info["message"] += budget_note
                    self._emit(
                        AttemptFailed,
                        phase="request",
                        attempt=attempt,
                        max_attempts=policy.max_attempts,
                        model=model,
                        action=shown,
                        ttft_s=failed.ttft,
                        discarded_text=failed.text,
                        discarded_thinking=failed.thinking,
                        **info,
                    )
                    if fallback:
                        run.model_index += 1
                        self._emit(
                            FallbackStarted,
                            from_model=model,
                            to_model=self._model_name(run),
                            error=info["error"],
                            message=info["message"],
                        )
                        break
                    if action is Action.RETRY and plan is not None:
                        await self._wait_for_retry("request", attempt, model, plan, info, failed)
                        continue
                    if action is Action.COMPACT:
                        assert isinstance(err, ContextOverflow)
                        compactions += 1
                        shorter = await self._compact(
                            working, err, compactions, target=err.limit or window
                        )
                        if shorter is None:
                            raise err from None
                        working = shorter
                        continue
                    raise err from None
                if lim is not None:
                    lim.succeeded(self.clock.now(), completed.headers)
                self._attempt_succeeded("request", attempt, model, completed, ttft)
                self._calibrate(request, completed.usage.input_tokens)
                return completed, working

    def _attempt_cancelled(self, phase: str, attempt: int, model: str) -> None:
        self._emit(
            AttemptFailed,
            phase=phase,
            attempt=attempt,
            max_attempts=self.retry.max_attempts,
            model=model,
            error="Aborted",
            message="cancelled",
            action="fail",
            cancelled=True,
        )

    def _attempt_succeeded(
        self, phase: str, attempt: int, model: str, completed: Completed, ttft: float | None
    ) -> None:
        self._emit(
            AttemptSucceeded,
            phase=phase,
            attempt=attempt,
            max_attempts=self.retry.max_attempts,
            model=model,
            request_id=completed.request_id,
            ttft_s=ttft,
            input_tokens=completed.usage.input_tokens,
            output_tokens=completed.usage.output_tokens,
            cache_read_tokens=completed.usage.cache_read_tokens,
            cache_write_tokens=completed.usage.cache_write_tokens,
            cost_usd=completed.usage.cost_usd,
            stop_reason=completed.stop_reason,
        )

    async def _wait_for_retry(
        self,
        phase: str,
        attempt: int,
        model: str,
        plan: RetryPlan,
        info: dict[str, Any],
        failed: StreamFailed,
    ) -> None:
        """Announce the retry (before the wait, so a widget can count down), then wait."""
        self._emit(
            RetryScheduled,
            phase=phase,
            attempt=attempt,
            next_attempt=attempt + 1,
            max_attempts=self.retry.max_attempts,
            delay_s=plan.delay_s,
            policy_delay_s=plan.policy_delay_s,
            retry_after_s=plan.retry_after_s,
            discarded_text=failed.text,
            discarded_thinking=failed.thinking,
            model=model,
            **{k: v for k, v in info.items() if k != "retry_after_s"},
        )
        await self.clock.sleep(plan.delay_s)

    async def _stream_once(
        self, provider: Provider, request: ModelRequest, attempt: int, *, quiet: bool = False
    ) -> tuple[Completed, float | None]:
        """One attempt. Deltas become events; any failure comes back as `StreamFailed`."""
        text: list[str] = []
        thinking: list[str] = []
        t0 = self.clock.now()
        ttft: float | None = None
        completed: Completed | None = None
        stream = provider.stream(request)
        try:
            async for part in stream:
                if ttft is None:
                    ttft = self.clock.now() - t0
                if isinstance(part, TextPart):
                    text.append(part.text)
                    if not quiet:
                        self._emit(TextDelta, text=part.text, attempt=attempt)
                elif isinstance(part, ThinkingPart):
                    thinking.append(part.text)
                    if not quiet:
                        self._emit(ThinkingDelta, text=part.text, attempt=attempt)
                elif isinstance(part, ToolCallPart) and not quiet:
                    self._emit(
                        ToolCallDelta,
                        index=part.index,
                        call_id=part.call_id,
                        name=part.name,
                        arguments=part.arguments,
                        attempt=attempt,
                    )
                elif isinstance(part, Completed):
                    completed = part
            if completed is None:
                raise StreamInterrupted(
                    "the stream ended without a final message", provider=provider.name
                )
            if not completed.message.blocks and completed.stop_reason != "max_tokens":
                raise EmptyResponse(
                    "the model returned an empty message",
                    provider=provider.name,
                    status_code=200,
                    request_id=completed.request_id,
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            err: Exception = exc
            if isinstance(exc, OSError):
                err = TransportError(str(exc) or type(exc).__name__, provider=provider.name)
            raise StreamFailed(err, "".join(text), "".join(thinking), ttft) from exc
        finally:
            await _close_stream(stream)
        return completed, ttft

    def _limiter_for(self, provider: Provider) -> Pacer | None:
        if self.limiter is False:
            return None
        if self.limiter is not True:
            return self.limiter
        return shared_limiter(provider, self.clock)

    async def _acquire(self, lim: Pacer, model: str, provider: str, deadline: float | None) -> None:
        def waiting(delay: float, reason: str) -> None:
            self._emit(PacedWait, delay_s=delay, model=model, reason=reason)

        try:
            await lim.acquire(
                self.clock,
                deadline=deadline,
                max_wait=self.retry.max_retry_after,
                provider=provider,
                on_wait=waiting,
            )
        except RateLimited as err:
            raise StreamFailed(err, "", "", None, paced=True) from None


def _showing(show: bool | None) -> bool:
    """`show=None` means: show the run where a presenter can (in a notebook)."""
    return presenter().active() if show is None else show


def _mark_retrieved(task: asyncio.Task[RunResult]) -> None:
    """A background run's failure is shown in its view and raised by awaiting its handle; mark
    it retrieved so asyncio does not also log it as never retrieved."""
    if not task.cancelled():
        task.exception()


async def _close_stream(stream: object) -> None:
    """Close a provider stream the loop stopped reading early (a subscriber raised mid-stream),
    and its HTTP response with it, now rather than whenever the garbage collector gets to it
    (a notebook keeps the last exception, and with it the suspended stream, alive)."""
    aclose = getattr(stream, "aclose", None)
    if callable(aclose):
        with contextlib.suppress(Exception):
            await aclose()
