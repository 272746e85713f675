"""The transport a watched client sends through: every exchange passes its observers untouched.

A client's one seam to the network is its transport (`handle_request` /
`handle_async_request`). `watching_transport` builds one that holds the real transport and tells
each observer about the exchange as it happens: the request as sent, the response's status and
headers when they arrive, each body chunk with its time as the client reads it, and the end
(complete, broken, cancelled or closed early). Nothing is buffered or changed: the chunks the
client reads are the inner transport's own, handed on as they come.

Observers are per exchange: a factory (`ObserverFactory`) is called with each request and
returns an `Exchange` (or None to ignore it). The watcher is one factory; a recorder of
exchanges would be another, appended to `transport.observers`.

The official SDKs build on `httpx2` (a fork of httpx with the same transport API) or on httpx:
the classes are made for whichever module the client's classes come from.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Protocol


class StreamClosed(Exception):
    """The client closed the response before reading it to the end (it stopped early)."""


class Exchange(Protocol):
    """What an observer hears of one exchange, in this order: `response` once (unless the
    request failed before an answer), `chunk` per body chunk, `end` exactly once."""

    def response(self, status: int, headers: Any, t: float) -> None: ...

    def chunk(self, data: bytes, t: float) -> None: ...

    def end(self, error: BaseException | None, t: float) -> None:
        """`error` is None when the body was read to its end; `StreamClosed` when the client
        closed it early; else what the transport or the read raised (re-raised afterwards)."""
        ...


ObserverFactory = Callable[[Any, float], "Exchange | None"]
"""Called with each request (an httpx or httpx2 `Request`) and the time it is sent."""

_MADE: dict[tuple[str, type[Made]], type] = {}


@dataclass(slots=True)
class _Ends:
    """The observers of one exchange, told each step of it and ended exactly once."""

    exchanges: list[Exchange]
    now: Callable[[], float]
    done: bool = False

    def chunk(self, data: bytes) -> None:
        t = self.now()
        for e in self.exchanges:
            e.chunk(data, t)

    def answered(self, mod: ModuleType, response: Any) -> bool:
        """Tells the status and headers; True when the body was all there already (a mock
        transport's `content=`), told at once, whole, and the exchange ended."""
        t = self.now()
        for e in self.exchanges:
            e.response(response.status_code, response.headers, t)
        stream = response.stream
        if not isinstance(stream, mod.ByteStream):
            return False
        body = b"".join(stream)
        if body:
            for e in self.exchanges:
                e.chunk(body, t)
        self.end(None)
        return True

    def end(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        t = self.now()
        for e in self.exchanges:
            e.end(error, t)

    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        """Ends the exchange with what the block raises (and raises it on)."""
        try:
            yield
        except BaseException as exc:
            self.end(exc)
            raise

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around the client's read of the body: ended by the body's end, by what the read
        raised, or by the client leaving the read (it stopped early)."""
        try:
            yield
        except GeneratorExit:
            self.end(StreamClosed("the client stopped reading before the end"))
            raise
        except BaseException as exc:
            self.end(exc)
            raise
        self.end(None)

    def closed(self) -> None:
        """The client closed the response (before the end, unless the exchange has ended)."""
        self.end(StreamClosed("the client closed the response before the end"))


class Made:
    """A class made for httpx or httpx2 (`made_for`): `BASE` names the module's class it
    extends."""

    BASE: ClassVar[str]


class _Relay(Made):
    """A watched body: the inner stream's chunks, handed on as the client reads them."""

    def __init__(self, inner: Any, ends: _Ends) -> None:
        self._inner = inner
        self._ends = ends


class _SyncRelay(_Relay):
    BASE = "SyncByteStream"

    def __iter__(self) -> Iterator[bytes]:
        with self._ends.reading():
            for chunk in self._inner:
                self._ends.chunk(chunk)
                yield chunk

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._ends.closed()


class _AsyncRelay(_Relay):
    BASE = "AsyncByteStream"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with self._ends.reading():
            async for chunk in self._inner:
                self._ends.chunk(chunk)
                yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._ends.closed()


@dataclass(eq=False)
class _Watching(Made):
    """A watched transport: the real one, and the observers each exchange is told about."""

    mod: ModuleType
    inner: Any
    observers: list[ObserverFactory]
    _now: Callable[[], float]

    def _watch(self, request: Any) -> _Ends | None:
        """The observers of this request's exchange, or None when none watches it."""
        t = self._now()
        # a factory returns None for a request it leaves alone
        exchanges = [e for f in self.observers if (e := f(request, t)) is not None]
        return _Ends(exchanges, self._now) if exchanges else None

    def _watched(self, response: Any, ends: _Ends, relay: type[_Relay]) -> Any:
        """`response`, its body relayed to the observers (unless it was all there already)."""
        if not ends.answered(self.mod, response):
            response.stream = made_for(self.mod, relay)(response.stream, ends)
        return response


class _SyncWatching(_Watching):
    """The real transport, watched (see `nbagent._watch._transport`)."""

    BASE = "BaseTransport"

    def handle_request(self, request: Any) -> Any:
        ends = self._watch(request)
        if ends is None:
            return self.inner.handle_request(request)
        with ends.failing():
            response = self.inner.handle_request(request)
        return self._watched(response, ends, _SyncRelay)

    def close(self) -> None:
        self.inner.close()


class _AsyncWatching(_Watching):
    """The real transport, watched (see `nbagent._watch._transport`)."""

    BASE = "AsyncBaseTransport"

    async def handle_async_request(self, request: Any) -> Any:
        ends = self._watch(request)
        if ends is None:
            return await self.inner.handle_async_request(request)
        with ends.failing():
            response = await self.inner.handle_async_request(request)
        return self._watched(response, ends, _AsyncRelay)

    async def aclose(self) -> None:
        await self.inner.aclose()


def made_for(mod: ModuleType, mixin: type[Made]) -> type:
    """`mixin` as a subclass of `mod`'s own class `mixin.BASE` (httpx's or httpx2's
    `SyncByteStream`, `BaseTransport`, ...: a client checks its streams' classes), made once
    per module."""
    key = (mod.__name__, mixin)
    made = _MADE.get(key)
    if made is None:
        made = _MADE[key] = type(mixin.__name__, (mixin, getattr(mod, mixin.BASE)), {})
    return made


def watching_transport(
    mod: ModuleType,
    inner: Any,
    observers: list[ObserverFactory],
    *,
    asynchronous: bool,
    now: Callable[[], float] = time.monotonic,
) -> Any:
    """A transport of `mod` (httpx or httpx2) that sends through `inner` and tells `observers`."""
    cls = made_for(mod, _AsyncWatching if asynchronous else _SyncWatching)
    return cls(mod, inner, observers, now)
