"""The events themselves: one frozen dataclass per kind (`nbagent.events` re-exports and
delivers them; its `__all__` is the one list of their names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._budget import Usage

AttemptPhase = Literal["request", "compaction"]
"""What an attempt asks the model for: the next message, or a summary for compaction."""

FailureAction = Literal["retry", "compact", "reask", "fallback", "fail"]
"""What the agent decided about a failed attempt (the attempt log's `action` column)."""

CompactionReason = Literal["overflow", "proactive"]
"""After the provider said the prompt is too long, or before sending, from the estimate."""

BudgetLimit = Literal["max_cost_usd", "max_total_tokens", "max_wall_s", "max_turns"]
"""The `Budget` field a `BudgetWarning` (or `BudgetExceeded`) is about."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event carries; stamped by the agent when it emits the event.

    Attributes:
        run_id: The run it belongs to (`RunResult.run_id`; the attempt log's `run_id`).
        time: When it happened: seconds on the agent's clock (`clock.now()`).
        turn: The step of the run: 0 before the first request, then 1, 2, ... (one per model
            reply).
    """

    run_id: str = ""
    time: float = 0.0
    turn: int = 0


@dataclass(frozen=True)
class Stamp:
    """The shared fields of events emitted during one run, at one moment.

    Attributes:
        run_id: The run's id.
        time: Seconds on the agent's clock.
        turn: The run's current step.
    """

    run_id: str
    time: float
    turn: int


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    """A run began: the prompt as given and the model it goes to first.

    Attributes:
        prompt: The prompt's text.
        model: The first model of the chain.
        agent_id: The agent's id (`agent.agent_id`), which tells agents apart in a batch, a
            trace or the durable log.
        call: For a watched client's logical call, the intended call it belongs to: the run id
            of the first logical call that an outer layer's retries sent again, or its own. An
            agent's run leaves it empty.
        layer_attempt: For a watched client's logical call, which try of the outer layer it is
            (1 for the first); 1 for an agent's run.
    """

    prompt: str
    model: str
    agent_id: str = ""
    call: str = ""
    layer_attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class AttemptEvent(Event):
    """What the events of one attempt share (`AttemptStarted`, then `AttemptSucceeded` or
    `AttemptFailed`): which attempt of which request it is, and the model it went to.
    `isinstance(event, AttemptEvent)` picks them out of the stream. (`RetryScheduled`, the wait
    between two attempts, carries these fields too, in its own order.)

    Attributes:
        phase: What the attempt asked for: "request" (the next message) or "compaction" (a
            summary).
        attempt: Which attempt of this request it is, counting from 1.
        max_attempts: The policy's `max_attempts` (the first attempt included).
        model: The model it went to, as `agent.models` names it ("anthropic:claude-…").
        batch_id: For an item of a provider batch (`map(..., backend="provider")`), the
            provider's id of the batch its submission went in ("" otherwise, and for an item
            its batch never took).
        submission: For such an item, which submission of it this is (1 for the first send,
            2 for its first resubmission, ...); 0 otherwise.
    """

    phase: AttemptPhase
    attempt: int
    max_attempts: int
    model: str
    batch_id: str = ""
    submission: int = 0


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(AttemptEvent):
    """One attempt (a request or a compaction request) is about to be sent; its fields are
    `AttemptEvent`'s."""


@dataclass(frozen=True, kw_only=True)
class TextDelta(Event):
    """A piece of the answer as it streams. Only committed when the attempt succeeds; a broken
    stream's deltas are discarded.

    Attributes:
        text: The new text (append it to what came before in this attempt).
        attempt: The attempt it belongs to: when a new attempt starts, the text starts over.
    """

    text: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(Event):
    """A piece of the model's reasoning as it streams (discarded with the attempt if it fails).

    Attributes:
        text: The new reasoning text.
        attempt: The attempt it belongs to.
    """

    text: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ToolCallDelta(Event):
    """A tool call's arguments as they stream, by call `index`.

    Attributes:
        index: The call's position in the reply (a reply can hold several calls).
        call_id: The provider's id of the call ("" until the provider has sent it).
        name: The tool's name ("" until sent).
        arguments: The new piece of the arguments' JSON text (not yet parseable on its own).
        attempt: The attempt it belongs to.
    """

    index: int
    call_id: str
    name: str
    arguments: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class AttemptSucceeded(AttemptEvent):
    """An attempt got its answer: the row of the attempt log with outcome `ok` (which attempt,
    and its model: `AttemptEvent`'s fields).

    Attributes:
        request_id: The provider's request id, when it sent one.
        response_id: The provider's id of the answer (a message or response id), when sent.
        ttft_s: Seconds from sending to the first streamed piece, or None.
        input_tokens: Prompt tokens the provider counted, or None when it did not say.
        output_tokens: Answer tokens the provider counted, or None.
        cache_read_tokens: Prompt tokens read from the provider's prompt cache, or None.
        cache_write_tokens: Prompt tokens written to the cache, or None.
        cost_usd: What the attempt cost in US dollars (from the model's prices), or None
            when the price is unknown.
        stop_reason: Why the model stopped ("end_turn", "tool_use", "max_tokens", ...).
        message: What reading the reply had to assume, shown in the attempt log ("no
            finish_reason; read as stop"), or "".
        status_code: The HTTP status the answer came with (200), or None when it did not come
            over HTTP (a `ScriptedModel`).
    """

    request_id: str | None = None
    response_id: str | None = None
    ttft_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None
    message: str = ""  # what the reading of the reply had to assume ("no finish_reason: stop")
    status_code: int | None = None


@dataclass(frozen=True, kw_only=True)
class AttemptFailed(AttemptEvent):
    """An attempt ended in error (which attempt, and its model: `AttemptEvent`'s fields).
    `action` is what the agent decided; a `RetryScheduled` follows when it is "retry".

    An answer that arrived and was then refused (a structured answer off its schema, or cut at
    max_tokens) cost tokens: its usage is in the token fields, and `output_errors` lists what
    was wrong with it ("path: message"), for the attempt's details.

    Attributes:
        error: The error's class name ("RateLimited"); never the exception itself, so no
            secret can ride along.
        message: The error's message.
        action: What the agent does about it: "retry", "compact", "reask", "fallback" or
            "fail".
        status_code: The HTTP status, or None when no response arrived.
        request_id: The provider's request id, or None.
        retry_after_s: The server's wish in seconds, or None.
        cancelled: True when the attempt was cancelled (Stop button, `task.cancel()`).
        ttft_s: Seconds to the first streamed piece, when something streamed before it broke.
        discarded_text: The answer text streamed before the failure, thrown away (never
            committed).
        discarded_thinking: The reasoning streamed before the failure, thrown away.
        input_tokens: Prompt tokens of an answer that arrived and was refused, or None.
        output_tokens: Its answer tokens, or None.
        cache_read_tokens: Its prompt tokens read from the provider's cache, or None.
        cache_write_tokens: Its prompt tokens written to the cache, or None.
        cost_usd: What it cost in US dollars, or None (no answer, or an unknown price).
        output_errors: What was wrong with a refused structured answer, one "path: message"
            each (empty for other failures).
    """

    error: str
    message: str
    action: FailureAction
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None
    cancelled: bool = False
    ttft_s: float | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    output_errors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RetryScheduled(Event):
    """The wait before the next attempt, announced before it starts (a widget can count down).

    Attributes:
        phase: What the attempt asked for: "request" (the next message) or "compaction" (a
            summary).
        attempt: The attempt that failed, counting from 1.
        next_attempt: The attempt that follows the wait.
        max_attempts: The policy's `max_attempts` (the first attempt included).
        model: The model it went to, as `agent.models` names it ("anthropic:claude-…").
        delay_s: The wait taken, in seconds: the server's wish when it gave one, else the
            backoff with jitter.
        policy_delay_s: What the backoff alone said, in seconds.
        error: The failed attempt's error class name.
        message: The failed attempt's error message.
        status_code: The failed attempt's HTTP status, or None.
        retry_after_s: The server's wish in seconds, or None.
        request_id: The failed attempt's request id, or None.
        discarded_text: The answer text the failed attempt streamed, thrown away.
        discarded_thinking: The reasoning the failed attempt streamed, thrown away.
    """

    phase: AttemptPhase
    attempt: int
    next_attempt: int
    max_attempts: int
    model: str
    delay_s: float
    policy_delay_s: float
    error: str
    message: str
    status_code: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""


@dataclass(frozen=True, kw_only=True)
class SDKRetryScheduled(RetryScheduled):
    """A watched SDK client (`nbagent.watch`), not nbagent, waits before its next attempt.

    `delay_s` is about what the SDK's own rule gives (announced as the wait starts); the attempt
    log of the watcher records the wait the SDK took.

    Attributes:
        sdk: Which SDK waits ("the Anthropic SDK").
    """

    sdk: str


@dataclass(frozen=True, kw_only=True)
class PacedWait(Event):
    """The shared rate limiter holds a request back before it is sent.

    Attributes:
        delay_s: How long it holds the request, in seconds.
        model: The model it went to, as `agent.models` names it ("anthropic:claude-…").
        reason: Why, as a sentence ("held back while another request probes the rate limit").
    """

    delay_s: float
    model: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    """A run ended, well or not; the last event of every run.

    Attributes:
        end_reason: The model's stop reason when the run ended well ("end_turn",
            "max_tokens", "stop_sequence", ...), else "error", "cancelled" or "budget".
        usage: Tokens, cost and requests of the whole run.
        model: The model that answered last.
        error: The error class name when it failed, else "".
        message: The error's message when it failed, else "".
        final_text: The last assistant message's text when it ended well.
    """

    end_reason: str
    usage: Usage
    model: str
    error: str = ""
    message: str = ""
    final_text: str = ""
