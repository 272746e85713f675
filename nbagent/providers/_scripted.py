"""A scripted model: replies, tool calls and faults per attempt, with no network.

Each request the agent makes takes the next entry of the script:

- a `str` is a text reply; a `Reply` gives text, thinking, tool calls, stop reason and usage;
- an exception instance is raised when the attempt starts (`fault("429", retry_after=2)` builds
  one from a short spec);
- a `Partial` streams some text or thinking, then raises its error (a stream that broke);
- a callable receives the `ModelRequest` and returns any of the above.

Running out of script raises `ScriptExhausted`, its own error, so a test that expected fewer
requests fails loudly instead of hanging or inventing replies.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import errors
from .._core._budget import Usage
from .._core._messages import Block, Message, TextBlock, ThinkingBlock, ToolUseBlock
from ..errors import ContextOverflow, ProviderError, ScriptExhausted, set_provider_label
from ._base import (
    Completed,
    Dialect,
    ModelRequest,
    ProviderBase,
    StreamPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from ._error_text import ANTHROPIC_TYPE_STATUS
from ._http_errors import status_class
from ._parts import decode_arguments

set_provider_label("scripted", "Scripted model")


@dataclass(frozen=True)
class ToolUse:
    """A tool call a `Reply` makes.

    Attributes:
        name: The tool to call.
        input: The arguments; text is sent as raw (possibly broken) JSON, to test the
            bad-arguments path.
        id: The call's id; None for one made up ("toolu_001_0").
    """

    name: str
    input: dict[str, Any] | str = field(default_factory=dict)  # a str is sent as raw JSON text
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted answer of a `ScriptedModel`: text, tool calls, thinking, a stop reason and
    its usage. A plain string in a script is `Reply(text=...)`.

    Attributes:
        text: The answer's text.
        tool_calls: The tool calls it makes, in order.
        thinking: Reasoning streamed before the text ("" for none).
        signature: The thinking's signature.
        stop_reason: The stop reason; None for "tool_use" when it calls tools, else "end_turn".
        input_tokens: The usage it reports for the prompt.
        output_tokens: The usage it reports for the answer.
    """

    text: str = ""
    tool_calls: tuple[ToolUse, ...] | list[ToolUse] = ()
    thinking: str = ""
    signature: str = "sig"
    stop_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5


@dataclass(frozen=True)
class Partial:
    """Stream `thinking`, then `text`, then fail with `error`: a stream that breaks mid-answer.

    Attributes:
        error: What the stream fails with (a `fault(...)`, say).
        text: The answer text streamed before it fails.
        thinking: The reasoning streamed before it fails.
    """

    error: BaseException
    text: str = ""
    thinking: str = ""


Entry = str | Reply | Partial | BaseException | Callable[[ModelRequest], Any]
"""One step of a `ScriptedModel`'s script: a reply's text, a `Reply`, a `Partial`, an error to
raise (a `fault(...)`), or a function of the request that returns one of those."""

# A fault named by an HTTP status is the error that status reads as, its code the Anthropic
# error type of the status (or, for a status it has none for, the status's words)
_CODES = {s: kind for kind, s in ANTHROPIC_TYPE_STATUS.items() if s not in (402, 413)}
_CODES.update({502: "bad_gateway", 503: "service_unavailable", 408: "request_timeout"})
_FAULTS: dict[str, tuple[type[ProviderError], int | None, str]] = {
    **{str(s): (status_class(s), s, code) for s, code in _CODES.items()},
    "quota": (errors.QuotaExceeded, 429, "insufficient_quota"),
    "overflow": (errors.ContextOverflow, 400, "invalid_request_error"),
    "transport": (errors.TransportError, None, "connect_error"),
    "stream": (errors.StreamInterrupted, None, "stream_interrupted"),
    "empty": (errors.EmptyResponse, 200, "empty"),
    "invalid": (errors.InvalidResponse, 200, "invalid"),
    "filtered": (errors.ContentFiltered, 200, "content_filter"),
}


def fault(
    kind: str,
    *,
    retry_after: float | None = None,
    message: str | None = None,
    provider: str = "scripted",
    should_retry: bool | None = None,
) -> ProviderError:
    """A provider error from a short name, for scripts and tests.

    Args:
        kind: "429", "quota", "529", "500", "502", "503", "504", "408", "401", "403", "404",
            "400", "overflow", "transport", "stream", "empty", "invalid" or "filtered".
        retry_after: The server's wish in seconds, as if parsed from Retry-After.
        message: The error's message; None for a made-up one.
        provider: The provider's name on the error.
        should_retry: An `x-should-retry` verdict to carry (it overrides the table).

    Returns:
        The error of the class that kind maps to (`RateLimited`, `Overloaded`, ...), with the
        status code and error code a real provider would send.

    Raises:
        ValueError: `kind` is not one of the names above.
    """
    try:
        cls, status, code = _FAULTS[kind]
    except KeyError:
        known = ", ".join(_FAULTS)
        raise ValueError(f"unknown fault {kind!r}; known faults: {known}") from None
    text = message or f"scripted {kind}"
    extra: dict[str, Any] = {}
    if cls is ContextOverflow and message is None:  # as Anthropic says it, with its numbers
        text = "prompt is too long: 250000 tokens > 200000 maximum"
        extra = {"tokens": 250000, "limit": 200000}
    return cls(
        text,
        provider=provider,
        status_code=status,
        code=code,
        retry_after=retry_after,
        request_id=f"req_scripted_{kind}",
        should_retry=should_retry,
        **extra,
    )


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


class ScriptedModel(ProviderBase):
    """A `Provider` that plays a script: replies, tool calls, broken streams and faults, with
    no network, for tests and teaching.

    With `output=` it takes every output mode (`auto` is native): the script's text is the
    structured answer, or a `ToolUse("final_answer", ...)` in tool mode.

    Args:
        script: The entries, one per request, in order.
        name: The provider's name (in the attempt log).
        model: The model id it reports.
        chunk_size: How many characters each streamed text part holds.

    Attributes:
        name: The provider's name.
        model: The model id.
        script: The entries not yet played.
        requests: Every request it was sent, in order: what a test asserts on.
        chunk_size: Characters per streamed part.
        closed: Whether `aclose` was called.
        output_dialect: "any": it takes every schema and every output mode as given.
    """

    output_dialect: Dialect = "any"

    def __init__(
        self,
        script: Iterable[Entry] = (),
        *,
        name: str = "scripted",
        model: str = "scripted-model",
        chunk_size: int = 4,
    ) -> None:
        self.name = name
        self.model = model
        self.script: list[Entry] = list(script)
        self.requests: list[ModelRequest] = []
        self.chunk_size = max(1, chunk_size)
        self._calls = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"ScriptedModel(model={self.model!r}, remaining={len(self.script)})"

    def add(self, *entries: Entry) -> None:
        """Append entries to the script.

        Args:
            *entries: The entries, played after those already there.
        """
        self.script.extend(entries)

    @property
    def remaining(self) -> int:
        """How many entries are left."""
        return len(self.script)

    async def aclose(self) -> None:
        """Mark it closed (there are no connections)."""
        self.closed = True

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Play the next entry for `request`.

        Args:
            request: The request (recorded in `requests`).

        Yields:
            The entry's thinking and text in `chunk_size` pieces and its tool calls, then a
            `Completed`.

        Raises:
            ScriptExhausted: The script has no entry left.
            TypeError: An entry (or what a function entry returned) cannot be played.
        """
        self.requests.append(request)
        if not self.script:
            raise ScriptExhausted(
                f"ScriptedModel {self.model!r} has no reply left for request "
                f"{len(self.requests)}; add more entries to its script"
            )
        entry: Any = self.script.pop(0)
        while callable(entry) and not isinstance(entry, (BaseException, type)):
            entry = entry(request)
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, Partial):
            for piece in _chunks(entry.thinking, self.chunk_size):
                yield ThinkingPart(piece)
            for piece in _chunks(entry.text, self.chunk_size):
                yield TextPart(piece)
            raise entry.error
        reply = Reply(text=entry) if isinstance(entry, str) else entry
        if not isinstance(reply, Reply):
            raise TypeError(f"cannot play script entry {entry!r}")
        self._calls += 1
        blocks: list[Block] = []
        if reply.thinking:
            for piece in _chunks(reply.thinking, self.chunk_size):
                yield ThinkingPart(piece)
            yield ThinkingPart("", reply.signature)
            blocks.append(ThinkingBlock(reply.thinking, reply.signature))
        if reply.text:
            for piece in _chunks(reply.text, self.chunk_size):
                yield TextPart(piece)
            blocks.append(TextBlock(reply.text))
        for i, call in enumerate(reply.tool_calls):
            call_id = call.id or f"toolu_{self._calls:03d}_{i}"
            raw = call.input if isinstance(call.input, str) else json.dumps(call.input)
            yield ToolCallPart(i, call_id, call.name, raw)
            args, rest = decode_arguments(raw)  # read as a provider reads streamed arguments
            blocks.append(ToolUseBlock(call_id, call.name, args, rest))
        stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
        yield Completed(
            Message("assistant", tuple(blocks)),
            Usage(reply.input_tokens, reply.output_tokens, cost_usd=0.0, requests=1),
            stop,
            request_id=f"req_scripted_{len(self.requests)}",
            model=self.model,
            response_id=f"msg_scripted_{self._calls}",
        )
