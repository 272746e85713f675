"""What a model provider answered (or failed to): `ProviderError` and its kinds."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ._base import Action, ConfigError, NbAgentError


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
    # `classify`'s action for this kind when the server's `x-should-retry` says nothing: each
    # kind below names its own (a kind that names none fails, as an unknown failure does).
    _action = Action.FAIL

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
        # every constructor field but the message and the kind's own reason
        kept = inspect.signature(ProviderError).parameters.keys() - {"message", "reason"}
        return kind(message, **{name: getattr(self, name) for name in kept})

    @property
    def provider_label(self) -> str:
        """The provider's name as a sentence starts with it ("Anthropic", "OpenAI", ...)."""
        return _LABELS.get(self.provider, self.provider or "provider")

    def _text(self) -> str:
        who = self.provider_label
        if self.message.startswith(who + " "):
            text = self.message  # already a whole sentence about this provider
        else:
            text = f"{who}: {describe(type(self).__name__)}"
            if self.status_code is not None:
                code = f", {self.code}" if self.code else ""
                text += f" (HTTP {self.status_code}{code})"
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
    _action = Action.RETRY


class QuotaExceeded(RateLimited):
    """A limit that waiting a little will not lift: quota, credits, spend cap, far reset.

    Never retried; its message says when the limit resets, when the provider told
    ("Anthropic rate limit reached. Resets in 1 h 45 min.").

    Attributes:
        reason: "quota".
    """

    reason = "quota"
    _action = Action.FAIL


class Overloaded(ProviderError):
    """529 or `overloaded_error`: the provider has no capacity right now. Retried."""

    _action = Action.RETRY


class ServerError(ProviderError):
    """500, 502, 503, 504, 408, 409, 425: a transient failure on the server's side. Retried."""

    _action = Action.RETRY


class TransportError(ProviderError):
    """No answer reached us: connect, DNS or TLS failure, reset, timeout, idle stream. Retried."""

    _action = Action.RETRY


class StreamInterrupted(ProviderError):
    """The stream broke off or went bad mid-answer; the partial message is discarded and the
    request retried."""

    _action = Action.RETRY


class EmptyResponse(ProviderError):
    """A 200 with nothing in it. Retried at most once, since a model that answers nothing twice
    will likely do it again."""

    _action = Action.RETRY


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

    _action = Action.COMPACT

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


_LABELS: dict[str, str] = {}


def set_provider_label(name: str, label: str) -> None:
    """How a sentence names provider `name` ("Anthropic"): the seam the providers' registry
    fills from its rows (`ProviderInfo.label`), so the names live in one place.

    Args:
        name: The provider's name, as errors carry it.
        label: Its name as a sentence starts with it.
    """
    _LABELS[name] = label
