"""How the watched SDK retries, so its next step can be announced before it takes it.

The watcher never decides: the SDK does. But a widget should say "the SDK is waiting about
1.0 s (server's Retry-After) before attempt 2" while the SDK sleeps, and the wait it actually
took is only known when the next attempt arrives. So the SDK's documented rule is written down
here (the Stainless-built SDKs, anthropic and openai: 408, 409, 429, 5xx and connection errors,
`x-should-retry` first, Retry-After when positive, else 0.5 s doubling to 8 s with up to 25 %
jitter off; google-genai: only with `retry_options`, tenacity's exponential jitter), and the
frame's `delay_s` is always the wait measured between the attempts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import StreamInterrupted, TransportError
from ..providers._server_wish import retry_after_of

Family = Literal["stainless", "genai", "none"]

GUARD = "nbagent.guard"  # the label of a guarded client's rule: nbagent retries, not the SDK

_STAINLESS_STATUSES = frozenset({408, 409, 429})
_GENAI_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class SdkRules:
    """The retry rule of one SDK client: `label` names it in sentences ("the Anthropic SDK")."""

    label: str
    family: Family
    max_retries: int
    initial_delay: float = 0.5
    max_delay: float = 8.0
    genai_statuses: frozenset[int] = _GENAI_STATUSES

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def will_retry(
        self, status: int | None, headers: Any, error: BaseException, attempt: int
    ) -> bool:
        """Whether the SDK sends attempt `attempt + 1` after this failure."""
        if attempt > self.max_retries or self.family == "none":
            return False
        if isinstance(error, StreamInterrupted) and status is not None and status < 300:
            return False  # the stream was handed over: the SDK raises, it does not resend
        if self.family == "genai":
            return isinstance(error, TransportError) or status in self.genai_statuses
        verdict = headers.get("x-should-retry") if headers is not None else None
        if verdict == "true":
            return True
        if verdict == "false":
            return False
        if status is None:
            return isinstance(error, TransportError)
        return status in _STAINLESS_STATUSES or status >= 500

    def wait(self, headers: Any, attempt: int) -> tuple[float, bool]:
        """About how long the SDK sleeps after failed attempt `attempt` (jitter aside), in
        seconds, and whether that is the server's wish."""
        nominal = min(self.initial_delay * 2.0 ** (attempt - 1), self.max_delay)
        if self.family == "stainless":
            wish = None if headers is None else retry_after_of(headers)
            if wish is not None and wish > 0:
                return wish, True
            return nominal * 0.875, False  # the middle of its 75-100 % jitter
        return nominal + 0.5, False  # tenacity adds up to `jitter` (1 s) on top


def rules_for(kind: str, client: Any) -> SdkRules:
    """The rule by which `client`, of `kind` (anthropic, openai, genai, httpx), retries when
    unguarded: its SDK's, with its settings."""
    if kind in ("anthropic", "openai"):
        label = "the Anthropic SDK" if kind == "anthropic" else "the OpenAI SDK"
        return SdkRules(label, "stainless", client.max_retries)
    if kind == "genai":
        retry_options = client._api_client._http_options.retry_options
        if retry_options is None:
            return SdkRules("the Google GenAI SDK", "none", 0)
        attempts = getattr(retry_options, "attempts", None) or 5
        statuses = getattr(retry_options, "http_status_codes", None) or _GENAI_STATUSES
        return SdkRules(
            "the Google GenAI SDK",
            "genai",
            max(0, attempts - 1),
            initial_delay=getattr(retry_options, "initial_delay", None) or 1.0,
            max_delay=getattr(retry_options, "max_delay", None) or 60.0,
            genai_statuses=frozenset(statuses),
        )
    return SdkRules("the client", "none", 0)
