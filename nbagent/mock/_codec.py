"""What one wire format is to the mock server: a `Codec`, and the SSE framing they share.

Each format is one subclass in its own module (`_anthropic_wire`, `_openai_wire`,
`_responses_wire`, `_gemini_wire`), the one home of what that format says (but how its
requests read, which `_conversation` holds for all four): how a reply streams (``(kind,
bytes)`` pieces: ``head`` before content, ``text`` one text delta, ``body`` other content,
``final`` the ending events, so a fault can break it at the right place) or comes whole, its
error bodies, its mid-stream faults, its request ids and its rate-limit headers. The request
handler itself knows no format.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..recording._paths import WirePath
from ._conversation import _dumps
from ._faults import Fault
from ._ratelimit import RateDecision, ceil_ms, format_seconds
from ._reply import MockReply

if TYPE_CHECKING:
    from ._conversation import Conversation, Format

PieceKind = Literal["head", "text", "body", "final"]
Piece = tuple[PieceKind, bytes]
FRAGMENT_CHARS = 12


Route = WirePath
"""Which wire format and model a request to the mock speaks, read from its path (by the
recordings' one table of paths, `nbagent.recording._paths.wire_path`): what the server answers in,
and what a replay compares with the recording. Its fields: ``format`` ("anthropic", "openai",
"responses", "gemini"), ``model`` (named in the path: Gemini's, else ""), ``stream`` (said in the
path: Gemini's, else None, the body says) and ``azure`` (the path is Azure's, `/openai/...`)."""


def json_or(text: str, fallback: Any) -> Any:
    """`text` parsed as JSON, or `fallback` when it is not JSON (a tool call's arguments may
    be deliberately broken: `[demo:bad_json]`)."""
    try:
        return json.loads(text)
    except ValueError:
        return fallback


def sse_event(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {_dumps(data)}\n\n".encode()


def sse_data(data: Any) -> bytes:
    return f"data: {_dumps(data)}\n\n".encode()


def fragments(arguments: str) -> list[str]:
    """Split tool arguments into streamed fragments."""
    return [arguments[i : i + FRAGMENT_CHARS] for i in range(0, len(arguments), FRAGMENT_CHARS)]


class Codec:
    """One wire format, as the mock server's handler uses it (a subclass per format)."""

    name: Format
    id_header: str | None = "x-request-id"  # the header naming the request id (None: none)
    request_prefix = "req_"
    message_prefix = ""
    default_window = 128_000
    overflow_text = ""  # its context-overflow message, with {tokens} and {maximum}
    statuses: Mapping[int, tuple[Any, ...]] = {}  # status -> its error's words, the message last

    def stream(
        self, reply: MockReply, conv: Conversation, mid: str, azure: bool
    ) -> Iterable[Piece]:
        raise NotImplementedError

    def whole(self, reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(
        self, status: int, message: str, rid: str, param: str | None = None
    ) -> dict[str, Any]:
        """The format's error body for ``status``, saying ``message`` (``param``: the request
        field at fault, where the format names one): the one home of its error shape."""
        raise NotImplementedError

    def status_error(self, status: int, model: str, rid: str, retry: str) -> dict[str, Any]:
        """The error body the provider sends with ``status`` (``retry``: its wait, said): the
        message its `statuses` table has for it (500's for a status it lacks)."""
        message = self.statuses.get(status, self.statuses[500])[-1]
        return self.error_body(status, message.format(model=model, retry=retry), rid)

    def quota_error(self, rid: str, model: str) -> dict[str, Any]:
        raise NotImplementedError

    def overflow_error(self, tokens: int, maximum: int, rid: str) -> dict[str, Any]:
        """The real context-overflow error of the format, with the numbers in it."""
        return self.error_body(400, self.overflow_text.format(tokens=tokens, maximum=maximum), rid)

    def not_found(self, path: str, rid: str) -> dict[str, Any]:
        return self.error_body(404, f"Not Found: {path}", rid)

    def midstream_error(self, mid: str) -> bytes:
        raise NotImplementedError

    def malformed(self, mid: str) -> bytes:
        raise NotImplementedError

    def unreasoned_end(self, reply: MockReply | None) -> bytes:
        """The end marker with no finish reason before it: after the usage report of `reply`
        (Snowflake Cortex), or alone (None: llama-cpp-python's cut stream); b"" for a format
        whose ending events say how it ended, or that has no end marker."""
        return b""

    def rate_headers(self, decision: RateDecision) -> dict[str, str]:
        return {}

    def retry_headers(self, seconds: float) -> dict[str, str]:
        """How the format says its wait (a Retry-After header, unless the body says it)."""
        return {"retry-after": format_seconds(seconds), "retry-after-ms": str(ceil_ms(seconds))}

    def http_status(self, status: int) -> int:
        """The status a fault answers with."""
        return status

    def fault_error(
        self, fault: Fault, model: str, rid: str, tokens: int = 0, window: int | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The status and error body of a fault that is an HTTP error (``tokens``: the
        prompt's estimate; ``window``: the context window, None for the format's own)."""
        status = fault.status or (529 if fault.kind == "overloaded_midstream" else 500)
        if fault.kind == "quota":
            return self.http_status(429), self.quota_error(rid, model)
        if fault.kind == "overflow":
            maximum = window or self.default_window
            error = self.overflow_error(max(tokens, maximum + 1 + tokens), maximum, rid)
            error["error"]["message"] += " (simulated: an injected fault, not the prompt's size)"
            return 400, error
        retry = format_seconds(fault.retry_after_s or 0.0)
        return self.http_status(status), self.status_error(status, model, rid, retry)

    def new_request_id(self) -> str:
        return self.request_prefix + uuid.uuid4().hex[:24]

    def message_id(self, request_id: str) -> str:
        return self.message_prefix + request_id.split("_")[-1][-24:]
