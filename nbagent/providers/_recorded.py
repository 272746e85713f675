"""Recording a provider's HTTP exchanges (`Agent(record=...)`): the request sent, the status and
kept headers, and the body chunk by chunk as it comes off the network, with its timing.

The body is recorded where httpx hands it over (`response.stream`), before decoding, so what
is replayed is byte for byte what the server sent (a gzip body stays gzip, with its header).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

import httpx

from ..recording import Exchange, Recorder

__all__ = ["open_stream"]


class _RecordedStream(httpx.AsyncByteStream):
    """The response's bytes, passed through unchanged and copied into the exchange."""

    def __init__(self, inner: httpx.AsyncByteStream, ex: Exchange) -> None:
        self._inner = inner
        self._ex = ex

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        ex = self._ex
        try:
            async for chunk in self._inner:
                ex.chunk(chunk)
                yield chunk
        except Exception as exc:  # the connection broke under the body
            ex.end(error=type(exc).__name__)
            raise
        ex.end()

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    recorder: Recorder | None,
    secrets: tuple[str, ...],
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,
) -> AsyncIterator[httpx.Response]:
    """`client.stream("POST", ...)`, recorded into `recorder` when there is one."""
    stream = client.stream("POST", url, content=content, headers=headers, timeout=timeout)
    if recorder is None:
        async with stream as response:
            yield response
        return
    ex = recorder.exchange("POST", url, headers, content, secrets=secrets)
    try:
        response = await stream.__aenter__()
    except BaseException as exc:  # no answer: connect, TLS, timeout, cancelled
        ex.end(error=type(exc).__name__)
        raise
    ex.response(response.status_code, response.headers.multi_items())
    response.stream = _RecordedStream(response.stream, ex)  # type: ignore[arg-type]
    try:
        yield response
    except BaseException as exc:  # the client stopped reading (a stall, an error event)
        ex.end(error=type(exc).__name__)
        await stream.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    ex.end()
    await stream.__aexit__(None, None, None)
