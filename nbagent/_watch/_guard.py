"""`nbagent.guard`: one layer owns the retries, and it is nbagent's.

A guarded client is a watched copy (`Watcher`) whose SDK no longer retries (`max_retries=0`,
google-genai's `retry_options` off) and whose transport decides instead (`_guarded`), with the
agents' own parts: `classify` and `decide` under the given `RetryPolicy`, and the same pacer an
`Agent` of that provider, endpoint and key would use (the process-wide `RateLimiter` and its
retry budget), so guarded clients, agents and batches in one kernel pace as one client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._core._clock import Clock, RealClock
from .._core._pacing import Pacer, PaceRequest
from .._core._retry import RetryPolicy
from .._loop._durable_layout import LogTarget
from .._loop._limiter import shared_limiter
from .._loop._retry_budget import RetryBudget
from ..errors import ConfigError, TransportError
from ..providers._client import key_fingerprint
from ..recording import Recorder
from ._clients import base_url_of, kind_of
from ._guarded import GuardCore
from ._reading import RequestFacts, request_secrets
from ._watcher import Watcher

C = TypeVar("C")

# The provider an agent names for requests a path does not tell (a file upload, a batch).
_KIND_PROVIDER = {"anthropic": "anthropic", "openai": "openai", "genai": "gemini", "httpx": "http"}


@dataclass(frozen=True)
class _Endpoint:
    """What the shared limiters are keyed by, as a provider's `rate_key` says it."""

    rate_key: tuple[str, str, str]


@dataclass(frozen=True)
class _OwnBudget:
    """A pacer whose retries draw from the guard's own `budget=` (the limiter, if any, still
    paces the requests)."""

    pacer: Pacer | None
    budget: RetryBudget

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        if self.pacer is not None:
            await self.pacer.acquire(clock, ask)

    def succeeded(self, now: float, headers: Mapping[str, str]) -> None:
        if self.pacer is not None:
            self.pacer.succeeded(now, headers)
        self.budget.refill()

    def failed(self, now: float, error: BaseException) -> None:
        if self.pacer is not None:
            self.pacer.failed(now, error)

    def allow_retry(self, error: BaseException) -> bool:
        return self.budget.withdraw(timeout=isinstance(error, TransportError))


def _pacers(
    kind: str, base_url: str, limiter: Pacer | bool, budget: RetryBudget | None, clock: Clock
) -> Any:
    def pacer_for(facts: RequestFacts, request: Any) -> Pacer | None:
        pacer: Pacer | None = None
        if limiter is True:
            provider = facts.provider if facts.provider != "http" else _KIND_PROVIDER[kind]
            url = request.url
            base = base_url or f"{url.scheme}://{url.netloc.decode()}"
            key = key_fingerprint(next(iter(request_secrets(request)), None))
            pacer = shared_limiter(_Endpoint((provider, base, key)), clock)
        elif limiter is not False:
            pacer = limiter
        return pacer if budget is None else _OwnBudget(pacer, budget)

    return pacer_for


def guard(
    client: C,
    *,
    retry: RetryPolicy | None = None,
    limiter: Pacer | bool = True,
    budget: RetryBudget | None = None,
    log: LogTarget | None = None,
    show: bool = False,
    record: str | Path | Recorder | None = None,
    clock: Clock | None = None,
) -> C:
    """A copy of `client` whose retries are nbagent's: one layer, paced, watched.

    The copy's SDK retries nothing itself (`max_retries=0`; google-genai's `retry_options`
    off); its transport applies `classify` and `decide` to every answer under `retry` (the
    server's Retry-After and `retry-after-ms`, the provider reset headers, `x-should-retry`,
    full jitter by default), and a rate limit whose reset is past `retry.max_retry_after`
    fails at once. File uploads and batch creation are retried only after a 429 (as
    `RetryPolicy.call(idempotent=False)`). A stream is retried only while none of it has
    reached the SDK. What the caller gets is what the unguarded SDK gives: the same response
    objects, and, when nbagent gives up, the SDK's own exception for the last answer.

    Everything the copy does is watched: `nbagent.watching(copy)` gives its `Watcher`
    (`attempts`, whose `action` is nbagent's decision, `amplification`, the live timeline),
    and `log=`, `show=` and `record=` are those of `nbagent.watch`.

    Args:
        client: An `anthropic.Anthropic` / `AsyncAnthropic`, an `openai.OpenAI` /
            `AsyncOpenAI` / `AzureOpenAI` / `AsyncAzureOpenAI`, a `google.genai.Client`, or an
            httpx (or httpx2) `Client` / `AsyncClient`. It is not changed.
        retry: The retry policy; `RetryPolicy()` when not given.
        limiter: `True` (the default): the process-wide `RateLimiter` that agents of the same
            provider, endpoint and key share, with its retry budget; `False`: no pacing and no
            retry budget; or a `Pacer` (a `RateLimiter` of your own).
        budget: A `RetryBudget` for this client's retries instead of the limiter's.
        log: A durable attempt log, as `Agent(log=...)` takes.
        show: Show the live timeline under the current cell at once.
        record: A path or a `nbagent.recording.Recorder`: every HTTP exchange is written to
            a recording that `MockServer(replay=...)` serves again.
        clock: The clock the guard waits on and the limiters are shared by (a
            `VirtualClock` in tests and simulations); the real clock by default.

    Returns:
        The guarded copy, of the same class as `client`.

    Raises:
        ConfigError: For a client of another kind, or a `retry`, `limiter` or `budget` of the
            wrong type.
    """
    kind = kind_of(client)
    policy = RetryPolicy() if retry is None else retry
    if not isinstance(policy, RetryPolicy):
        raise ConfigError("retry= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=5)")
    if not isinstance(limiter, (bool, Pacer)):
        raise ConfigError("limiter= takes True (shared), False (off) or a RateLimiter")
    if budget is not None and not isinstance(budget, RetryBudget):
        raise ConfigError("budget= takes a RetryBudget(...) or None")
    clock = clock or RealClock()
    core = GuardCore(policy, clock, _pacers(kind, base_url_of(client), limiter, budget, clock))
    w = Watcher(client, log=log, clock=clock, show=show, record=record, guard=core)
    if show:
        w.show()
    guarded: C = w.client
    return guarded
