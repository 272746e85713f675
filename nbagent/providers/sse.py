"""Shared HTTP plumbing for the streaming providers: connect, caps, idle timeout, error mapping.

`HTTPProvider` holds what both wire formats share: the key (never shown), the base URL, an
`httpx.AsyncClient` (given, or created per event loop and closed by `aclose`), the timeouts and
the size caps. `HTTPProvider._open(url, body, headers)` posts the request through
`httpx_sse.aconnect_sse` and yields an `EventStream` whose `events()` are `httpx_sse` events.

Failures come out typed:

* connect, DNS, TLS, reset before the response, no response within the idle timeout
  -> `TransportError`;
* a non-2xx answer -> `errors_http.error_from_response` (the body is read in bounded chunks);
* a body over `max_body_bytes`, one SSE event over `max_event_bytes`, a 2xx that is neither an
  event stream nor JSON -> `InvalidResponse`;
* no bytes for `idle_timeout` seconds mid-stream -> `TransportError` naming the seconds;
* the connection dying after the 200 -> `StreamInterrupted`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import json
import math
import re
import ssl
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from ..errors import (
    ConfigError,
    InvalidResponse,
    NbAgentError,
    ProviderError,
    StreamInterrupted,
    TransportError,
)
from .base import ModelRequest, StreamPart, TextPart, ThinkingPart, ToolCallPart
from .errors_http import error_from_response, redact, request_id_from

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "EventStream",
    "HTTPProvider",
    "Limits",
    "check_base_url",
    "read_body",
    "transport_error",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024

USER_AGENT = "nbagent/0.1"

# A blank line (the end of an SSE event) is two line terminators in a row.
_BOUNDARY = re.compile(rb"\n\n|\n\r|\r\r")


@dataclass(frozen=True)
class Limits:
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES

    def httpx_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout,
            read=self.idle_timeout,
            write=self.idle_timeout,
            pool=self.connect_timeout,
        )


def _seconds(value: float) -> str:
    return f"{value:g} s"


def check_base_url(base_url: str, *, what: str = "base_url") -> str:
    """`base_url` without a trailing slash; `ConfigError` unless it is http(s) with a host."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ConfigError(
            f"{what} is empty: pass an http(s) URL such as 'http://localhost:8080/v1'."
        )
    url = base_url.strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError:
        host = None
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise ConfigError(
            f"{what} {url!r} is not an http(s) URL with a host: "
            "write it like 'https://api.example.com/v1' or 'http://localhost:11434/v1'."
        )
    return url.rstrip("/")


def transport_error(
    exc: BaseException,
    *,
    provider: str,
    limits: Limits,
    after_response: bool,
    secrets: tuple[str, ...] = (),
    request_id: str | None = None,
) -> NbAgentError:
    """A typed error for an httpx / socket failure.

    Before the response: `TransportError`. After the 200 (mid-stream): `StreamInterrupted`,
    except an idle stream, which is a `TransportError` naming the idle seconds.
    """
    detail = redact(f"{type(exc).__name__}: {exc}".rstrip(": "), secrets)
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return ConfigError(f"the request URL cannot be used ({detail}); check base_url.")
    if isinstance(exc, httpx.ConnectTimeout):
        msg = f"could not connect within {_seconds(limits.connect_timeout)} ({detail})"
        return TransportError(msg, provider=provider, request_id=request_id)
    if isinstance(exc, httpx.PoolTimeout):
        msg = f"no free connection within {_seconds(limits.connect_timeout)} ({detail})"
        return TransportError(msg, provider=provider, request_id=request_id)
    if isinstance(exc, (httpx.ReadTimeout, TimeoutError)):
        if after_response:
            msg = f"stream idle: no data for {_seconds(limits.idle_timeout)} (idle timeout)"
        else:
            msg = f"no response within {_seconds(limits.idle_timeout)} (idle timeout)"
        return TransportError(msg, provider=provider, request_id=request_id)
    if isinstance(exc, httpx.DecodingError):
        return InvalidResponse(
            f"the response body does not decode ({detail})",
            provider=provider,
            request_id=request_id,
        )
    if after_response:
        return StreamInterrupted(
            f"connection lost mid-stream ({detail})", provider=provider, request_id=request_id
        )
    return TransportError(detail, provider=provider, request_id=request_id)


async def _chunks(response: httpx.Response, idle_timeout: float) -> AsyncGenerator[bytes, None]:
    """The response's decoded bytes; `TimeoutError` when none arrive for `idle_timeout` s."""
    it = response.aiter_bytes().__aiter__()
    try:
        while True:
            try:
                with anyio.fail_after(idle_timeout):
                    chunk = await it.__anext__()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def read_body(
    response: httpx.Response,
    *,
    provider: str,
    limits: Limits,
    secrets: tuple[str, ...] = (),
) -> bytes:
    """The whole body, read in bounded chunks; `InvalidResponse` past `max_body_bytes`."""
    cap = limits.max_body_bytes
    declared = response.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > cap:
        what = f"the response body ({int(declared)} bytes)"
        raise _too_large(provider, response, what, cap, secrets)
    buf = bytearray()
    try:
        async with contextlib.aclosing(_chunks(response, limits.idle_timeout)) as chunks:
            async for chunk in chunks:
                buf += chunk
                if len(buf) > cap:
                    raise _too_large(provider, response, "the response body", cap, secrets)
    except ProviderError:
        raise
    except (httpx.HTTPError, OSError, TimeoutError) as exc:
        err = transport_error(
            exc, provider=provider, limits=limits, after_response=False, secrets=secrets
        )
        raise err from None
    return bytes(buf)


def _too_large(
    provider: str, response: httpx.Response, what: str, cap: int, secrets: tuple[str, ...]
) -> InvalidResponse:
    return InvalidResponse(
        f"{what} is larger than the {cap}-byte cap (max_body_bytes)",
        provider=provider,
        status_code=response.status_code,
        request_id=request_id_from(response.headers, secrets=secrets),
    )


class _BoundedStream(httpx.AsyncByteStream):
    """The upstream bytes with the idle timeout and the per-event size cap applied.

    It ends the stream with a blank line when the server did not, so that a last event the server
    sent whole but without its final newline (as in the Anthropic SDK's recorded fixtures) is
    dispatched.
    """

    def __init__(self, stream: EventStream) -> None:
        self._s = stream

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        s = self._s
        cap = s.limits.max_event_bytes
        pending = 0  # bytes of the event being received so far
        prev = b""
        try:
            async with contextlib.aclosing(_chunks(s.response, s.limits.idle_timeout)) as chunks:
                async for chunk in chunks:
                    if not chunk:
                        continue
                    data = prev + chunk
                    start = len(prev)
                    first = True
                    for m in _BOUNDARY.finditer(data):
                        seg = max(0, m.start() - start)
                        if (pending + seg if first else seg) > cap:
                            raise s.event_too_large()
                        first = False
                        start = m.end()
                    seg = max(0, len(data) - start)
                    pending = pending + seg if first else seg
                    if pending > cap:
                        raise s.event_too_large()
                    prev = chunk[-1:]
                    yield chunk
        except ProviderError:
            raise
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            err = transport_error(
                exc,
                provider=s.provider,
                limits=s.limits,
                after_response=True,
                secrets=s.secrets,
                request_id=s.request_id,
            )
            raise err from None
        if pending:
            yield b"\n\n"

    async def aclose(self) -> None:
        return None


class EventStream:
    """A 2xx event-stream response: `events()` yields its SSE events, bounded and timed."""

    def __init__(
        self,
        response: httpx.Response,
        *,
        provider: str,
        limits: Limits,
        secrets: tuple[str, ...],
    ) -> None:
        self.response = response
        self.provider = provider
        self.limits = limits
        self.secrets = secrets
        self.at_batch_end = False

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers

    @property
    def request_id(self) -> str | None:
        return request_id_from(self.response.headers, secrets=self.secrets)

    def event_too_large(self) -> InvalidResponse:
        return InvalidResponse(
            f"one server-sent event is larger than the {self.limits.max_event_bytes}-byte cap "
            "(max_event_bytes)",
            provider=self.provider,
            status_code=self.response.status_code,
            request_id=self.request_id,
        )

    def bad_data(self, event: ServerSentEvent, why: str) -> StreamInterrupted:
        snippet = redact(event.data[:200], self.secrets)
        return StreamInterrupted(
            f"bad server-sent event ({why}): {snippet!r}",
            provider=self.provider,
            request_id=self.request_id,
        )

    def json(self, event: ServerSentEvent) -> dict[str, Any]:
        """An event's data as a JSON object, or `StreamInterrupted` (bad SSE)."""
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            raise self.bad_data(event, "data is not JSON") from None
        if not isinstance(data, dict):
            raise self.bad_data(event, "data is not a JSON object")
        return data

    def interrupted(self, message: str) -> StreamInterrupted:
        return StreamInterrupted(message, provider=self.provider, request_id=self.request_id)

    async def batches(self) -> AsyncGenerator[list[ServerSentEvent], None]:
        """The events, a list per network read: what arrived together is parsed together, so
        a provider can hand the agent one part for many small deltas."""
        parser = SSEParser()
        async with contextlib.aclosing(_BoundedStream(self).__aiter__()) as chunks:
            async for chunk in chunks:
                batch = parser.feed(chunk)
                if batch:
                    yield batch
        tail = parser.feed(b"", final=True)
        if tail:
            yield tail

    async def events(self) -> AsyncGenerator[ServerSentEvent, None]:
        """The events one by one; `at_batch_end` is true on the last of each network read."""
        async with contextlib.aclosing(self.batches()) as batches:
            async for batch in batches:
                last = len(batch) - 1
                for i, event in enumerate(batch):
                    self.at_batch_end = i == last
                    yield event


class SSEParser:
    """Server-sent events from bytes, as the WHATWG event-stream rules read them.

    Lines end at CRLF, LF or CR; a blank line dispatches the event; `:` lines are comments;
    `data` lines join with newlines; unknown fields are ignored. Incremental: `feed` takes each
    chunk as it comes and returns the events it completed.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._tail = ""
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes, *, final: bool = False) -> list[ServerSentEvent]:
        text = self._tail + self._decoder.decode(chunk, final)
        self._tail = ""
        if not final and text.endswith("\r"):
            self._tail, text = "\r", text[:-1]  # may be the first half of a CRLF
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()  # the line still being received
        if final:
            lines += [rest, ""] if rest else [""]
        else:
            self._tail = rest + self._tail
        out: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data or self._event:
                    out.append(
                        ServerSentEvent(
                            event=self._event,
                            data="\n".join(self._data),
                            id=self._id,
                            retry=self._retry,
                        )
                    )
                self._event, self._data, self._retry = "", [], None
                continue
            if line[0] == ":":
                continue
            field, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._event = value
            elif field == "id":
                if "\0" not in value:
                    self._id = value
            elif field == "retry" and value.isdigit():
                self._retry = int(value)
        return out


class PartBuffer:
    """Deltas that arrived together, merged: consecutive text (or thinking, or one tool call's
    argument fragments) become one part, so a fast stream does not cost one event per token."""

    def __init__(self) -> None:
        self.parts: list[StreamPart] = []

    def add(self, part: StreamPart) -> None:
        parts = self.parts
        if parts:
            last = parts[-1]
            if type(part) is TextPart and type(last) is TextPart:
                parts[-1] = TextPart(last.text + part.text)
                return
            if (
                type(part) is ThinkingPart
                and type(last) is ThinkingPart
                and not part.signature
                and not last.signature
            ):
                parts[-1] = ThinkingPart(last.text + part.text)
                return
            if (
                type(part) is ToolCallPart
                and type(last) is ToolCallPart
                and part.index == last.index
                and not part.call_id
                and not part.name
            ):
                parts[-1] = ToolCallPart(
                    last.index, last.call_id, last.name, last.arguments + part.arguments
                )
                return
        parts.append(part)

    def take(self) -> list[StreamPart]:
        parts, self.parts = self.parts, []
        return parts


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs tens of milliseconds,
    which a notebook creating many agents (or `nbagent.map`) would otherwise pay per agent."""
    return httpx.create_ssl_context()


def _int(value: Any) -> int | None:
    """A JSON integer (not a bool), or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class HTTPProvider:
    """What the Anthropic and OpenAI-format providers share. Subclasses implement `stream`
    and name their public endpoint and provider in `default_base_url` and `default_name`."""

    name: str
    model: str
    default_base_url = ""
    default_name = ""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        extra_headers: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        base_url = self.default_base_url if base_url is None else base_url
        name = self.default_name if name is None else name
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("the model name is empty: pass the model id, e.g. 'gpt-4o'.")
        if api_key is not None:
            if not isinstance(api_key, str):
                raise ConfigError("api_key must be a string: pass the key text, or None.")
            if any(ord(c) < 33 or ord(c) == 127 for c in api_key):
                raise ConfigError(
                    "the API key contains spaces or control characters: "
                    "check it for a stray newline or space."
                )
        for label, value in (("connect_timeout", connect_timeout), ("idle_timeout", idle_timeout)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{label} must be a positive number of seconds, not {value!r}.")
        for label, ivalue in (
            ("max_body_bytes", max_body_bytes),
            ("max_event_bytes", max_event_bytes),
        ):
            if not isinstance(ivalue, int) or isinstance(ivalue, bool) or ivalue <= 0:
                raise ConfigError(
                    f"{label} must be a positive whole number of bytes, not {ivalue!r}."
                )
        self.model = model
        self.name = name
        self.base_url = check_base_url(base_url)
        self._api_key = api_key or None
        self._client = client
        # one client per event loop: a client's connections belong to the loop that opened them
        # (each asyncio.run has its own, and a notebook mixes the kernel's loop with run_sync's)
        self._owned: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self.limits = Limits(
            float(connect_timeout), float(idle_timeout), max_body_bytes, max_event_bytes
        )
        self._extra_headers = dict(extra_headers or {})

    # -- secrets and repr ------------------------------------------------------------------

    @property
    def _secrets(self) -> tuple[str, ...]:
        return (self._api_key,) if self._api_key else ()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(model={self.model!r}, name={self.name!r}, "
            f"base_url={self.base_url!r}, api_key={key})"
        )

    __str__ = __repr__

    # -- client ----------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        client = self._owned.get(loop)
        if client is None:
            client = self._owned[loop] = httpx.AsyncClient(
                timeout=self.limits.httpx_timeout(), verify=_ssl_context()
            )
        return client

    async def aclose(self) -> None:
        """Close the client this provider created for the running loop (one passed in stays
        open); clients of other loops are closed when those loops run `aclose` themselves."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - aclose is awaited, so a loop runs
            return
        client = self._owned.pop(running, None)
        if client is not None:
            await client.aclose()

    # -- request ---------------------------------------------------------------------------

    def _encode(self, body: dict[str, Any]) -> bytes:
        try:
            try:
                return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in the text: send it \u-escaped
                return json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"the request cannot be encoded as JSON ({exc}): "
                "pass options and tool schemas made of plain JSON values."
            ) from None

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Deltas as they arrive, then exactly one `Completed` (implemented by each format)."""
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _open(self, url: str, content: bytes) -> AsyncIterator[EventStream]:
        """POST `content` to `url` and yield the event stream of a 2xx answer."""
        headers = {"user-agent": USER_AGENT, "content-type": "application/json"}
        headers.update(self._headers())
        headers.update(self._extra_headers)
        limits = self.limits
        client = self._http()
        async with contextlib.AsyncExitStack() as stack:
            try:
                with anyio.fail_after(limits.connect_timeout + limits.idle_timeout):
                    source = await stack.enter_async_context(
                        aconnect_sse(
                            client,
                            "POST",
                            url,
                            content=content,
                            headers=headers,
                            timeout=limits.httpx_timeout(),
                        )
                    )
            except (httpx.HTTPError, OSError, TimeoutError) as exc:
                err = transport_error(
                    exc,
                    provider=self.name,
                    limits=limits,
                    after_response=False,
                    secrets=self._secrets,
                )
                raise err from None
            response = source.response
            if not 200 <= response.status_code < 300:
                raw = await read_body(
                    response, provider=self.name, limits=limits, secrets=self._secrets
                )
                raise error_from_response(
                    self.name, response.status_code, raw, response.headers, secrets=self._secrets
                )
            ctype = response.headers.get("content-type", "").lower()
            if ctype and "text/event-stream" not in ctype:
                raw = await read_body(
                    response, provider=self.name, limits=limits, secrets=self._secrets
                )
                raise self._not_a_stream(response, ctype, raw)
            yield EventStream(response, provider=self.name, limits=limits, secrets=self._secrets)

    def _not_a_stream(self, response: httpx.Response, ctype: str, raw: bytes) -> ProviderError:
        """A 2xx that is not an event stream: an error object inside, or an invalid response."""
        if "json" in ctype:
            try:
                doc = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict) and doc.get("error"):
                return error_from_response(
                    self.name, response.status_code, doc, response.headers, secrets=self._secrets
                )
        snippet = redact(raw[:200].decode("utf-8", errors="replace"), self._secrets)
        return InvalidResponse(
            f"expected an event stream (text/event-stream) but got {ctype}: {snippet!r}",
            provider=self.name,
            status_code=response.status_code,
            request_id=request_id_from(response.headers, secrets=self._secrets),
        )
