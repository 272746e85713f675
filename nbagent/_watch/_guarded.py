"""The guarded transport: the watcher's transport with nbagent's decision in it.

A guarded client's SDK makes one request per call (its own retries are off); this transport
sends it through the watching transport (`_transport`), so the watcher reads every attempt as
it reads an SDK's, and runs nbagent's one attempt loop (`_core._attempts.AttemptLoop`) around
it: the pacer (the shared `RateLimiter` and its retry budget) before each attempt, `decide` on
each failed one, the wait on the guard's clock. Each attempt is read far enough to know how it
went before the SDK sees any of it:

- an error status: the whole body (it is small), so `classify` reads it as the agent would;
- a JSON reply: the whole body, as httpx would read it at once for the SDK anyway;
- a stream: its first chunk; a break before it, or an error event in it, is retried. From then
  on the reply is the SDK's (the first chunk handed on ahead of the rest), and a break is the
  SDK's to see, as without nbagent: nothing half-replayed.

When the decision is final the SDK gets the last answer as it came (the same status, headers
and body), so it raises its own exception for it; a transport exception is raised again as it
was; a request the rate limiter would not send at all becomes a 429 the SDK reads as one.
Non-idempotent requests (file uploads, batch creation) are retried only when the failure says
they never arrived (`_decision.may_have_reached`: a 429), as `RetryPolicy.call(idempotent=False)`
is.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import ModuleType
from typing import Any, Protocol, TypeVar

from .._core._attempts import AttemptFailure, AttemptLoop, Sent
from .._core._clock import Clock
from .._core._pacing import Pacer
from .._core._retry import RetryPolicy
from .._loop._blocking import run_blocking
from ..errors import Aborted, RateLimited
from ..events import Event
from ._calls import CallLog, GuardSlot, _Call
from ._reading import RequestFacts, transport_failure
from ._transport import Made, made_for

__all__ = ["GuardCore", "guarded_transport", "non_idempotent"]

T = TypeVar("T")

_NON_IDEMPOTENT_TAILS = ("/files", "/uploads", "/batches", ":batchGenerateContent")


def non_idempotent(method: str, path: str) -> bool:
    """Whether sending this request twice could do its work twice: a file upload or a batch
    created again (a model request is answered again, which costs tokens, not correctness)."""
    if method.upper() != "POST":
        return False
    path = path.rstrip("/")
    return path.endswith(_NON_IDEMPOTENT_TAILS) or "/uploads/" in path or "/upload/" in path


class _IO(Protocol):
    """The steps of one exchange, for a synchronous or an asynchronous inner transport of
    `mod` (httpx or httpx2)."""

    mod: ModuleType

    async def send(self, request: Any) -> Any: ...

    async def read_all(self, response: Any) -> bytes: ...

    async def first(self, response: Any) -> tuple[bytes | None, Any]: ...

    async def discard(self, response: Any) -> None: ...


class GuardCore:
    """What every guarded transport of one client shares: the policy, the pacer for each
    request, the client's call log and its random source (one for the client, so concurrent
    calls draw different jitter)."""

    def __init__(
        self,
        policy: RetryPolicy,
        clock: Clock,
        pacer_for: Callable[[RequestFacts, Any], Pacer | None],
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.pacer_for = pacer_for
        self.rng = policy.rng()
        self.calls: CallLog | None = None  # set once the watcher has made it

    def open(self, request: Any) -> tuple[_Call, RequestFacts]:
        """The logical call for `request`, opened in the caller's own context (so the
        watcher tells an outer layer's retry from the caller's next call)."""
        assert self.calls is not None
        return self.calls.open_guarded(request, self.clock.now())

    async def send(self, request: Any, io: _IO, call: _Call, facts: RequestFacts) -> Any:
        """Send `request` until it succeeds or nbagent's decision is final (module docstring)."""
        calls = self.calls
        assert calls is not None
        idempotent = not non_idempotent(request.method, request.url.path)

        def emit(event: Event) -> None:
            calls.guarded_event(call, event)

        loop = AttemptLoop(
            self.policy,
            clock=self.clock,
            emit=emit,
            model=facts.model,
            provider=facts.provider,
            rng=self.rng,
            pacer=self.pacer_for(facts, request),
            idempotent=idempotent,
        )
        last: list[Any] = [None]  # the last answer (a response) or the transport's exception
        held: list[Any] = [None]  # a response read in part, held until the decision

        async def attempt(n: int) -> Any:
            if held[0] is not None:
                await io.discard(held[0])
                held[0] = None
            slot = GuardSlot(call, n)
            token = calls.guarded.set(slot)
            try:
                response = await _step(io.send(request), slot, facts, last)
            finally:
                calls.guarded.reset(token)
            return await self._read(slot, response, io, last, held, facts)

        try:
            return await loop.run(attempt, describe=lambda r: Sent(headers=r.headers))
        except asyncio.CancelledError:
            calls.guard_gave_up(call, Aborted("the call was cancelled"))
            if held[0] is not None:
                await io.discard(held[0])
            raise
        except Exception as final:
            calls.guard_gave_up(call, final)
            answer = last[0]
            if isinstance(answer, BaseException):
                raise answer from None
            if answer is None:
                return _refused(io.mod, request, final)
            return answer

    async def _read(
        self,
        slot: GuardSlot,
        response: Any,
        io: _IO,
        last: list[Any],
        held: list[Any],
        facts: RequestFacts,
    ) -> Any:
        status = response.status_code
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        whole = media == "application/json" or media.endswith("+json")  # not ndjson streams
        if status >= 400 or (200 <= status < 300 and whole):
            body = await _step(io.read_all(response), slot, facts, last, after=True)
            response.stream = io.mod.ByteStream(body)
            last[0] = response
            return self._handed_or_failed(slot, response)
        if 300 <= status < 400:
            slot.handed = True
            return response
        first, rest = await _step(io.first(response), slot, facts, last, after=True)
        a = slot.attempt
        early = a.reader.early_error() if a is not None and a.reader is not None else None
        response.stream = _prepended(io.mod, first, rest, response.stream)
        if first is not None and early is None:
            slot.handed = True
            return response
        last[0] = response
        if early is not None:  # a stream that failed at its start: the SDK saw nothing
            held[0] = response
            slot.decided = True
            raise AttemptFailure(early)
        return self._handed_or_failed(slot, response)

    @staticmethod
    def _handed_or_failed(slot: GuardSlot, response: Any) -> Any:
        """A reply read to its end: handed on when it succeeded, else a failure to decide on."""
        a = slot.attempt
        err = a.ending[0].error if a is not None and a.ending is not None else None
        if err is None:
            slot.handed = True
            return response
        slot.decided = True
        raise AttemptFailure(err, ttft_s=a.ttft if a is not None else None)


async def _step(
    step: Awaitable[T], slot: GuardSlot, facts: RequestFacts, last: list[Any], after: bool = False
) -> T:
    """One step of an attempt (sending it, reading its answer): what the step raises is kept
    as the last answer and becomes the attempt's failure."""
    try:
        return await step
    except Exception as exc:
        last[0] = exc
        raise AttemptFailure(_error_of(slot, exc, facts, after=after)) from exc


def _error_of(
    slot: GuardSlot, exc: Exception, facts: RequestFacts, *, after: bool = False
) -> BaseException:
    """The typed error for an attempt the transport or a read broke off."""
    slot.decided = True
    a = slot.attempt
    if a is not None and a.ending is not None and a.ending[0].error is not None:
        return a.ending[0].error
    return transport_failure(exc, facts, after_response=after)


def _refused(mod: ModuleType, request: Any, error: BaseException) -> Any:
    """The answer for a request the rate limiter would not send (nothing reached the server):
    a 429 with the wait, so the SDK raises its own rate-limit error."""
    wait = error.retry_after if isinstance(error, RateLimited) else None
    message = f"nbagent.guard did not send the request: {error}"
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": message,
        },
    }
    headers = {"content-type": "application/json", "x-should-retry": "false"}
    if wait is not None and math.isfinite(wait):
        headers["retry-after"] = str(max(0, math.ceil(wait)))
    return mod.Response(429, headers=headers, content=json.dumps(body).encode(), request=request)


# -- the streams and transports, made for httpx or httpx2 ----------------------------------


class _Ahead(Made):
    """A stream whose first chunk was read ahead: that chunk, then the rest of the same
    stream (`inner`, closed with it)."""

    def __init__(self, first: bytes | None, rest: Any, inner: Any) -> None:
        self._first, self._rest, self._inner = first, rest, inner


class _SyncAhead(_Ahead):
    BASE = "SyncByteStream"

    def __iter__(self) -> Iterator[bytes]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        yield from self._rest

    def close(self) -> None:
        close = getattr(self._rest, "close", None)
        if close is not None:
            close()
        self._inner.close()


class _AsyncAhead(_Ahead):
    BASE = "AsyncByteStream"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        async for chunk in self._rest:
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self._rest, "aclose", None)
        if close is not None:
            await close()
        await self._inner.aclose()


def _prepended(mod: ModuleType, first: bytes | None, rest: Any, inner: Any) -> Any:
    cls = _AsyncAhead if isinstance(inner, mod.AsyncByteStream) else _SyncAhead
    return made_for(mod, cls)(first, rest, inner)


class _Guarding(Made):
    """A watched transport with nbagent's decision around it (`nbagent._watch._guarded`),
    and the steps of one exchange through it (`_IO`)."""

    def __init__(self, mod: ModuleType, inner: Any, core: GuardCore) -> None:
        self.mod = mod
        self.inner = inner
        self.core = core


class _SyncGuarding(_Guarding):
    """A synchronous transport; its steps run inside the guard's coroutine (they block it)."""

    BASE = "BaseTransport"

    def handle_request(self, request: Any) -> Any:
        request.read()  # a body to send again: uploads are streams until read
        call, facts = self.core.open(request)
        try:
            return run_blocking(lambda: self.core.send(request, self, call, facts))
        except Aborted:
            raise KeyboardInterrupt from None  # what the SDK's own sleep would have raised

    def close(self) -> None:
        self.inner.close()

    async def send(self, request: Any) -> Any:
        return self.inner.handle_request(request)

    async def read_all(self, response: Any) -> bytes:
        stream = response.stream
        try:
            return b"".join(stream)
        finally:
            stream.close()

    async def first(self, response: Any) -> tuple[bytes | None, Any]:
        rest = iter(response.stream)
        for chunk in rest:
            if chunk:
                return chunk, rest
        return None, rest  # read to its end: nothing more comes

    async def discard(self, response: Any) -> None:
        response.stream.close()


class _AsyncGuarding(_Guarding):
    """An asynchronous transport."""

    BASE = "AsyncBaseTransport"

    async def handle_async_request(self, request: Any) -> Any:
        await request.aread()
        call, facts = self.core.open(request)
        return await self.core.send(request, self, call, facts)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def send(self, request: Any) -> Any:
        return await self.inner.handle_async_request(request)

    async def read_all(self, response: Any) -> bytes:
        stream = response.stream
        try:
            return b"".join([chunk async for chunk in stream])
        finally:
            await stream.aclose()

    async def first(self, response: Any) -> tuple[bytes | None, Any]:
        rest = response.stream.__aiter__()
        async for chunk in rest:
            if chunk:
                return chunk, rest
        return None, rest  # read to its end: nothing more comes

    async def discard(self, response: Any) -> None:
        await response.stream.aclose()


def guarded_transport(mod: ModuleType, watched: Any, asynchronous: bool, *, core: GuardCore) -> Any:
    """A transport of `mod` (httpx or httpx2) that sends through the watched transport
    `watched` under `core`'s policy (with `core` given, the `Outer` a watched client's
    transports are wrapped in)."""
    return made_for(mod, _AsyncGuarding if asynchronous else _SyncGuarding)(mod, watched, core)
