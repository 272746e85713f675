"""nbagent's error taxonomy, and `classify`, the one place where failures become actions.

Every failure while the agent produces its next message gets exactly one of four actions
(`Action.RETRY`, `Action.COMPACT`, `Action.TOOL_RESULT`, `Action.FAIL`); a structured answer
that breaks its schema gets the third action's other form, `Action.REASK`: the errors go back to
the model, as a failed tool's do. The tree::

    NbAgentError
    ├── ConfigError                 missing key, malformed URL, unknown model, bad argument
    │   ├── RecordingFileError      a recording that cannot be read or written
    │   └── SchemaRejected          a provider's 400 refusing the output schema -> FAIL, never
    │                               retried (also a BadRequest: the provider's fields are kept)
    ├── SessionFileError            a session file that cannot be read back
    ├── ToolPairingError            a tool_use without its tool_result (strict loading)
    ├── HostError                   an event handler, widget or session save raised
    ├── Aborted                     cancellation: task.cancel(), Stop button, KeyboardInterrupt
    ├── BudgetExceeded              cost, tokens, wall clock or turns passed
    ├── LengthResumeExhausted       max_tokens with no content, again and again
    ├── ScriptExhausted             a ScriptedModel was asked for more than its script holds
    ├── OutputInvalid               a structured answer: not JSON, off the schema, a validator
    │                               said no (its `OutputIssue`s: path, message) -> REASK
    ├── OutputTruncated             a structured answer cut at max_tokens -> FAIL, never reasked
    └── ProviderError               anything a model provider answered (or failed to)
        ├── RateLimited             429                                  -> RETRY
        │   └── QuotaExceeded       quota, credits, spend cap, far reset  -> FAIL
        ├── Overloaded              529 / overloaded_error               -> RETRY
        ├── ServerError             500 502 503 504 408 409 425          -> RETRY
        ├── TransportError          connect, DNS, TLS, reset, timeouts   -> RETRY
        ├── StreamInterrupted       broken stream, bad SSE, error event  -> RETRY
        ├── EmptyResponse           200 with an empty message            -> RETRY (once)
        ├── ContextOverflow         400 "prompt is too long" & co.       -> COMPACT
        ├── AuthFailed              401, 403                             -> FAIL
        ├── ModelNotFound           404 model                            -> FAIL (or fallback)
        ├── BadRequest              other 4xx, a request-validation body -> FAIL
        ├── InvalidResponse         2xx that does not decode, too large  -> FAIL
        └── ContentFiltered         content_filter, refusal, safety      -> FAIL

Errors meant for the model (a failed tool) are not exceptions of this tree: they become a
`ToolResult(is_error=True)` that the model reads. `classify(error, phase="tool")` says so.
A refusal of a structured answer is a `ContentFiltered` like any other refusal: never reasked.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .recording import RecordingError as _RecordingError
from .recording import set_error_type as _set_recording_error_type

__all__ = [
    "Aborted",
    "Action",
    "AuthFailed",
    "BadRequest",
    "BudgetExceeded",
    "ConfigError",
    "ContentFiltered",
    "ContextOverflow",
    "EmptyResponse",
    "HostError",
    "InvalidResponse",
    "LengthResumeExhausted",
    "ModelNotFound",
    "NbAgentError",
    "OutputInvalid",
    "OutputIssue",
    "OutputTruncated",
    "Overloaded",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "SchemaRejected",
    "ScriptExhausted",
    "ServerError",
    "SessionFileError",
    "StreamInterrupted",
    "ToolPairingError",
    "TransportError",
    "classify",
    "describe",
]


class Action(str, enum.Enum):
    """What the agent does about a failure: the four actions, as `classify` returns them.

    The values are what the attempt log's `action` column holds (with "none" for a success and
    "fallback" for moving to the next model of a chain).

    Attributes:
        RETRY: Send the same request again after a wait (backoff, or the server's Retry-After).
        COMPACT: Shrink the conversation with the agent's compaction strategy, then retry once.
        TOOL_RESULT: A tool call failed: the model gets an error result to read and goes on.
        FAIL: Stop the run with the typed error; `agent.history` is as before the failed step.
        REASK: A structured answer broke its schema: the errors go back to the model, which
            answers again. It is the third action's other form: where `TOOL_RESULT` hands a
            failed tool call back to the model, `REASK` hands back a structured answer.
    """

    RETRY = "retry"
    COMPACT = "compact"
    TOOL_RESULT = "tool_result"
    REASK = "reask"
    FAIL = "fail"


class NbAgentError(Exception):
    """Base of every error nbagent raises on purpose."""


class ConfigError(NbAgentError):
    """Something the user configured cannot work; nothing was sent."""


class RecordingFileError(ConfigError, _RecordingError):
    """A recording (`nbagent.recording`) that cannot be read or written: missing, damaged, not
    a recording, or from a newer nbagent. It is the `RecordingError` of that module too."""


_set_recording_error_type(RecordingFileError)  # the recording module raises it from now on


class SessionFileError(NbAgentError):
    """A session file cannot be loaded; the message names the file and the problem.

    Args:
        path: The session file (any path-like; kept as a string).
        problem: What is wrong with it, as a phrase ("not JSON", "version 3 is newer ...").

    Attributes:
        path: The session file, as a string.
        problem: What is wrong with it.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"cannot load session file {self.path}: {problem}")


class ToolPairingError(NbAgentError):
    """A history holds a tool_use with no matching tool_result."""


class HostError(NbAgentError):
    """Code around the agent (an event handler, the widget, a session save) raised."""


class Aborted(NbAgentError):
    """The run was cancelled. Never retried."""


class ScriptExhausted(NbAgentError):
    """A ScriptedModel ran out of scripted replies."""


class LengthResumeExhausted(NbAgentError):
    """The model kept stopping at max_tokens without producing anything."""


class BudgetExceeded(NbAgentError):
    """A budget (cost, tokens, wall clock, turns) was passed; checked after each turn.

    A budget is a soft cap: the turn that passes it finishes, and this is raised before the
    next one starts, so `actual` may be a little over `limit_value`.

    Args:
        limit: Which `Budget` field was passed: "max_cost_usd", "max_total_tokens",
            "max_wall_s" or "max_turns".
        actual: What the run has used of it (US dollars, tokens, seconds or turns).
        limit_value: The limit that was set, in the same unit.

    Attributes:
        limit: Which `Budget` field was passed.
        actual: What the run used, in the limit's unit.
        limit_value: The limit that was set.
    """

    def __init__(self, limit: str, actual: float, limit_value: float) -> None:
        self.limit = limit
        self.actual = actual
        self.limit_value = limit_value
        super().__init__(f"budget exceeded: {limit} is {actual:g}, the limit is {limit_value:g}")


@dataclass(frozen=True)
class OutputIssue:
    """One thing wrong with a structured answer: where, and what.

    Attributes:
        path: Where, dotted ("items.2.price"); "" for the whole answer.
        message: What is wrong, in a sentence the model can act on.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class OutputInvalid(NbAgentError):
    """A structured answer (`output=`) that is not JSON, breaks the schema, or that a validator
    refused. Reasked while `output_retries` allows; past it, final.

    Args:
        errors: What is wrong, one `OutputIssue` per problem.
        raw: The answer's text as the model wrote it.
        usage: The tokens and cost of the attempt that produced it, when known.
        reasks: How many reasks came before this answer.
        answer: The assistant message that held the answer, when there was one.

    Attributes:
        errors: What is wrong, one `OutputIssue` per problem (field path and message).
        raw: The answer's text as the model wrote it (the output tool's arguments in tool mode).
        usage: The tokens and cost of the attempt that produced the answer, when known.
        reasks: How many reasks came before this answer (on the final error).
        answer: The assistant message that held the answer, when there was one.
    """

    def __init__(
        self,
        errors: Iterable[OutputIssue],
        raw: str = "",
        *,
        usage: Any = None,
        reasks: int = 0,
        answer: Any = None,
    ) -> None:
        self.errors: tuple[OutputIssue, ...] = tuple(errors) or (
            OutputIssue("", "the answer does not match the schema"),
        )
        self.raw = raw
        self.usage = usage
        self.reasks = reasks
        self.answer = answer  # the assistant Message that held the answer, when there was one
        super().__init__(self._text())

    @property
    def first(self) -> str:
        """The first error as "path: message", with how many more there are."""
        more = len(self.errors) - 1
        return str(self.errors[0]) + (f" (and {more} more)" if more > 0 else "")

    def _text(self) -> str:
        n = len(self.errors)
        head = "the structured answer does not match the schema"
        if self.reasks:
            head += f" after {self.reasks} reask{'s' if self.reasks != 1 else ''}"
        listed = "; ".join(str(e) for e in self.errors[:5])
        extra = f"; and {n - 5} more" if n > 5 else ""
        return f"{head} ({n} error{'s' if n != 1 else ''}): {listed}{extra}"

    def with_reasks(self, reasks: int) -> OutputInvalid:
        """The same failure, saying how many reasks came before it (the final error's text).

        Args:
            reasks: How many reasks came before this answer.

        Returns:
            A new `OutputInvalid` with every field kept.
        """
        return OutputInvalid(
            self.errors, self.raw, usage=self.usage, reasks=reasks, answer=self.answer
        )


class OutputTruncated(NbAgentError):
    """A structured answer cut off at `max_tokens` (the provider's `length` / `MAX_TOKENS`).

    Never reasked: the model did not disobey, it ran out of room; asking again would be cut
    at the same place. Raise `max_tokens` (or ask for less).

    Args:
        limit: The `max_tokens` the request carried.
        output_tokens: The tokens the answer used, or None when the provider did not say.
        raw: The partial answer's text.
        usage: The tokens and cost of that attempt, when known.

    Attributes:
        limit: The `max_tokens` the request carried.
        output_tokens: The tokens the answer used, as the provider counted them (None when it
            did not say).
        raw: The partial answer's text.
        usage: The tokens and cost of that attempt, when known.
    """

    def __init__(
        self,
        limit: int,
        output_tokens: int | None = None,
        raw: str = "",
        *,
        usage: Any = None,
    ) -> None:
        self.limit = limit
        self.output_tokens = output_tokens
        self.raw = raw
        self.usage = usage
        used = f"used {output_tokens:,} tokens" if output_tokens is not None else "was cut off"
        super().__init__(
            f"the structured answer was cut off at max_tokens={limit:,} (the answer {used}) "
            "before its JSON was complete; raise max_tokens (Agent(max_tokens=...)) or ask for "
            "a shorter answer"
        )


class ProviderError(NbAgentError):
    """A model provider failed to give the next message.

    Providers raise the subclass that says what went wrong (`RateLimited`, `ServerError`, ...);
    `classify` turns the class into an action. The message is one sentence naming the provider,
    the kind of failure, the HTTP status and the request id, so it can be shown as it is.

    Args:
        message: What the provider said, or what went wrong ("" for the kind's label alone).
        provider: The provider's name ("anthropic", "openai", "gemini", ...).
        status_code: The HTTP status, or None when no response arrived.
        code: The provider's error code or type ("rate_limit_error", "insufficient_quota").
        request_id: The provider's request id, to quote to its support.
        retry_after: The server's wish in seconds, already parsed from its headers or body
            (`retry-after`, `retry-after-ms`, Gemini's `retryDelay`, ...), or None.
        reason: Overrides the class's `reason` (e.g. "quota" for a quota read from a 429).
        should_retry: The server's `x-should-retry` verdict; when set it overrides the table.
        headers: The response headers that matter for retrying (never authorization headers).
        body: The decoded error body (a dict from JSON, or text), for reading details.

    Attributes:
        reason: A short machine word for the kind ("rate_limit", "quota", "provider_error").
        message: What the provider said.
        provider: The provider's name.
        status_code: The HTTP status, or None.
        code: The provider's error code or type, or None.
        request_id: The provider's request id, or None.
        retry_after: The server's wish in seconds, or None.
        should_retry: The server's `x-should-retry` verdict, or None.
        headers: The retry-relevant response headers.
        body: The decoded error body.
    """

    reason: str = "provider_error"

    def __init__(
        self,
        message: str = "",
        *,
        provider: str = "",
        status_code: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        reason: str | None = None,
        should_retry: bool | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> None:
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.code = code
        self.request_id = request_id
        self.retry_after = retry_after
        if reason is not None:
            self.reason = reason
        self.should_retry = should_retry
        self.headers: dict[str, str] = dict(headers or {})
        self.body = body
        super().__init__(self._text())

    def recast(self, kind: type[ProviderError], message: str) -> ProviderError:
        """The same answer, read as another kind of error: every field kept, the message replaced.

        A rate limit whose reset is further away than the policy's `max_retry_after` becomes a
        `QuotaExceeded` this way, keeping the status, request id and headers.

        Args:
            kind: The error class to read it as.
            message: The new message.

        Returns:
            A new error of class `kind`; this one is unchanged.
        """
        return kind(
            message,
            provider=self.provider,
            status_code=self.status_code,
            code=self.code,
            request_id=self.request_id,
            retry_after=self.retry_after,
            should_retry=self.should_retry,
            headers=self.headers,
            body=self.body,
        )

    @property
    def provider_label(self) -> str:
        """The provider's name as a sentence starts with it ("Anthropic", "OpenAI", ...)."""
        return _provider_label(self.provider)

    def _text(self) -> str:
        who = self.provider_label
        if self.message.startswith(who + " "):
            text = self.message  # already a whole sentence about this provider
        else:
            text = f"{who}: {describe(type(self).__name__)}"
            if self.status_code is not None:
                text += (
                    f" (HTTP {self.status_code}, {self.code})"
                    if self.code
                    else (f" (HTTP {self.status_code})")
                )
            if self.message:
                text += f": {self.message}"
        if self.request_id:
            text += f" [request id {self.request_id}]"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, status_code={self.status_code!r}, "
            f"code={self.code!r}, message={self.message!r}, request_id={self.request_id!r}, "
            f"retry_after={self.retry_after!r})"
        )


class RateLimited(ProviderError):
    """429: too many requests for now. Retried after the server's Retry-After (or backoff);
    a wait beyond `max_retry_after` makes it a `QuotaExceeded`.

    Attributes:
        reason: "rate_limit" (the attempt log and `RetryScheduled` show it).
    """

    reason = "rate_limit"


class QuotaExceeded(RateLimited):
    """A limit that waiting a little will not lift: quota, credits, spend cap, far reset.

    Never retried; its message says when the limit resets, when the provider told
    ("Anthropic rate limit reached. Resets in 1 h 45 min.").

    Attributes:
        reason: "quota".
    """

    reason = "quota"


class Overloaded(ProviderError):
    """529 or `overloaded_error`: the provider has no capacity right now. Retried."""


class ServerError(ProviderError):
    """500, 502, 503, 504, 408, 409, 425: a transient failure on the server's side. Retried."""


class TransportError(ProviderError):
    """No answer reached us: connect, DNS or TLS failure, reset, timeout, idle stream. Retried."""


class StreamInterrupted(ProviderError):
    """The stream broke off or went bad mid-answer; the partial message is discarded and the
    request retried."""


class EmptyResponse(ProviderError):
    """A 200 with nothing in it. Retried at most once, since a model that answers nothing twice
    will likely do it again."""


class ContextOverflow(ProviderError):
    """The prompt does not fit the model's window: the agent compacts it, then retries once.

    Args:
        message: What the provider said.
        tokens: The prompt's size in tokens, when the provider said.
        limit: The model's context window in tokens, when the provider said.
        **kwargs: The other fields of `ProviderError` (`provider`, `status_code`, ...).

    Attributes:
        tokens: The prompt's size in tokens, or None.
        limit: The model's context window in tokens, or None.
    """

    def __init__(
        self,
        message: str = "",
        *,
        tokens: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.tokens = tokens
        self.limit = limit
        super().__init__(message, **kwargs)


class AuthFailed(ProviderError):
    """401 or 403: the key is wrong or lacks access. Final: retrying cannot fix it."""


class ModelNotFound(ProviderError):
    """404 for the model: final, or the next model of a fallback chain."""


class BadRequest(ProviderError):
    """Another 4xx, or a body saying the request failed the server's validation (FastAPI's, with
    the fields in `body` it names; llama-cpp-python sends it with HTTP 500): the request itself
    is wrong, so sending it again would fail again."""


class InvalidResponse(ProviderError):
    """A 2xx body that does not decode or passes the size caps. Final: not retried."""


class ContentFiltered(ProviderError):
    """The provider's content filter or a refusal stopped the answer. Final: not retried (and
    a refused structured answer is not reasked: the message carries the refusal's text)."""


class SchemaRejected(BadRequest, ConfigError):
    """The provider refused the output schema (`output=`) with a 400: a configuration error,
    never retried whatever the server's `x-should-retry` says. Change the schema (the message
    names what the provider objected to) or pick another `output_mode`."""


_RETRYABLE: tuple[type[ProviderError], ...] = (
    RateLimited,
    Overloaded,
    ServerError,
    TransportError,
    StreamInterrupted,
    EmptyResponse,
)
_FINAL: tuple[type[BaseException], ...] = (
    QuotaExceeded,
    AuthFailed,
    ModelNotFound,
    BadRequest,
    InvalidResponse,
    ContentFiltered,
)


def classify(error: BaseException, *, phase: Literal["request", "tool"] = "request") -> Action:
    """The action for a failure: the table of [the four actions](../guide/actions.md), in code.

    This is the only place the table lives; the agent's attempt loop, summaries and
    `RetryPolicy.call` all ask it. A server's `x-should-retry` (on `ProviderError.should_retry`)
    overrides the table, except that a quota is never retried.

    Args:
        error: The failure: any exception, not only nbagent's.
        phase: "request" for a model request (the default); "tool" for a failure inside a tool
            call, which the model reads as an error result unless it must stop the run
            (`HostError`, `MemoryError`, cancellation).

    Returns:
        `Action.RETRY`, `Action.COMPACT`, `Action.TOOL_RESULT`, `Action.REASK` (an
        `OutputInvalid`; bounded by `output_retries` in `decide`, not here) or `Action.FAIL`. An
        error that is not a `ProviderError` (a `ConfigError`, a bug) fails in the request phase:
        no retry would fix it.
    """
    if isinstance(error, (Aborted, asyncio.CancelledError, KeyboardInterrupt)):
        return Action.FAIL
    if isinstance(error, OutputInvalid) and phase == "request":
        return Action.REASK
    if phase == "tool":
        if isinstance(error, (HostError, MemoryError, SystemExit, GeneratorExit)):
            return Action.FAIL
        if isinstance(error, Exception):
            return Action.TOOL_RESULT
        return Action.FAIL
    if not isinstance(error, ProviderError) or isinstance(error, ConfigError):
        # ConfigError (a schema the provider rejected included: it is wrong the next time
        # too, whatever x-should-retry says), HostError, BudgetExceeded, OutputTruncated,
        # bugs: nothing a retry would fix.
        return Action.FAIL
    if error.should_retry is True and not isinstance(error, QuotaExceeded):
        return Action.RETRY
    if error.should_retry is False:
        return Action.FAIL
    if isinstance(error, _FINAL):
        return Action.FAIL
    if isinstance(error, ContextOverflow):
        return Action.COMPACT
    if isinstance(error, _RETRYABLE):
        return Action.RETRY
    return Action.FAIL


_DESCRIPTIONS = {
    "RateLimited": "rate limit",
    "QuotaExceeded": "quota exhausted",
    "Overloaded": "provider overloaded",
    "ServerError": "provider unavailable",
    "TransportError": "connection failed",
    "StreamInterrupted": "stream interrupted",
    "EmptyResponse": "empty response",
    "ContextOverflow": "context window exceeded",
    "AuthFailed": "authentication failed",
    "ModelNotFound": "model not found",
    "BadRequest": "bad request",
    "InvalidResponse": "invalid response",
    "ContentFiltered": "content filtered",
    "ProviderError": "provider error",
    "Aborted": "cancelled",
    "HostError": "host error",
    "ConfigError": "configuration error",
    "BudgetExceeded": "budget exceeded",
    "LengthResumeExhausted": "output length exhausted",
    "OutputInvalid": "answer off its schema",
    "OutputTruncated": "structured answer cut off",
    "SchemaRejected": "output schema rejected",
}


def describe(error_kind: str) -> str:
    """A short human label for an error kind, for status lines.

    Args:
        error_kind: An error class's name, as the attempt log's `error_kind` column holds it
            ("ServerError").

    Returns:
        The label ("provider unavailable"), or `error_kind` itself for a kind it does not know.
    """
    return _DESCRIPTIONS.get(error_kind, error_kind)


def _provider_label(provider: str) -> str:
    labels = {
        "anthropic": "Anthropic",
        "openai": "OpenAI",
        "openrouter": "OpenRouter",
        "ollama": "Ollama",
        "gemini": "Gemini",
        "openai-responses": "OpenAI",
        "azure": "Azure OpenAI",
        "azure-responses": "Azure OpenAI",
        "demo": "Demo model",
        "classroom": "Classroom",
        "scripted": "Scripted model",
    }
    return labels.get(provider, provider or "provider")
