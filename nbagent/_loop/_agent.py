"""The agent: its configuration, its conversation, and the ways to run it.

`Agent` holds what the user configured and the conversation (`history`, and the untouched
`transcript`), and delegates the work: a run is a `Run` (`_run.py`: steps, tools, commits), whose
requests go through a `Requester` (`_request.py`: the model chain, the attempt loop, compaction
via a `ContextKeeper`), whose every attempt goes through the one `AttemptLoop` and the one
`decide` of the core. Everything that happens is an event on `agent.events`; the attempt log,
the widget and any subscriber read it from there.

A run is shown in a notebook through the core's presenter seam (the notebook package registers
the live widget), so this module knows nothing of widgets.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._core._budget import Budget
from .._core._clock import Clock, RealClock
from .._core._messages import Message, load_session, repair_tool_pairing, save_session
from .._core._pacing import Pacer
from .._core._presenter import presenter
from .._core._retry import RetryPolicy
from ..errors import Aborted, ConfigError, HostError
from ..events import Event, EventBus, RunStarted, Stamp, Subscriber
from ..providers import HTTPProvider, Provider
from ..recording import Recorder
from ._args import ModelSpec, check_arguments, resolve_model_spec
from ._attempt_log import AttemptLog
from ._compaction import Compactor
from ._context import ContextKeeper
from ._durable_log import DurableLog, LogTarget
from ._limiter import shared_limiter
from ._output_schema import OutputMode, OutputSchema, OutputValidator
from ._output_step import StructuredOutput, refuse_mode_without_output
from ._request import Requester, RequestSettings, RunState
from ._results import RunHandle, RunResult
from ._run import Run
from ._summaries import DefaultCompaction
from ._toolbox import Toolbox
from ._tools import Tool, ToolSource

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Agent", "RunHandle", "RunResult"]


def _recorder(record: str | os.PathLike[str] | Recorder | None) -> Recorder | None:
    if record is None or isinstance(record, Recorder):
        return record
    if not isinstance(record, (str, os.PathLike)):
        raise ConfigError(
            f"record= takes a path for the recording (e.g. 'storm.nbrec') or a Recorder, "
            f"not {type(record).__name__}."
        )
    return Recorder(record, made_by="nbagent Agent(record=...)")


class Agent:
    """An LLM agent that makes every failure visible.

    It holds what you configured and the conversation; each run (`run`, `start`, `run_sync`)
    sends the conversation, retries, compacts or fails as the four actions say, and commits
    the new messages only when a step succeeds. Every argument is checked here, before
    anything is sent: a wrong one raises `ConfigError` with one sentence on what to change.

    Args:
        model: A model string ("demo", "anthropic:claude-…", "openai:gpt-…",
            "openrouter:…", "ollama:…", "replay:<recording>"), a `Provider`, or a list of
            them: a fallback chain, tried in order when a model's retries are spent or it
            does not exist.
        tools: Functions (made tools as by `@tool`), `Tool`s and `ToolSource`s (an
            `MCPSource`) the model may call.
        system: The system prompt; None for none.
        retry: How often to try and how long to wait; None for `RetryPolicy()` (4 attempts,
            full jitter).
        budget: Limits per run (cost, tokens, wall clock, turns); None for none.
        compaction: What shrinks the conversation when it outgrows the context window; None
            for `DefaultCompaction()` (stub old tool output, then summarise).
        clock: What time is read from and waits go through; None for real time (a
            `VirtualClock` runs minutes of backoff in no time).
        subscribers: Called with every event, in order, before the agent acts on it.
        max_tokens: The most tokens one reply may have.
        max_length_resumes: How often a reply cut off at `max_tokens` with nothing in it is
            asked for again before `LengthResumeExhausted`.
        max_compactions_per_step: How often one step may compact before an overflow is final.
        context_window: The model's window in tokens, to compact before sending instead of
            after an overflow (and never send what the estimate says will not fit); None for
            the provider's figure when it has one.
        compaction_threshold: Compact before sending when the estimate passes this share of
            the window (0..1].
        allowed_tools: The names of the tools the model may call; None for all. A call to
            another gets an error result.
        tool_timeout: Seconds a tool call may take before it gets a "timed out" error
            result; None for no limit (a tool's own `timeout` wins).
        strict_tool_pairing: False (the default): a history with a tool call but no result
            (an interrupted run) gets an error result, so a provider accepts it. True: raise
            `ToolPairingError` instead.
        history: The conversation to start from (`Message`s).
        api_key: The key for model strings; None for the provider's environment variable
            (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ...). Never shown or stored.
        base_url: The endpoint for model strings; None for the provider's own.
        options: Provider-specific request fields sent as given (temperature, reasoning
            settings, ...).
        limiter: True (the default): pace requests with the limiter this process shares per
            provider, endpoint and key, so agents racing one rate limit do not storm it.
            False: no pacing. A `RateLimiter` (any `Pacer`): that one.
        cache: Whether to mark the stable prefix for the provider's prompt cache, where it
            has one.
        log: A durable attempt log: a SQLite path or connection that every finished attempt
            is appended to as it finishes (`nbagent.analysis.read_attempts` reads it).
        record: A path (".nbrec") or a `nbagent.recording.Recorder`: every HTTP exchange of
            the model chain is appended as it happens, to replay it later
            (`Agent("replay:<path>")`) or ask `what_if` about it.
        output: Ask for structured answers: a pydantic model, a dataclass, a TypedDict,
            `list[...]` of those, or a JSON Schema dict; `result.output` is the validated
            answer (see the structured outputs guide). None for plain text.
        output_mode: How the schema reaches the model: "auto" (the provider's own
            constrained decoding where the model has it, else a forced output tool),
            "native", "tool", or "prompted" (the schema in the instructions).
        output_retries: How many times an answer off its schema is asked for again: reasks,
            not attempts (each reask is a new request whose transport failures are retried
            under `retry=` as any request's are); 0 fails at the first wrong answer. An answer
            cut at `max_tokens` is never reasked (`OutputTruncated`), nor is a refusal
            (`ContentFiltered`).

    Attributes:
        system: The system prompt.
        budget: The run limits.
        compaction: The compaction strategy.
        clock: The clock.
        max_tokens: The most tokens one reply may have.
        options: The provider-specific request fields.
        limiter: What paces requests (see `pacer_for`).
        toolbox: The tools, as the agent runs them.
        events: The event bus: `agent.events.subscribe(fn)` is `agent.subscribe(fn)`.
        history: The conversation the next run sends (compacted, when compaction has
            happened).
        transcript: Every message ever committed, never compacted.
        agent_id: A short id naming this agent in traces, batches and the durable log.
        recorder: Where HTTP exchanges are recorded, or None.

    Raises:
        ConfigError: An argument of the wrong kind or out of range, an unknown model string,
            a missing key, a malformed URL, a log or recording path that cannot be used.
        ToolPairingError: `strict_tool_pairing` and `history` has a tool call without result.
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
        record: str | os.PathLike[str] | Recorder | None = None,
        output: Any = None,
        output_mode: OutputMode = "auto",
        output_retries: int = 2,
    ) -> None:
        specs: list[ModelSpec] = (
            list(model) if isinstance(model, (list, tuple)) else [model]  # type: ignore[list-item]
        )
        if not specs:
            raise ConfigError("model= needs at least one model, e.g. model='demo'")
        subscribers, history = check_arguments(
            system=system,
            retry=retry,
            budget=budget,
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
            limiter=limiter,
            cache=cache,
        )
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
        self.context_window = context_window
        self.compaction_threshold = compaction_threshold
        self.options = dict(options or {})
        self.strict_tool_pairing = strict_tool_pairing
        self.limiter = limiter
        self.cache = cache
        self.toolbox = Toolbox(tools, allowed_tools=allowed_tools, default_timeout=tool_timeout)
        self.events = EventBus()
        self._log = AttemptLog()
        self.events.subscribe(self._log)
        for s in subscribers:
            self.events.subscribe(s)
        repaired = repair_tool_pairing(list(history), strict=strict_tool_pairing)
        self.history: list[Message] = list(repaired)
        self.transcript: list[Message] = list(repaired)
        self._run: RunState | None = None
        # agent_id names this agent in traces and in the durable log (`log=`: a SQLite path or
        # connection that every finished attempt is appended to, as it finishes); opened last,
        # once every other argument has been checked
        self.agent_id = uuid.uuid4().hex[:8]
        self._durable = DurableLog(log, self.agent_id) if log is not None else None
        self._log.on_row = self._durable
        # record=: every HTTP exchange of the model chain is appended to a recording as it
        # happens (nbagent.recording), to replay it later with Agent("replay:<path>")
        self.recorder = _recorder(record)
        for p in self._providers:
            if isinstance(p, HTTPProvider) and self.recorder is not None:
                p.recorder = self.recorder
        # output=: converted once, and each model's mode and dialect checked, now
        if (
            isinstance(output_retries, bool)
            or not isinstance(output_retries, int)
            or output_retries < 0
        ):
            raise ConfigError(
                f"output_retries is how many reasks are allowed, a whole number such as 2, "
                f"not {output_retries!r}"
            )
        refuse_mode_without_output(output, output_mode)
        self.output_mode: OutputMode = output_mode
        self.output_retries = output_retries
        self._validators: list[OutputValidator] = []
        self.output: OutputSchema | None = None if output is None else OutputSchema.of(output)
        self._structured(self.output, list(self.toolbox.tools))

    # -- configuration ----------------------------------------------------------------------

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy. Setting it reseeds the jitter, as a new agent would."""
        return self._retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        if not isinstance(policy, RetryPolicy):
            raise ConfigError("retry= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=5)")
        self._retry = policy
        self._rng = policy.rng()

    @property
    def models(self) -> list[str]:
        """The model chain as strings ("demo", "anthropic:claude-…"), in order."""
        return [f"{p.name}:{p.model}" if p.name != "demo" else "demo" for p in self._providers]

    @property
    def providers(self) -> tuple[Provider, ...]:
        """The providers of the model chain, in order."""
        return tuple(self._providers)

    def pacer_for(self, provider: Provider) -> Pacer | None:
        """What paces this agent's requests to `provider`.

        Args:
            provider: A provider of the chain.

        Returns:
            The process-wide shared limiter for its endpoint and key (`limiter=True`), the
            one given, or None (`limiter=False`).
        """
        if self.limiter is False:
            return None
        if self.limiter is not True:
            return self.limiter
        return shared_limiter(provider, self.clock)

    def __repr__(self) -> str:
        models = ", ".join(self.models)
        return f"Agent(models=[{models}], messages={len(self.history)})"

    # -- structured answers -------------------------------------------------------------------

    def output_validator(self, fn: OutputValidator) -> OutputValidator:
        """Add a check of your own on every structured answer (use it as a decorator).

        Args:
            fn: Called with the validated answer; returns it (or a replacement; None keeps
                it), or raises `ValueError` / `AssertionError` with a sentence for the model,
                which makes the answer an `OutputInvalid`, reasked like a schema error.

        Returns:
            `fn`, unchanged.

        Raises:
            ConfigError: `fn` is not callable.
        """
        if not callable(fn):
            raise ConfigError(f"output_validator takes a function, not {fn!r}")
        self._validators.append(fn)
        return fn

    def _structured(self, schema: OutputSchema | None, tools: list[str]) -> StructuredOutput | None:
        """The run's structured answer for `schema` across the model chain (ConfigError now
        for a mode or a schema a model cannot take)."""
        if schema is None:
            return None
        return StructuredOutput(
            schema,
            mode=self.output_mode,
            validators=self._validators,
            retries=self.output_retries,
            providers=self._providers,
            tools=tools,
        )

    # -- what happened ----------------------------------------------------------------------

    @property
    def attempts(self) -> pd.DataFrame:
        """One row per attempt (request, compaction, tool call) across all runs."""
        return self._log.frame()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call `fn` with every event of this agent's runs, in order.

        Args:
            fn: Called with each event before the agent acts on it; if it raises, the run
                stops with a `HostError`.

        Returns:
            A function that unsubscribes it.
        """
        return self.events.subscribe(fn)

    # -- the conversation -------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the conversation (and its full transcript) atomically. No keys are stored.

        Args:
            path: The session file to write (JSON); `load` reads it back.

        Raises:
            HostError: The file cannot be written (no half-written file is left).
        """
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
        """Replace the conversation with a saved one.

        Tool calls without results are repaired (or, with `strict_tool_pairing`, refused).

        Args:
            path: A session file `save` wrote.

        Raises:
            SessionFileError: The file cannot be read or is not a session.
            ToolPairingError: `strict_tool_pairing` and a tool call has no result.
        """
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

    def _commit(self, history: list[Message], new: list[Message]) -> int:
        """A finished step: history (possibly compacted) plus the new messages; the transcript
        keeps everything. Returns the transcript index of the first new message."""
        self.history = [*history, *new]
        start = len(self.transcript)
        self.transcript = [*self.transcript, *new]
        return start

    # -- connections ------------------------------------------------------------------------

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

    # -- running ----------------------------------------------------------------------------

    async def run(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunResult:
        """Run the agent on `prompt` until the model ends its turn.

        In a notebook the live timeline widget is shown; its Stop button cancels this run.

        Args:
            prompt: The user's message: text, or a `Message.user(...)` (with images, say).
            show: Whether to show the live widget; None to show it where a notebook can.
            output: A schema for this run's answer, overriding the agent's `output=`.

        Returns:
            The final text, the messages added, usage, stop reason and turns
            (`result.output` holds a structured answer).

        Raises:
            NbAgentError: The typed error of a hard failure (`QuotaExceeded`, `AuthFailed`,
                `BudgetExceeded`, `OutputInvalid` once the reasks are spent, `OutputTruncated`,
                `ContentFiltered` for a refusal, ...); `agent.history` is then as it was before the
                failed step, so you can fix things and run again.
            Aborted: The run was stopped (Stop button, cancellation).
            ConfigError: The prompt is not text or a user message, or the agent is already
                running.
        """
        if not _showing(show):
            return await self._run_once(prompt, output)
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
            return await self._run_once(prompt, output)
        except asyncio.CancelledError:
            if not stopped:
                raise
            if task is not None and hasattr(task, "uncancel"):  # Python 3.11+
                task.uncancel()
            raise Aborted("the run was stopped with the Stop button") from None
        finally:
            detach()
            view.close()

    def start(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunHandle:
        """Run in a background task; the kernel stays responsive.

        Args:
            prompt: The user's message.
            show: Show the live widget (None: where a notebook can).
            output: A schema for this run's answer, overriding the agent's `output=`.

        Returns:
            An awaitable handle on the run (`cancel()` stops it).
        """
        loop = asyncio.get_running_loop()
        if not _showing(show):
            return RunHandle(loop.create_task(self._run_once(prompt, output)))
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
                return await self._run_once(prompt, output)
            finally:
                detach()
                view.close()

        task = loop.create_task(shown())
        task.add_done_callback(_mark_retrieved)
        tasks.append(task)
        return RunHandle(task)

    def run_sync(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunResult:
        """Run to completion from synchronous code: a script, or a notebook cell.

        Inside a running event loop (a notebook) the run happens on a worker thread with its own
        loop; nothing is patched. The connections it opened are closed when it ends.

        Args:
            prompt: The user's message.
            show: Whether to show the live widget; None to show it where a notebook can.
            output: A schema for this run's answer, overriding the agent's `output=`.

        Returns:
            The run's result.

        Raises:
            NbAgentError: The typed error of a hard failure, as for `run`.
            Aborted: An interrupt (KeyboardInterrupt) cancelled the run.
        """
        from ._blocking import run_blocking

        # The view is opened from this (the cell's) thread; the run goes to a worker thread.
        view = presenter().open() if _showing(show) else None
        detach = self.subscribe(view) if view is not None else None

        async def once() -> RunResult:
            try:
                return await self._run_once(prompt, output)
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

    async def _run_once(self, prompt: str | Message, output: Any = None) -> RunResult:
        """One run: check the prompt, set the run up from the current configuration, run it."""
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
        schema = self.output if output is None else OutputSchema.of(output)
        structured = None
        if schema is not None:  # each model's mode, its dialect, the output tool's name: now
            tools = [*self.toolbox.tools, *(t.name for t in await self.toolbox.specs())]
            structured = self._structured(schema, list(dict.fromkeys(tools)))
        now = self.clock.now()
        deadline = now + self.budget.max_wall_s if self.budget.max_wall_s else None
        state = RunState(uuid.uuid4().hex[:8], now, deadline)
        self._run = state
        self.toolbox.retry_unavailable()  # a server that could not start may be up by now
        try:
            emit = self._emitter(state)
            emit(RunStarted(prompt=user.text, model=self.models[0], agent_id=self.agent_id))
            return await self._make_run(state, emit, structured)(user)
        finally:
            self._run = None

    def _emitter(self, state: RunState) -> Callable[[Event], None]:
        """Deliver an event stamped with the run, its current turn and the clock's time."""
        bus, clock = self.events, self.clock

        def emit(event: Event) -> None:
            bus.emit(event, Stamp(state.run_id, clock.now(), state.turn))

        return emit

    def _make_run(
        self,
        state: RunState,
        emit: Callable[[Event], None],
        structured: StructuredOutput | None = None,
    ) -> Run:
        keeper = ContextKeeper(
            self.compaction,
            system=self.system,
            threshold=self.compaction_threshold,
            emit=emit,
        )
        settings = RequestSettings(
            system=self.system,
            max_tokens=self.max_tokens,
            options=self.options,
            cache=self.cache,
            context_window=self.context_window,
            max_compactions=self.max_compactions_per_step,
        )
        requester = Requester(
            providers=self._providers,
            models=self.models,
            state=state,
            settings=settings,
            policy=self.retry,
            rng=self._rng,
            clock=self.clock,
            emit=emit,
            keeper=keeper,
            toolbox=self.toolbox,
            pacer_for=self.pacer_for,
            output=structured,
        )
        return Run(
            state=state,
            requester=requester,
            toolbox=self.toolbox,
            budget=self.budget,
            clock=self.clock,
            emit=emit,
            history=list(self.history),
            commit=self._commit,
            max_tokens=self.max_tokens,
            max_length_resumes=self.max_length_resumes,
            output=structured,
        )


def _showing(show: bool | None) -> bool:
    """`show=None` means: show the run where a presenter can (in a notebook)."""
    return presenter().active() if show is None else show


def _mark_retrieved(task: asyncio.Task[RunResult]) -> None:
    """A background run's failure is shown in its view and raised by awaiting its handle; mark
    it retrieved so asyncio does not also log it as never retrieved."""
    if not task.cancelled():
        task.exception()
