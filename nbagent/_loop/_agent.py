"""The agent: its configuration, its conversation, and the ways to run it.

`Agent` holds what the user configured and the conversation (`history`, and the untouched
`transcript`), and delegates the work (`_running.py`, which also shows a run in a notebook
through the core's presenter seam): a run is a `Run` (`_run.py`: steps, tools, commits), whose
requests go through a `Requester` (`_request.py`: the model chain, the attempt loop, compaction
via a `ContextKeeper`), whose every attempt goes through the one `AttemptLoop` and the one
`decide` of the core. Everything that happens is an event on `agent.events` (log, widget).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, overload

from typing_extensions import TypeVar, Unpack

from .._core._budget import Budget
from .._core._clock import Clock, RealClock
from .._core._messages import Message, repair_tool_pairing
from .._core._pacing import Pacer
from .._core._retry import RetryPolicy
from ..errors import ConfigError
from ..events import EventBus, Subscriber
from ..providers import Provider
from ..providers._models import model_string
from ..recording import Recorder
from ._agent_options import AgentOptions
from ._args import (
    ModelSpec,
    check_arguments,
    check_output_retries,
    make_recorder,
    model_specs,
    resolve_model_spec,
)
from ._attempt_log import AttemptLog
from ._compaction import Compactor
from ._conversation import load_conversation, save_conversation
from ._durable_layout import LogTarget
from ._durable_log import DurableLog
from ._limiter import shared_limiter
from ._output_schema import OutputMode, OutputSchema, OutputValidator
from ._output_step import refuse_mode_without_output
from ._parts import RunState
from ._results import OutputT, RunHandle, RunResult
from ._running import (
    run_in_background,
    run_shown,
    run_synchronously,
    structured_output,
)
from ._summaries import DefaultCompaction
from ._toolbox import Toolbox
from ._tools import Tool, ToolSource

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")  # the type of a schema given to one run (`run(..., output=Pet)`)


class Agent(Generic[OutputT]):
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

    @overload
    def __init__(
        self: Agent[dict[str, Any]],
        model: ModelSpec | Sequence[ModelSpec] = "demo",
        *,
        output: dict[str, Any],
        **options: Unpack[AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self,
        model: ModelSpec | Sequence[ModelSpec] = "demo",
        *,
        output: type[OutputT] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...
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
        specs = model_specs(model)
        subscribers, history = check_arguments(locals())  # before anything else is assigned
        self.retry = RetryPolicy() if retry is None else retry  # (the setter checks it)
        self._providers = [resolve_model_spec(s, api_key=api_key, base_url=base_url) for s in specs]
        self.system = system
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
        # agent_id names this agent in traces and in the durable log (`log=`), opened last
        self.agent_id = uuid.uuid4().hex[:8]
        self._durable = DurableLog(log, self.agent_id) if log is not None else None
        self._log.on_row = self._durable
        self.recorder = make_recorder(record, self._providers)
        # output=: converted once, and each model's mode and dialect checked, now
        check_output_retries(output_retries)
        refuse_mode_without_output(output, output_mode)
        self.output_mode: OutputMode = output_mode
        self.output_retries = output_retries
        self._validators: list[OutputValidator] = []
        self.output: OutputSchema | None = None if output is None else OutputSchema.of(output)
        structured_output(self, self.output, list(self.toolbox.tools))

    # -- configuration ----------------------------------------------------------------------

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy. Setting it reseeds the jitter, as a new agent would."""
        return self._retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        if not isinstance(policy, RetryPolicy):
            raise ConfigError(
                f"retry= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=5), not {policy!r}"
            )
        self._retry = policy
        self._rng = policy.rng()

    @property
    def models(self) -> list[str]:
        """The model chain as strings ("demo", "anthropic:claude-…"), in order."""
        return [model_string(p) for p in self._providers]

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
        return shared_limiter(provider, self.clock) if self.limiter is True else self.limiter

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
        save_conversation(path, self.history, self.transcript, self.models)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace the conversation with a saved one.

        Tool calls without results are repaired (or, with `strict_tool_pairing`, refused).

        Args:
            path: A session file `save` wrote.

        Raises:
            SessionFileError: The file cannot be read or is not a session.
            ToolPairingError: `strict_tool_pairing` and a tool call has no result.
        """
        self.history, self.transcript = load_conversation(path, self.strict_tool_pairing)

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

    async def __aenter__(self) -> Agent[OutputT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- running (what a run does: _running.py) ----------------------------------------------

    @overload
    async def run(
        self, prompt: str | Message, *, show: bool | None = None, output: None = None
    ) -> RunResult[OutputT]: ...
    @overload
    async def run(
        self, prompt: str | Message, *, show: bool | None = None, output: dict[str, Any]
    ) -> RunResult[dict[str, Any]]: ...
    @overload
    async def run(
        self, prompt: str | Message, *, show: bool | None = None, output: type[T]
    ) -> RunResult[T]: ...
    async def run(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunResult[Any]:
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
        return await run_shown(self, prompt, show, output)

    @overload
    def start(
        self, prompt: str | Message, *, show: bool | None = None, output: None = None
    ) -> RunHandle[OutputT]: ...
    @overload
    def start(
        self, prompt: str | Message, *, show: bool | None = None, output: dict[str, Any]
    ) -> RunHandle[dict[str, Any]]: ...
    @overload
    def start(
        self, prompt: str | Message, *, show: bool | None = None, output: type[T]
    ) -> RunHandle[T]: ...
    def start(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunHandle[Any]:
        """Run in a background task; the kernel stays responsive.

        Args:
            prompt: The user's message.
            show: Show the live widget (None: where a notebook can).
            output: A schema for this run's answer, overriding the agent's `output=`.

        Returns:
            An awaitable handle on the run (`cancel()` stops it).
        """
        return run_in_background(self, prompt, show, output)

    @overload
    def run_sync(
        self, prompt: str | Message, *, show: bool | None = None, output: None = None
    ) -> RunResult[OutputT]: ...
    @overload
    def run_sync(
        self, prompt: str | Message, *, show: bool | None = None, output: dict[str, Any]
    ) -> RunResult[dict[str, Any]]: ...
    @overload
    def run_sync(
        self, prompt: str | Message, *, show: bool | None = None, output: type[T]
    ) -> RunResult[T]: ...
    def run_sync(
        self, prompt: str | Message, *, show: bool | None = None, output: Any = None
    ) -> RunResult[Any]:
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
        return run_synchronously(self, prompt, show, output)
