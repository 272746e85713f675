"""The limits a streaming request runs under, and what passing them turns into.

`Limits` holds the connect and idle timeouts, the size caps and how a stream's end is read;
`Sender` is what reading a response needs of the provider that sent the request (its name, its
limits, its secrets). `guarded_chunks` reads a response's bytes under the idle timeout and turns
a failure while they are read into its typed error; `read_body` reads a
whole (error) body under the size cap; `transport_error` names what went wrong on the
connection, in one sentence, as a typed error.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import anyio
import httpx

from ..errors import (
    ConfigError,
    InvalidResponse,
    NbAgentError,
    StreamInterrupted,
    TransportError,
)
from ._error_text import redact, request_id_from
from ._parts import whole_number

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    # a stream that reaches its end marker with neither a finish reason nor a usage report is
    # complete (True) or was cut (False: llama-cpp-python's interrupted streams end so)
    trust_end_marker: bool = False

    def __post_init__(self) -> None:
        """`ConfigError` naming the first limit that is wrong."""
        for label in ("connect_timeout", "idle_timeout"):
            value = getattr(self, label)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{label} must be a positive number of seconds, not {value!r}.")
        for label in ("max_body_bytes", "max_event_bytes"):
            value = getattr(self, label)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(
                    f"{label} must be a positive whole number of bytes, not {value!r}."
                )
        if not isinstance(self.trust_end_marker, bool):
            raise ConfigError(
                f"trust_end_marker must be True or False, not {self.trust_end_marker!r}."
            )

    def httpx_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout,
            read=self.idle_timeout,
            write=self.idle_timeout,
            pool=self.connect_timeout,
        )


@dataclass(frozen=True)
class Sender:
    """What reading a response needs of the provider that sent the request: its name (on the
    errors), its limits, and its secrets (kept out of every message)."""

    provider: str
    limits: Limits = Limits()
    secrets: tuple[str, ...] = ()


def _seconds(value: float) -> str:
    return f"{value:g} s"


def transport_error(
    exc: BaseException,
    sender: Sender,
    *,
    after_response: bool,
    request_id: str | None = None,
) -> NbAgentError:
    """A typed error for an httpx / socket failure.

    Before the response: `TransportError`. After the 200 (mid-stream): `StreamInterrupted`,
    except an idle stream, which is a `TransportError` naming the idle seconds.
    """
    provider, limits = sender.provider, sender.limits
    detail = redact(f"{type(exc).__name__}: {exc}".rstrip(": "), sender.secrets)
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return ConfigError(f"the request URL cannot be used ({detail}); check base_url.")
    if isinstance(exc, httpx.DecodingError):
        what = f"the response body does not decode ({detail})"
        return InvalidResponse(what, provider=provider, request_id=request_id)
    msg = detail
    if isinstance(exc, httpx.ConnectTimeout):
        msg = f"could not connect within {_seconds(limits.connect_timeout)} ({detail})"
    elif isinstance(exc, httpx.PoolTimeout):
        msg = f"no free connection within {_seconds(limits.connect_timeout)} ({detail})"
    elif isinstance(exc, (httpx.ReadTimeout, TimeoutError)) and after_response:
        msg = f"stream idle: no data for {_seconds(limits.idle_timeout)} (idle timeout)"
    elif isinstance(exc, (httpx.ReadTimeout, TimeoutError)):
        msg = f"no response within {_seconds(limits.idle_timeout)} (idle timeout)"
    elif after_response:
        msg = f"connection lost mid-stream ({detail})"
        return StreamInterrupted(msg, provider=provider, request_id=request_id)
    return TransportError(msg, provider=provider, request_id=request_id)


async def guarded_chunks(
    response: httpx.Response,
    sender: Sender,
    *,
    after_response: bool = True,
    request_id: str | None = None,
    broke_off: str = "",
) -> AsyncGenerator[bytes, None]:
    """The response's bytes under the idle timeout; silence past it, or the connection failing
    while they are read, is its typed error (`transport_error`: mid-stream, `StreamInterrupted`
    or, for an idle stream, `TransportError`). `broke_off` names what was being read for a
    `StreamInterrupted` of its own ("the results download" broke off (...))."""
    it = response.aiter_bytes().__aiter__()
    try:
        while True:
            try:
                with anyio.fail_after(sender.limits.idle_timeout):
                    chunk = await it.__anext__()
            except StopAsyncIteration:
                return
            yield chunk
    except (httpx.HTTPError, OSError, TimeoutError) as exc:
        err = transport_error(exc, sender, after_response=after_response, request_id=request_id)
        if broke_off and isinstance(err, StreamInterrupted):
            err = StreamInterrupted(
                f"{broke_off} broke off ({err.message})",
                provider=sender.provider,
                request_id=request_id,
            )
        raise err from None
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def read_body(response: httpx.Response, sender: Sender, *, cap: int | None = None) -> bytes:
    """The whole body, read in bounded chunks; `InvalidResponse` past `cap` (None: the
    sender's `max_body_bytes`)."""
    cap = sender.limits.max_body_bytes if cap is None else cap
    declared = whole_number(response.headers.get("content-length"))
    if declared is not None and declared > cap:
        raise too_large(sender, response, f"the response body ({declared} bytes)", cap)
    buf = bytearray()
    chunks = guarded_chunks(response, sender, after_response=False)
    async with contextlib.aclosing(chunks):
        async for chunk in chunks:
            buf += chunk
            if len(buf) > cap:
                raise too_large(sender, response, "the response body", cap)
    return bytes(buf)


def too_large(
    sender: Sender, response: httpx.Response, what: str, cap: int, option: str = "max_body_bytes"
) -> InvalidResponse:
    """`InvalidResponse` for `what` of `response` past its `cap` (the provider's `option`)."""
    return InvalidResponse(
        f"{what} is larger than the {cap}-byte cap ({option})",
        provider=sender.provider,
        status_code=response.status_code,
        request_id=request_id_from(response.headers, secrets=sender.secrets),
    )
