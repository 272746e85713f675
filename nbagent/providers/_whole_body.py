"""A whole, non-streamed answer read by the same reader as a live stream.

A provider's batch API hands back each item's answer as one JSON body (a Messages `message`, a
Chat `chat.completion`, a Responses `response`, a Gemini `GenerateContentResponse`), not as a
stream. Reading those bodies with a second parser would make two interpretations of one wire
format: stop reasons, refusals, content filters, usage and tool calls could come out differently
live and in a batch. Instead each body is replayed as the events the live stream would have
carried (the provider's `whole_events`), and the wire format's own stream reader (`read_events`)
reads them, so an item's `Completed` (or its typed error: a refusal is `ContentFiltered` either
way) is the one a live request with the same answer would give.

    completed = replay(provider, whole_body(provider, body, request_id="req_1"))
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from ..errors import InvalidResponse, StreamInterrupted
from ._base import Completed
from ._event_stream import Events
from ._http import HTTPProvider
from ._sse import ServerSentEvent

WholeEvents = list[tuple[str, dict[str, Any] | str]]
"""The events a live stream would have carried for a whole answer: (event name, its data
decoded, or a literal marker such as `[DONE]`)."""


class WholeBody(Events):
    """The events of a whole body, as an `Events` source: each event's data is its position in
    `docs` (already decoded, so nothing is encoded and decoded again), or a literal marker such
    as `[DONE]`. It has no connection to cut: an end marker ends a complete answer.

    `live`: the events are what a watcher kept of a live stream (`_watch`), read as a stream
    is (an end marker alone may end a cut answer). `made` holds the errors this source itself
    made for an answer it found cut or malformed (not the provider's own error events).
    `status_code` is the status the item's answer came with, where the batch API says it
    (OpenAI's `response.status_code`), else None; `batch`: the answer came through a batch API
    (priced at its batch price)."""

    def __init__(
        self,
        docs: list[tuple[str, dict[str, Any] | str]],
        *,
        provider: str,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        status_code: int | None = None,
        live: bool = False,
        batch: bool = False,
    ) -> None:
        super().__init__(provider, request_id, dict(headers or {}), status_code)
        self._docs = docs
        self.live = live
        self.batch = batch
        self.trusts_end_marker = not live
        self.made: list[StreamInterrupted] = []

    async def batches(self) -> AsyncGenerator[list[ServerSentEvent], None]:
        yield [
            ServerSentEvent(name, doc if isinstance(doc, str) else str(i))
            for i, (name, doc) in enumerate(self._docs)
        ]

    def json(self, event: ServerSentEvent) -> dict[str, Any]:
        doc = self._docs[int(event.data)][1]
        assert isinstance(doc, dict)
        return doc

    def bad_data(self, event: ServerSentEvent, why: str) -> StreamInterrupted:
        return self.interrupted(f"the answer's body is not what its format says ({why})")

    def interrupted(self, message: str) -> StreamInterrupted:
        if not self.live:
            message = message.replace("the stream ended", "the answer ended")
        err = super().interrupted(message)
        self.made.append(err)
        return err


class NotAnAnswer(Exception):
    """The body is not an answer of its format (turned into `InvalidResponse` by `whole_body`,
    which knows the provider's name)."""


def whole_body(provider: HTTPProvider, body: Any, **options: Any) -> WholeBody:
    """The whole answer `body` as the events its live stream would have carried (`options`
    as `WholeBody` takes them), for `replay` to read with `provider`'s stream reader: the
    `Completed` a live stream with this answer ends in, or what that stream would have raised
    (`ContentFiltered` for a refusal, `StreamInterrupted` for an answer with no end);
    `InvalidResponse` here for a body that is not an answer at all."""
    try:
        if not isinstance(body, dict):
            raise NotAnAnswer("an answer that is not a JSON object")
        events = provider.whole_events(body)
    except NotAnAnswer as exc:
        raise InvalidResponse(f"{exc}: {repr(body)[:200]}", provider=provider.name) from None
    return WholeBody(events, provider=provider.name, **options)


def replay(provider: HTTPProvider, es: WholeBody) -> Completed:
    """The `Completed` that `provider`'s reader reads from `es`, at once: the events are all
    there, so the reader never waits, and this runs in any thread, with or without a loop."""
    reading = _completed(provider, es)
    try:
        reading.send(None)
    except StopIteration as stop:
        completed: Completed = stop.value
        return completed
    reading.close()
    raise RuntimeError("a reader of decoded events waited for more")  # pragma: no cover


async def _completed(provider: HTTPProvider, es: WholeBody) -> Completed:
    completed: Completed | None = None
    async with contextlib.aclosing(provider.read_events(es)) as parts:
        async for part in parts:
            if isinstance(part, Completed):
                completed = part
    assert completed is not None  # read_events ends in one, or raises
    return completed
