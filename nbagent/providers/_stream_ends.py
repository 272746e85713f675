"""The one loop that reads a 200 stream, for every HTTP wire format, and what the stream ends
in: its one `Completed`, or the error an answer that streamed ended in (a content filter, a full
context window).

Each format keeps what one answer's events have said in a `Reading` of its own, whose `read`
hands each event to the handler of its type and whose `result` is what the answer said;
`StreamEnds.read_events` drives it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .._core._budget import Usage
from .._core._messages import Block, Message
from ..errors import ProviderError
from ._base import Completed, StreamPart
from ._error_text import kept_headers, redact
from ._event_stream import Events
from ._http_errors import error_from_payload
from ._parts import PartBuffer, whole_number
from ._pricing import estimate_cost
from ._sse import ServerSentEvent


class ErrorEvent(Exception):
    """An error event of the answer, raised by a reading's handler: the parts that came before
    it are handed on, then its typed error is raised (`options` as `error_from_payload` takes
    them: a `fallback_message`)."""

    def __init__(self, payload: Any, **options: Any) -> None:
        super().__init__()
        self.payload = payload
        self.options = options


class Refused(ErrorEvent):
    """An answer that streamed but ended in an error of its own (a content filter, a full
    context window, an answer that cannot be used), raised by a reading: `cls` with `message`,
    `code` and the error's other `fields`; the provider adds its name, request id and headers."""

    def __init__(self, cls: type[ProviderError], message: str, *, code: str, **fields: Any) -> None:
        super().__init__(None)
        self.cls, self.message, self.code, self.fields = cls, message, code, fields


@dataclass
class Reading:
    """What one answer's events have said so far, format by format: `read` takes each event,
    `ended` says the end marker came (nothing after it is read), `end` checks the end. The
    model and the reply's id the answer named, and its token counts (`usage`), are what its
    `Completed` carries (`StreamEnds._completed`); `finish` is the finish reason it named (the
    format's word), and `MARKERS` name its end marker and the field of its finish reason, for
    the sentences of `end`."""

    es: Events
    buf: PartBuffer = field(default_factory=PartBuffer)
    ended: bool = False
    finish: str | None = None  # the finish reason the answer named, None while it named none
    model: str | None = None  # the model the answer says answered
    response_id: str | None = None  # the provider's id of the reply
    input_tokens: int = 0  # every prompt token, cached ones included
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reported: bool = False  # a usage report (token counts) came
    MARKERS: ClassVar[tuple[str, str]] = ("", "")  # the end marker, the finish reason's field

    def read(self, event: ServerSentEvent) -> None:
        raise NotImplementedError

    def result(self) -> tuple[list[Block], str, str]:
        """The answer's blocks, its stop reason and what reading it had to assume ("" for
        nothing), once its events are read; `Refused` for an answer that ended in an error."""
        raise NotImplementedError

    def named(self, model: Any, response_id: Any) -> None:
        """The model and the reply's id an event names (each kept when it is a string)."""
        if isinstance(model, str) and model:
            self.model = model
        if isinstance(response_id, str) and response_id:
            self.response_id = response_id

    def counted(self, usage: Any, prompt: str, answer: str, details: str) -> None:
        """The token counts of an OpenAI format's usage object (`prompt`, `answer` and
        `details`: its names for the prompt's count, the answer's and the prompt's details,
        whose `cached_tokens` were read from the cache)."""
        if not isinstance(usage, dict):
            return
        inputs = whole_number(usage.get(prompt))
        outputs = whole_number(usage.get(answer))
        self.reported = self.reported or inputs is not None or outputs is not None
        self.input_tokens = inputs or 0
        self.output_tokens = outputs or 0
        cached = usage.get(details)
        if isinstance(cached, dict):
            self.cache_read = whole_number(cached.get("cached_tokens")) or 0

    def usage(self) -> Usage:
        """The answer's tokens, as its format reported them."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            requests=1,
        )

    async def end(self, batches: AsyncIterator[list[ServerSentEvent]]) -> None:
        """Check the end of an answer read up to its end marker (`batches` is the rest).

        No end marker: `StreamInterrupted` (the answer was cut before it). An end marker with
        no finish reason before it: the rest of `batches` is read to its end, and what the
        server reported decides. A usage report without a finish reason, then a clean end, is
        a finished answer (Snowflake Cortex never names a finish reason). Neither, cleanly or
        not, is a cut one: llama-cpp-python's server, whose `interrupt_requests` (on by
        default) stops a running stream when another request arrives, sends `data: [DONE]` in
        place of the chunk with the finish reason and ends the body (cleanly, or breaking the
        connection off), and never sends usage. `StreamInterrupted`: the attempt fails, its
        partial text is discarded and the request is sent again; a server that ends complete
        answers so too needs `trust_end_marker=True`, which the sentence names. With the
        reason seen, what follows the end marker is not read.
        """
        es, (marker, reason) = self.es, self.MARKERS
        if not self.ended:
            raise es.interrupted(f"the stream ended before {marker}")
        if self.finish is not None:
            return
        try:
            async for _ in batches:
                pass
        except ProviderError as err:
            raise es.interrupted(
                f"the connection broke after {marker} with no {reason} before it: "
                f"the answer was cut ({err.message})"
            ) from None
        if self.reported or es.trusts_end_marker:
            return
        raise es.interrupted(
            f"the stream ended with {marker} but with neither a {reason} nor a usage report "
            "before it: the answer was cut, as llama-cpp-python's server cuts a stream when "
            "another request arrives; if this server ends every complete answer so, make "
            "the provider with trust_end_marker=True"
        )


class StreamEnds:
    """The end of a stream, shared by `HTTPProvider`'s formats: `read_events` reads an answer
    with the format's `_reading`."""

    name: str
    model: str
    _reading: type[Reading]  # what one answer's events have said, with a handler per event type

    if TYPE_CHECKING:

        @property
        def _secrets(self) -> tuple[str, ...]: ...

    def read_events(self, es: Events) -> AsyncGenerator[StreamPart, None]:
        """The parts of an answer in this format, read from its events by its `_reading`.

        Args:
            es: The live response's events, or a whole answer replayed as the events it would
                have streamed (`WholeBody`, for a batch's answers).

        Returns:
            Text, thinking and tool-call parts as they arrive (those a network read brought
            merged together), then one `Completed`.
        """
        return self._read_stream(self._reading(es))

    async def _read_stream(self, reading: Reading) -> AsyncGenerator[StreamPart, None]:
        es, buf = reading.es, reading.buf
        try:
            async with aclosing(es.batches()) as batches:
                async for batch in batches:
                    try:
                        for event in batch:
                            reading.read(event)
                            if reading.ended:
                                break
                    except ErrorEvent:
                        for part in buf.take():  # what came before the error, for the record
                            yield part
                        raise
                    for part in buf.take():
                        yield part
                    if reading.ended:
                        break
                await reading.end(batches)
            yield self._completed(reading, *reading.result())
        except Refused as err:
            raise err.cls(
                redact(err.message, self._secrets),
                provider=self.name,
                code=err.code,
                request_id=es.request_id,
                headers=kept_headers(es.headers, self._secrets),
                **err.fields,
            ) from None
        except ErrorEvent as err:
            raise error_from_payload(
                self.name,
                err.payload,
                es.headers,
                secrets=self._secrets,
                model=self.model,
                **err.options,
            ) from None

    def _completed(
        self, reading: Reading, blocks: list[Block], stop_reason: str, note: str
    ) -> Completed:
        """The one `Completed` of a stream: the message, the reading's usage priced with
        genai-prices (at the batch price for a batch's answer, `Events.batch`), and what the
        answer came with (the model and reply id it named, its stream's request id, status and
        rate-limit headers)."""
        usage = reading.usage()
        answered = reading.model or self.model
        stream = reading.es
        return Completed(
            message=Message("assistant", tuple(blocks)),
            usage=usage.with_cost(estimate_cost(self.name, answered, usage, batch=stream.batch)),
            stop_reason=stop_reason,
            request_id=stream.request_id,
            response_id=reading.response_id,
            model=answered,
            headers=kept_headers(stream.headers, self._secrets),
            note=note,
            status_code=stream.status_code,
        )
