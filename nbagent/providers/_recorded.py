"""Recording a provider's HTTP exchanges (`Agent(record=...)`) and answering from a recording.

`sent(client, request, recorder, secrets)` sends a request, streamed, and records the request,
the status and kept headers, and the body chunk by chunk as it comes off the network, with its
timing. The body is recorded where httpx hands it over (`response.stream`), before decoding, so
what is replayed is byte for byte what the server sent (a gzip body stays gzip, with its header).

`ReplayTransport(recording)` is the other way round: an httpx transport that answers each
request with the next recorded exchange of the same method and path, so a recorded session (live
streams, a provider batch's create, polls and results download) runs again with no server and
no network: `HTTPProvider(..., client=httpx.AsyncClient(transport=ReplayTransport(rec)))`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

import httpx

from ..errors import ConfigError
from ..recording import Exchange, RecordedExchange, Recorder, Recording, clean_path


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
async def sent(
    client: httpx.AsyncClient,
    request: httpx.Request,
    recorder: Recorder | None,
    secrets: tuple[str, ...],
) -> AsyncIterator[httpx.Response]:
    """`client.send(request, stream=True)`, recorded into `recorder` when there is one (a
    streamed request body is recorded by its size only: its bytes were never held)."""
    ex = None
    if recorder is not None:
        body = request.content if isinstance(request.stream, httpx.ByteStream) else None
        ex = recorder.exchange(
            request.method, str(request.url), request.headers, body, secrets=secrets
        )
    try:
        response = await client.send(request, stream=True)
    except BaseException as exc:  # no answer: connect, TLS, timeout, cancelled
        if ex is not None:
            ex.end(error=type(exc).__name__)
        raise
    if ex is not None:
        ex.response(response.status_code, response.headers.multi_items())
        response.stream = _RecordedStream(response.stream, ex)  # type: ignore[arg-type]
    try:
        yield response
    except BaseException as exc:  # the client stopped reading (a stall, an error event)
        if ex is not None:
            ex.end(error=type(exc).__name__)
        raise
    else:
        if ex is not None:
            ex.end()
    finally:
        await response.aclose()


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, ex: RecordedExchange) -> None:
        self._ex = ex

    async def __aiter__(self) -> AsyncGenerator[bytes, None]:
        for _, data in self._ex.chunks:
            yield data
        if not self._ex.complete or self._ex.error:
            raise httpx.ReadError(f"the recorded answer broke off ({self._ex.error or 'cut'})")


class ReplayTransport(httpx.AsyncBaseTransport):
    """Answers each request with the next recorded exchange of its method and path (the path as
    a recording keeps it), at once: no server, no network, no waiting. A request the recording
    has no answer for is a `ConfigError` naming it; an exchange recorded without an answer (a
    refused connection) is a `ConnectError`."""

    def __init__(self, recording: Recording) -> None:
        self.left = list(recording.exchanges)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = clean_path(str(request.url))
        for i, ex in enumerate(self.left):
            if ex.method == request.method and ex.path == path:
                del self.left[i]
                break
        else:
            raise ConfigError(
                f"the recording has no answer left for {request.method} {path}: "
                "replay the session that was recorded, in the order it was."
            )
        if ex.status is None:
            raise httpx.ConnectError(f"recorded without an answer ({ex.error})", request=request)
        return httpx.Response(
            ex.status, headers=list(ex.headers.items()), stream=_Chunks(ex), request=request
        )
