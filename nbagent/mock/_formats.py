"""The wire formats the mock server speaks, found by path as the real APIs do, each as a `Codec`.

| path | format |
|---|---|
| `.../messages` | Anthropic Messages |
| `.../chat/completions` (Azure's `/openai/deployments/{d}/...`, `/openai/v1/...`) | OpenAI Chat |
| `.../responses` (also Azure's) | OpenAI Responses |
| `/v1beta/models/{model}:streamGenerateContent` (`?alt=sse`), `:generateContent` | Gemini |

A `Codec` holds what the request handler needs of a format: parsing the request, encoding a reply
(streamed or whole), its error bodies, its mid-stream faults, its request ids and rate-limit
headers. The handler itself knows no format.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import _gemini_wire as gemini
from . import _responses_wire as responses
from . import _wire as wire
from ._conversation import Conversation, Format, parse_anthropic, parse_openai
from ._faults import Fault
from ._ratelimit import (
    RateDecision,
    anthropic_headers,
    format_seconds,
    openai_headers,
    retry_after_headers,
)
from ._reply import MockReply
from ._responses_wire import parse_responses

__all__ = ["CODECS", "Codec", "Route", "parse_request", "route"]

Piece = tuple[str, bytes]


@dataclass(frozen=True)
class Route:
    """Which wire format and model a request to the mock speaks, read from its path and body:
    what the server answers in, and what a replay compares with the recording.

    Attributes:
        format: The wire format ("anthropic", "openai", "responses", "gemini").
        model: The model named in the path (Gemini), else "".
        stream: Whether the path asks for a stream (Gemini), else None (the body says).
        azure: Whether the path is Azure's (`/openai/...`).
    """

    format: Format
    model: str = ""  # Gemini names the model in the path
    stream: bool | None = None  # Gemini says it in the path; the others in the body
    azure: bool = False


def route(path: str) -> Route | None:
    """The format a POST to `path` speaks, or None (a 404).

    Args:
        path: The request's path and query.

    Returns:
        The route, or None for a path the mock does not serve (it answers 404).
    """
    bare, _, query = path.partition("?")
    for codec in CODECS.values():
        match = re.fullmatch(codec.pattern, bare)
        if match is not None:
            found = match.groupdict()
            if "model" not in found:
                return Route(codec.name, azure=bare.startswith("/openai/"))
            streamed = found["method"] == "streamGenerateContent" and "alt=sse" in query
            return Route(codec.name, model=found["model"], stream=streamed)
    return None


def parse_request(fmt: Format, body: Any, route_: Route | None = None) -> Conversation:
    """The neutral conversation of a request body in format `fmt`.

    Args:
        fmt: The wire format.
        body: The decoded JSON body.
        route_: The route (for Gemini's model and streaming, named in the path).

    Returns:
        The conversation.
    """
    return CODECS[fmt].parse(body, route_ or Route(fmt, model=fmt, stream=True))


@dataclass(frozen=True)
class Codec:
    """One wire format, as the mock server's handler uses it."""

    name: Format
    pattern: str  # its model endpoint's path (a regular expression the whole path matches)
    parse: Callable[[Any, Route], Conversation]  # a request body, as a conversation
    id_header: str | None  # the header naming the request id (Gemini's answers name none)
    request_prefix: str
    message_prefix: str
    default_window: int
    stream: Callable[[MockReply, Conversation, str, bool], Iterable[Piece]]
    whole: Callable[[MockReply, Conversation, str], dict[str, Any]]
    status_error: Callable[[int, str, str, str], dict[str, Any]]  # status, model, rid, retry
    quota_error: Callable[[str, str], dict[str, Any]]  # rid, model
    overflow_error: Callable[[int, int, str], dict[str, Any]]
    bad_request: Callable[[str, str, str | None], dict[str, Any]]
    internal_error: Callable[[str, str], dict[str, Any]]
    not_found: Callable[[str, str], dict[str, Any]]
    midstream_error: Callable[[str], bytes]  # message id
    malformed: Callable[[str], bytes]
    # the end marker with no finish reason before it: after the usage report of the reply
    # given (Snowflake Cortex), or alone (None: llama-cpp-python's cut stream)
    unreasoned_end: Callable[[MockReply | None], bytes]
    rate_headers: Callable[[RateDecision], dict[str, str]]
    retry_headers: Callable[[float], dict[str, str]]  # how the format says its wait

    def http_status(self, status: int) -> int:
        """The status a fault answers with (Gemini says overload with 503, not 529)."""
        return 503 if self.name == "gemini" and status == 529 else status

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


def _none(_: Any) -> dict[str, str]:
    return {}


def _anthropic_stream(reply: MockReply, conv: Conversation, mid: str, _: bool) -> Iterable[Piece]:
    return wire.anthropic_stream(reply, model=conv.model, message_id=mid)


def _openai_stream(reply: MockReply, conv: Conversation, mid: str, azure: bool) -> Iterable[Piece]:
    return wire.openai_stream(
        reply,
        model=conv.model,
        completion_id=mid,
        created=int(time.time()),
        include_usage=conv.include_usage,
        azure=azure,
    )


def _openai_whole(reply: MockReply, conv: Conversation, mid: str) -> dict[str, Any]:
    return wire.openai_completion(
        reply, model=conv.model, completion_id=mid, created=int(time.time())
    )


def _fmt_codec(
    fmt: Format,
    stream: Any,
    whole: Any,
    window: int,
    id_header: str,
    prefixes: tuple[str, str],
    faults: tuple[Any, Any, Any],  # its midstream error, its malformed piece, its unreasoned end
) -> Codec:
    """Anthropic, OpenAI Chat and Responses share `_wire`'s error bodies (by format)."""
    errors: Format = "anthropic" if fmt == "anthropic" else "openai"
    path = {"anthropic": "messages", "openai": "chat/completions", "responses": "responses"}[fmt]
    parsers = {"anthropic": parse_anthropic, "openai": parse_openai, "responses": parse_responses}
    return Codec(
        name=fmt,
        pattern=rf".*/{path}/?",
        parse=lambda body, _route: parsers[fmt](body),
        id_header=id_header,
        request_prefix=prefixes[0],
        message_prefix=prefixes[1],
        default_window=window,
        stream=stream,
        whole=whole,
        status_error=lambda s, m, rid, retry: wire.status_error(
            errors, s, model=m, request_id=rid, retry=retry
        ),
        quota_error=lambda rid, _m: wire.quota_error(errors, rid),
        overflow_error=lambda t, mx, rid: wire.overflow_error(errors, t, mx, rid),
        bad_request=lambda msg, rid, param: wire.bad_request(errors, msg, rid, param),
        internal_error=lambda msg, rid: wire.internal_error(errors, msg, rid),
        not_found=lambda path, rid: wire.not_found(errors, path, rid),
        midstream_error=faults[0],
        malformed=faults[1],
        unreasoned_end=faults[2],
        rate_headers=anthropic_headers if fmt == "anthropic" else openai_headers,
        retry_headers=retry_after_headers,
    )


def _gemini_codec() -> Codec:
    return Codec(
        name="gemini",
        pattern=r".*/models/(?P<model>.+):(?P<method>streamGenerateContent|generateContent)",
        parse=lambda body, r: gemini.parse_gemini(body, r.model, stream=bool(r.stream)),
        id_header=None,
        request_prefix="gem_",
        message_prefix="",
        default_window=1_048_576,
        stream=lambda reply, conv, mid, _az: gemini.gemini_stream(
            reply, model=conv.model, response_id=mid
        ),
        whole=lambda reply, conv, mid: gemini.gemini_whole(
            reply, model=conv.model, response_id=mid
        ),
        status_error=lambda s, m, _rid, retry: gemini.status_error(s, m, retry),
        quota_error=lambda _rid, m: gemini.per_day_quota(m),
        overflow_error=lambda t, mx, _rid: gemini.overflow_error(t, mx),
        bad_request=lambda msg, _rid, _p: gemini.gemini_error(400, msg),
        internal_error=lambda msg, _rid: gemini.gemini_error(500, msg),
        not_found=lambda path, _rid: gemini.gemini_error(404, f"Not Found: {path}"),
        midstream_error=lambda _mid: gemini.gemini_midstream_error(),
        malformed=lambda _mid: gemini.gemini_malformed(),
        unreasoned_end=lambda _reply: b"",  # no end marker: the end of the body is the end
        rate_headers=_none,
        retry_headers=_none,  # Gemini's wait is in the body (RetryInfo), not a header
    )


CODECS: dict[Format, Codec] = {
    "anthropic": _fmt_codec(
        "anthropic",
        _anthropic_stream,
        lambda reply, conv, mid: wire.anthropic_message(reply, model=conv.model, message_id=mid),
        200_000,
        "request-id",
        ("req_011", "msg_"),
        (
            lambda _mid: wire.anthropic_midstream_error(),
            lambda _mid: wire.anthropic_malformed(),
            wire.anthropic_unreasoned_end,
        ),
    ),
    "openai": _fmt_codec(
        "openai",
        _openai_stream,
        _openai_whole,
        128_000,
        "x-request-id",
        ("req_", "chatcmpl-"),
        (
            lambda _mid: wire.openai_midstream_error(),
            wire.openai_malformed,
            wire.openai_unreasoned_end,
        ),
    ),
    "responses": _fmt_codec(
        "responses",
        lambda reply, conv, mid, _az: responses.responses_stream(reply, conv, mid),
        lambda reply, conv, mid: responses.responses_whole(reply, conv, mid),
        128_000,
        "x-request-id",
        ("req_", "resp_"),
        (
            responses.responses_midstream_error,
            lambda _mid: responses.responses_malformed(),
            lambda _reply: b"",  # the Responses API's end events say how it ended
        ),
    ),
    "gemini": _gemini_codec(),
}
