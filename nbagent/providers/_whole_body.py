"""A whole, non-streamed answer read by the same reader as a live stream.

A provider's batch API hands back each item's answer as one JSON body (a Messages `message`, a
Chat `chat.completion`, a Responses `response`, a Gemini `GenerateContentResponse`), not as a
stream. Reading those bodies with a second parser would make two interpretations of one wire
format: stop reasons, refusals, content filters, usage and tool calls could come out differently
live and in a batch. Instead each body is replayed as the events the live stream would have
carried (`events_for`), and the wire format's own stream reader (`read_events`) reads them, so
an item's `Completed` (or its typed error: a refusal is `ContentFiltered` either way) is the one a
live request with the same answer would give.

    completed = await read_whole(provider, body, request_id="req_1")
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

from ..errors import InvalidResponse, StreamInterrupted
from ._base import Completed, StreamPart
from ._event_stream import EndCheck, Events
from ._http_errors import redact
from ._sse import ServerSentEvent

__all__ = ["WholeBody", "events_for", "read_whole"]

_DONE = "[DONE]"


class ReadsEvents(Protocol):
    """A wire format's provider: its name, and its reader of an answer's events."""

    name: str

    def read_events(self, es: Events) -> AsyncGenerator[StreamPart, None]: ...


class WholeBody(EndCheck):
    """The events of a whole body, as an `Events` source: each event's data is its position in
    `docs` (already decoded, so nothing is encoded and decoded again), or a literal marker such
    as `[DONE]`. It has no connection to cut: an end marker ends a complete answer."""

    trusts_end_marker = True

    def __init__(
        self,
        docs: list[tuple[str, dict[str, Any] | str]],
        *,
        provider: str,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        status_code: int | None = None,
    ) -> None:
        self._docs = docs
        self.provider = provider
        self._request_id = request_id
        self._headers: Mapping[str, str] = dict(headers or {})
        self._status_code = status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def request_id(self) -> str | None:
        return self._request_id

    @property
    def status_code(self) -> int | None:
        """The status the item's answer came with, where the batch API says it (OpenAI's
        `response.status_code`); None where it does not."""
        return self._status_code

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
        return StreamInterrupted(
            f"the answer's body is not what its format says ({why})",
            provider=self.provider,
            request_id=self._request_id,
        )

    def interrupted(self, message: str) -> StreamInterrupted:
        return StreamInterrupted(
            message.replace("the stream ended", "the answer ended"),
            provider=self.provider,
            request_id=self._request_id,
        )


class _NotAnAnswer(Exception):
    """The body is not an answer of its format (turned into `InvalidResponse` by the caller,
    which knows the provider's name)."""


def _anthropic(message: dict[str, Any]) -> list[tuple[str, dict[str, Any] | str]]:
    """A Messages `message` as `message_start`, a start per content block, `message_delta`
    (its stop reason) and `message_stop`; the usage rides on `message_start` whole."""
    content = message.get("content")
    if not isinstance(content, list):
        raise _NotAnAnswer("a message without a content list")
    head = {k: message[k] for k in ("id", "model", "usage") if k in message}
    out: list[tuple[str, dict[str, Any] | str]] = [
        ("message_start", {"type": "message_start", "message": head})
    ]
    for i, block in enumerate(content):
        start = {"type": "content_block_start", "index": i, "content_block": block}
        out.append(("content_block_start", start))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    out.append(("message_delta", {"type": "message_delta", "delta": delta}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def _chat(completion: dict[str, Any]) -> list[tuple[str, dict[str, Any] | str]]:
    """A `chat.completion` as the one chunk that carries all of it, then `[DONE]`."""
    choices = completion.get("choices")
    chunk: dict[str, Any] = {k: completion[k] for k in ("id", "model", "usage") if k in completion}
    if "prompt_filter_results" in completion:
        chunk["prompt_filter_results"] = completion["prompt_filter_results"]
    chunk["choices"] = []
    if isinstance(choices, list) and choices:
        choice = choices[0]
        if not isinstance(choice, dict):
            raise _NotAnAnswer("a choice that is not an object")
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        delta = {
            k: message[k]
            for k in ("role", "content", "refusal", "reasoning_content", "reasoning")
            if message.get(k) is not None
        }
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)
            ]
        streamed = {"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}
        if "content_filter_results" in choice:
            streamed["content_filter_results"] = choice["content_filter_results"]
        chunk["choices"] = [streamed]
    return [("", chunk), ("", _DONE)]


_RESPONSE_ENDS = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


def _responses(response: dict[str, Any]) -> list[tuple[str, dict[str, Any] | str]]:
    """A Responses `response` as its terminal event (which carries the whole response)."""
    kind = _RESPONSE_ENDS.get(str(response.get("status") or "completed"), "response.completed")
    return [(kind, {"type": kind, "response": response})]


def _gemini(response: dict[str, Any]) -> list[tuple[str, dict[str, Any] | str]]:
    """A `GenerateContentResponse`: each streamed chunk is one already, so it is its own."""
    return [("", response)]


_EVENTS = {
    "anthropic": _anthropic,
    "openai": _chat,
    "openai-responses": _responses,
    "gemini": _gemini,
}


def events_for(
    wire: str, body: Any, *, provider: str | None = None
) -> list[tuple[str, dict[str, Any] | str]]:
    """The events a live stream of wire format `wire` ("anthropic", "openai",
    "openai-responses", "gemini") would have carried for the whole answer `body`.

    Raises `InvalidResponse` (from `provider`, default `wire`) for a body that is not an answer.
    """
    try:
        if not isinstance(body, dict):
            raise _NotAnAnswer("an answer that is not a JSON object")
        return _EVENTS[wire](body)
    except _NotAnAnswer as exc:
        snippet = redact(repr(body)[:200], ())
        raise InvalidResponse(f"{exc}: {snippet}", provider=provider or wire) from None


async def read_whole(
    provider: ReadsEvents,
    wire: str,
    body: Any,
    *,
    request_id: str | None = None,
) -> Completed:
    """Read the whole answer `body` of wire format `wire` with `provider`'s stream reader.

    Returns the `Completed` a live stream with this answer ends in; raises what that stream
    would have raised (`ContentFiltered` for a refusal, `StreamInterrupted` for an answer with
    no end), or `InvalidResponse` for a body that is not an answer at all.
    """
    events = events_for(wire, body, provider=provider.name)
    es = WholeBody(events, provider=provider.name, request_id=request_id)
    completed: Completed | None = None
    async with contextlib.aclosing(provider.read_events(es)) as parts:
        async for part in parts:
            if isinstance(part, Completed):
                completed = part
    if completed is None:
        raise es.interrupted("the answer ended without a final message")
    return completed
