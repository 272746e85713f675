"""A 2xx event-stream response read safely: the idle timeout, the per-event cap, typed errors.

`EventStream.batches()` yields the events of each network read together.
Bytes are checked against `max_event_bytes` before they are parsed, so a server cannot make the
client buffer an unbounded event; silence longer than `idle_timeout` and a connection that dies
after the 200 come out as `TransportError` / `StreamInterrupted`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import httpx

from ..errors import InvalidResponse, StreamInterrupted
from ._error_text import redact, request_id_from
from ._limits import Sender, guarded_chunks, too_large
from ._sse import ServerSentEvent, SSEParser

_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

# A blank line (the end of an SSE event) is two line terminators in a row.
_BOUNDARY = re.compile(rb"\n\n|\n\r|\r\r")


class Events:
    """What a wire format's reader reads an answer from: the events of a live stream
    (`EventStream`), or a whole non-streamed body replayed as events (`_whole_body.WholeBody`),
    so one reader gives one reading of both. What the answer came with (its provider's name,
    request id, headers and status) are attributes; `trusts_end_marker` says whether an end
    marker with neither a finish reason nor a usage report before it ends a complete answer: a
    whole body's (it has no connection to cut), or a stream's when the provider was made with
    `trust_end_marker=True` (`Reading.end`)."""

    trusts_end_marker: bool = False
    batch: bool = False  # an answer through a batch API: priced at its batch price

    def __init__(
        self,
        provider: str,
        request_id: str | None,
        headers: Mapping[str, str],
        status_code: int | None,
    ) -> None:
        self.provider = provider
        self.request_id = request_id
        self.headers = headers
        self.status_code = status_code

    def batches(self) -> AsyncGenerator[list[ServerSentEvent], None]:
        """The events, a list of those that arrived together at a time."""
        raise NotImplementedError

    def json(self, event: ServerSentEvent) -> dict[str, Any]:
        """An event's data as a JSON object, or `StreamInterrupted` (bad data)."""
        raise NotImplementedError

    def bad_data(self, event: ServerSentEvent, why: str) -> StreamInterrupted:
        """The error of an event whose data is not what its format says (`why`)."""
        raise NotImplementedError

    def interrupted(self, message: str) -> StreamInterrupted:
        """The error of an answer that was cut, in `message`'s words."""
        return StreamInterrupted(message, provider=self.provider, request_id=self.request_id)


class EventStream(Events):
    """A 2xx event-stream response: `batches()` yields its SSE events, bounded and timed."""

    def __init__(self, response: httpx.Response, sender: Sender) -> None:
        rid = request_id_from(response.headers, secrets=sender.secrets)
        super().__init__(sender.provider, rid, response.headers, response.status_code)
        self.response = response
        self.sender = sender
        self.trusts_end_marker = sender.limits.trust_end_marker

    def event_too_large(self) -> InvalidResponse:
        cap = self.sender.limits.max_event_bytes
        return too_large(
            self.sender, self.response, "one server-sent event", cap, "max_event_bytes"
        )

    def bad_data(self, event: ServerSentEvent, why: str) -> StreamInterrupted:
        snippet = redact(event.data[:200], self.sender.secrets)
        return self.interrupted(f"bad server-sent event ({why}): {snippet!r}")

    def json(self, event: ServerSentEvent) -> dict[str, Any]:
        """An event's data as a JSON object, or `StreamInterrupted` (bad SSE)."""
        text = event.data
        try:
            # the C scanner straight away: `json.loads` adds two Python calls and two regex
            # matches per event; anything unusual (whitespace around, trailing bytes, an
            # error) goes through `json.loads` for its exact reading
            data, end = _scan(text, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end != len(text):
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):
                raise self.bad_data(event, "data is not JSON") from None
        if not isinstance(data, dict):
            raise self.bad_data(event, "data is not a JSON object")
        return data

    async def _bounded(self) -> AsyncGenerator[bytes, None]:
        """The upstream bytes with the idle timeout and the per-event size cap applied.

        It ends the stream with a blank line when the server did not, so that a last event the
        server sent whole but without its final newline (as in the Anthropic SDK's recorded
        fixtures) is dispatched.
        """
        cap = self.sender.limits.max_event_bytes
        pending = 0  # bytes of the event being received so far
        prev = b""
        chunks = guarded_chunks(self.response, self.sender, request_id=self.request_id)
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:  # never empty: httpx yields none
                data = prev + chunk
                start = len(prev)
                if pending + len(chunk) <= cap:
                    # no event in this read can pass the cap: only the bytes after its
                    # last boundary (the event still being received) need counting
                    end = max(data.rfind(b"\n\n"), data.rfind(b"\n\r"), data.rfind(b"\r\r"))
                    pending = pending + len(chunk) if end < 0 else len(data) - end - 2
                    prev = chunk[-1:]
                    yield chunk
                    continue
                first = True
                for m in _BOUNDARY.finditer(data):
                    seg = max(0, m.start() - start)
                    if (pending + seg if first else seg) > cap:
                        raise self.event_too_large()
                    first = False
                    start = m.end()
                seg = max(0, len(data) - start)
                pending = pending + seg if first else seg
                if pending > cap:
                    raise self.event_too_large()
                prev = chunk[-1:]
                yield chunk
        if pending:
            yield b"\n\n"

    async def batches(self) -> AsyncGenerator[list[ServerSentEvent], None]:
        """The events, a list per network read: what arrived together is parsed together, so
        a provider can hand the agent one part for many small deltas."""
        parser = SSEParser()
        async with contextlib.aclosing(self._bounded()) as chunks:
            async for chunk in chunks:
                batch = parser.feed(chunk)
                if batch:
                    yield batch
        tail = parser.feed(b"", final=True)
        if tail:
            yield tail
