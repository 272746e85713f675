"""nbagent's own SSE parser (`SSEParser.feed`) and the bounded reading around it (`EventStream`):
events however the bytes are cut, every line ending, the fields, and the limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from nbagent.errors import InvalidResponse, StreamInterrupted, TransportError
from nbagent.providers._event_stream import EventStream
from nbagent.providers._limits import Limits, Sender
from nbagent.providers._sse import ServerSentEvent, SSEParser

E = ServerSentEvent

STREAM = (
    ": a comment the server sends first\n"
    "event: message_start\n"
    "id: 1\n"
    'data: {"type": "message_start"}\n'
    "\n"
    "data: first line\n"
    ": a comment between data lines\n"
    "data: second line\n"
    "retry: 2500\n"
    "\n"
    "event: delta\n"
    "data: héllo wörld 🎉 ∑\n"
    "\n"
).encode()
EVENTS = [
    E("message_start", '{"type": "message_start"}', "1"),
    E("", "first line\nsecond line", "1", 2500),
    E("delta", "héllo wörld 🎉 ∑", "1"),
]


def parse(chunks: list[bytes]) -> list[ServerSentEvent]:
    parser = SSEParser()
    out: list[ServerSentEvent] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.feed(b"", final=True)


def test_a_whole_stream_in_one_read() -> None:
    assert parse([STREAM]) == EVENTS


def test_split_into_two_reads_at_every_byte_offset() -> None:
    for cut in range(len(STREAM) + 1):
        assert parse([STREAM[:cut], STREAM[cut:]]) == EVENTS, cut


def test_one_byte_per_read() -> None:
    assert parse([STREAM[i : i + 1] for i in range(len(STREAM))]) == EVENTS


def test_a_read_returns_the_events_it_completed_and_keeps_the_rest() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n\ndata: b\n\nda") == [E(data="a"), E(data="b")]
    assert parser.feed(b"ta: c\n") == []
    assert parser.feed(b"\n") == [E(data="c")]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_ending_reads_the_same(newline: str) -> None:
    body = STREAM.decode().replace("\n", newline).encode()
    assert parse([body]) == EVENTS
    for cut in range(len(body) + 1):
        assert parse([body[:cut], body[cut:]]) == EVENTS, cut


def test_mixed_line_endings_in_one_stream() -> None:
    body = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r"
    assert parse([body]) == [E(data="a\nb\nc"), E(data="d")]


def test_a_crlf_split_between_two_reads_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    # Were the CR and the LF two line ends, this LF would be a blank line dispatching "a".
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == []
    assert parser.feed(b"\n") == [E(data="a\nb")]


def test_a_cr_at_the_end_of_a_read_then_another_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\r") == []  # CR CR: a blank line, but the second CR may be half a CRLF
    assert parser.feed(b"data: b\n\n") == [E(data="a"), E(data="b")]


def test_comments_are_ignored_anywhere() -> None:
    body = b":\n: keep-alive\ndata: x\n:data: not data\ndata: y\n\n: trailing\n\n"
    assert parse([body]) == [E(data="x\ny")]


def test_data_lines_join_and_keep_their_spaces() -> None:
    body = b"data\ndata:no space\ndata:  two spaces\ndata: \ndata: last\n\n"
    assert parse([body]) == [E(data="\nno space\n two spaces\n\nlast")]


def test_event_id_and_retry_fields() -> None:
    body = (
        b"event: a\nid: 7\nretry: 100\ndata: 1\n\n"
        b"data: 2\n\n"  # the id stays; the event type and retry do not
        b"id: 8\0\ndata: 3\n\n"  # an id with NUL is ignored
        b"id\ndata: 4\n\n"  # an empty id resets it
        b"retry: 1.5\nretry: -3\nretry: \xc2\xb2\ndata: 5\n\n"  # not ASCII digits: ignored
        b"unknown: field\nevent\ndata: 6\n\n"
    )
    assert parse([body]) == [
        E("a", "1", "7", 100),
        E("", "2", "7"),
        E("", "3", "7"),
        E("", "4", ""),
        E("", "5", ""),
        E("", "6", ""),
    ]


def test_an_event_without_data_is_not_dispatched() -> None:
    assert parse([b"event: ping\n\nid: 3\n\nretry: 10\n\ndata: x\n\n"]) == [E(data="x", id="3")]


def test_a_final_event_without_its_blank_line() -> None:
    assert parse([b"data: a\n\ndata: b"]) == [E(data="a"), E(data="b")]
    assert parse([b"data: a\n\ndata: b\n"]) == [E(data="a"), E(data="b")]
    assert parse([b"data: a\n\ndata: b\r"]) == [E(data="a"), E(data="b")]
    assert parse([b"data: a\n\n"]) == [E(data="a")]


def test_a_multibyte_character_split_across_reads() -> None:
    body = "data: 🎉 €\n\n".encode()
    for cut in range(len(body) + 1):
        assert parse([body[:cut], body[cut:]]) == [E(data="🎉 €")], cut
    smiley = "🎉".encode()  # four bytes, each in a read of its own
    assert parse([b"data: ", *[smiley[i : i + 1] for i in range(4)], b"\n\n"]) == [E(data="🎉")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert parse([b"data: \xff\xfeok\n\n"]) == [E(data="\ufffd\ufffdok")]


def test_a_byte_order_mark_at_the_start_is_skipped() -> None:
    body = "\ufeffdata: a\n\n".encode()
    for cut in range(len(body) + 1):
        assert parse([body[:cut], body[cut:]]) == [E(data="a")], cut
    # Only at the start: later it is part of the text.
    assert parse(["data: a\n\n\ufeffdata: b\n\n".encode()]) == [E(data="a")]


# -- EventStream: the bounded reading ------------------------------------------------------------


class Chunks(httpx.AsyncByteStream):
    """A response body delivered read by read, recording how many reads were taken."""

    def __init__(self, chunks: list[bytes], then: Callable[[], Any] | None = None) -> None:
        self.chunks = chunks
        self.then = then  # what happens after the last chunk: hang, or raise
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.pulled += 1
            yield chunk
        if self.then is not None:
            await self.then()


async def collect(body: Chunks, limits: Limits) -> tuple[list[list[ServerSentEvent]], Any]:
    """The batches `EventStream` yields for `body`, and the error it ended with (or None)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    batches: list[list[ServerSentEvent]] = []
    error: BaseException | None = None
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        request = client.build_request("POST", "http://127.0.0.1:9/v1/messages")
        response = await client.send(request, stream=True)
        try:
            stream = EventStream(response, Sender("test", limits))
            async for batch in stream.batches():
                batches.append(batch)
        except (InvalidResponse, StreamInterrupted, TransportError) as exc:
            error = exc
        finally:
            await response.aclose()
    return batches, error


def test_events_of_one_read_come_as_one_batch() -> None:
    body = Chunks([b"data: 1\n\ndata: 2\n\nda", b"ta: 3\n\n", b"data: 4"])
    batches, error = asyncio.run(collect(body, Limits()))
    assert error is None
    assert batches == [[E(data="1"), E(data="2")], [E(data="3")], [E(data="4")]]


def test_an_oversized_event_is_rejected_before_it_is_buffered() -> None:
    piece = b"x" * 1000
    body = Chunks([b"data: small\n\n", b"data: ", *[piece] * 100, b"\n\n"])
    batches, error = asyncio.run(collect(body, Limits(max_event_bytes=4000)))
    assert batches == [[E(data="small")]]
    assert isinstance(error, InvalidResponse)
    assert error.message.startswith("one server-sent event is larger than the 4000-byte cap")
    # Refused on the read that passed the cap: the other 96 KB were never read.
    assert body.pulled == 6


def test_events_up_to_the_cap_pass_and_the_count_restarts_at_each_event() -> None:
    event = b"data: " + b"y" * 94 + b"\n\n"  # 102 bytes; the cap counts up to the blank line
    body = Chunks([event[:50], event[50:] + event, event * 3])
    batches, error = asyncio.run(collect(body, Limits(max_event_bytes=101)))
    assert error is None
    assert [len(e.data) for batch in batches for e in batch] == [94] * 5


def test_an_oversized_event_split_by_a_crlf_across_reads() -> None:
    # The blank line is CRLF CRLF, cut between reads: the second event starts counting afresh.
    body = Chunks([b"data: " + b"a" * 40 + b"\r\n\r", b"\ndata: " + b"b" * 40 + b"\r\n\r\n"])
    batches, error = asyncio.run(collect(body, Limits(max_event_bytes=60)))
    assert error is None and [e.data for b in batches for e in b] == ["a" * 40, "b" * 40]


def test_a_silent_stream_passes_the_idle_timeout() -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    body = Chunks([b"data: 1\n\n"], then=hang)
    batches, error = asyncio.run(collect(body, Limits(idle_timeout=0.05)))
    assert batches == [[E(data="1")]]
    assert isinstance(error, TransportError)
    assert "stream idle: no data for 0.05 s" in str(error)


def test_a_connection_lost_mid_stream() -> None:
    async def reset() -> None:
        raise httpx.ReadError("connection reset by peer")

    body = Chunks([b"data: 1\n\ndata: half"], then=reset)
    batches, error = asyncio.run(collect(body, Limits()))
    assert batches == [[E(data="1")]]  # the half event is never dispatched
    assert isinstance(error, StreamInterrupted)
    assert "connection lost mid-stream" in str(error) and "connection reset" in str(error)
