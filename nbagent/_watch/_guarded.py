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
Non-idempotent requests (file uploads, batch creation: `RequestFacts.idempotent`) are retried
only when the failure says they never arrived (`_decision.may_have_reached`: a 429), as
`RetryPolicy.call(idempotent=False)` is.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar

from .._core._attempts import AttemptFailure, AttemptLoop, Sent
from .._core._clock import Clock
from .._core._pacing import Pacer
from .._core._retry import RetryPolicy
from .._loop._blocking import run_blocking
from ..errors import Aborted, RateLimited
from ._calls import CallLog, _Attempt, _Call
from ._reading import RequestFacts, transport_failure
from ._transport import Made, made_for

T = TypeVar("T")


class _IO(Protocol):
    """The steps of one exchange, for a synchronous or an asynchronous inner transport of
    `mod` (httpx or httpx2)."""

    mod: ModuleType

    async def send(self, request: Any) -> Any: ...

    async def read_all(self, response: Any) -> bytes: ...

    async def first(self, response: Any) -> tuple[bytes | None, Any]: ...

    async def discard(self, response: Any) -> None: ...


@dataclass(eq=False)
class GuardCore:
    """What every guarded transport of one client shares: the policy, the pacer for each
    request, the client's call log and its random source (one for the client, so concurrent
    calls draw different jitter)."""

    policy: RetryPolicy
    clock: Clock
    pacer_for: Callable[[RequestFacts, Any], Pacer | None]
    calls: CallLog | None = None  # set once the watcher has made it

    def __post_init__(self) -> None:
        self.rng = self.policy.rng()

    def open(self, request: Any) -> tuple[_Call, RequestFacts]:
        """The logical call for `request`, opened in the caller's own context (so the
        watcher tells an outer layer's retry from the caller's next call)."""
        assert self.calls is not None
        return self.calls.open_guarded(request, self.clock.now())

    async def send(self, request: Any, io: _IO, call: _Call, facts: RequestFacts) -> Any:
        """Send `request` until it succeeds or nbagent's decision is final (module docstring)."""
        calls = self.calls
        assert calls is not None
        loop = AttemptLoop(
            self.policy,
            clock=self.clock,
            emit=functools.partial(calls.guarded_event, call),
            model=facts.model,
            provider=facts.provider,
            rng=self.rng,
            pacer=self.pacer_for(facts, request),
            idempotent=facts.idempotent,
        )
        sending = _Sending(request, io, calls, call)
        try:
            return await loop.run(sending.attempt, describe=lambda r: Sent(headers=r.headers))
        except asyncio.CancelledError:
            calls.guard_gave_up(call, Aborted("the call was cancelled"))
            await sending.discard()
            raise
        except Exception as final:
            calls.guard_gave_up(call, final)
            answer = sending.last
            if isinstance(answer, BaseException):
                raise answer from None
            if answer is None:
                return _refused(io.mod, request, final)
            return answer


@dataclass(eq=False)
class _Sending:
    """The attempts of one guarded request: the last answer (a response) or the transport's
    exception (`last`), and a response read in part, held until the decision (`held`)."""

    request: Any
    io: _IO
    calls: CallLog
    call: _Call
    last: Any = None
    held: Any = None

    async def discard(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            await self.io.discard(held)

    async def attempt(self, n: int) -> Any:
        await self.discard()
        a = _Attempt(self.calls, self.call, self.call.facts, n, 0.0, guarded=True)
        token = self.calls.guarded.set(a)
        try:
            response = await self._step(self.io.send(self.request), a)
        finally:
            self.calls.guarded.reset(token)
        return await self._read(a, response)

    async def _read(self, a: _Attempt, response: Any) -> Any:
        io, status = self.io, response.status_code
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        whole = media == "application/json" or media.endswith("+json")  # not ndjson streams
        if status >= 400 or (200 <= status < 300 and whole):
            body = await self._step(io.read_all(response), a, after=True)
            response.stream = io.mod.ByteStream(body)
            self.last = response
            return _handed_or_failed(a, response)
        if 300 <= status < 400:
            a.handed = True
            return response
        first, rest = await self._step(io.first(response), a, after=True)
        early = a.reader.early_error() if a.reader is not None else None
        response.stream = _prepended(io.mod, first, rest, response.stream)
        if first is not None and early is None:
            a.handed = True
            return response
        self.last = response
        if early is not None:  # a stream that failed at its start: the SDK saw nothing
            self.held = response
            a.decided = True
            raise AttemptFailure(early)
        return _handed_or_failed(a, response)

    async def _step(self, step: Awaitable[T], a: _Attempt, after: bool = False) -> T:
        """One step of an attempt (sending it, reading its answer): what the step raises is
        kept as the last answer, and the attempt fails with what the watcher read of its end,
        else with the transport's error read as nbagent's."""
        try:
            return await step
        except Exception as exc:
            self.last = exc
            a.decided = True
            err = a.ending[0].error if a.ending is not None else None
            if err is None:
                err = transport_failure(exc, a.facts, after_response=after)
            raise AttemptFailure(err) from exc


def _handed_or_failed(a: _Attempt, response: Any) -> Any:
    """A reply read to its end: handed on when it succeeded, else a failure to decide on."""
    err = a.ending[0].error if a.ending is not None else None
    if err is None:
        a.handed = True
        return response
    a.decided = True
    raise AttemptFailure(err, ttft_s=a.ttft)


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
        try:
            return b"".join(response.stream)
        finally:
            await self.discard(response)

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
        try:
            return b"".join([chunk async for chunk in response.stream])
        finally:
            await self.discard(response)

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
