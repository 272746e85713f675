"""The one seam between how bytes move and what they mean.

A provider turns a `ModelRequest` into a stream of parts: deltas as they arrive, then exactly
one `Completed` carrying the whole assistant message. A stream that ends without `Completed`
is broken; providers raise `StreamInterrupted` (or another `ProviderError`) for it. Providers
know wire formats, not policy: they never retry, sleep or decide anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .._core._budget import Usage
from .._core._messages import Message

__all__ = [
    "Completed",
    "ModelRequest",
    "OutputFormat",
    "Provider",
    "StreamPart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolSpec",
]


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class OutputFormat:
    """The shape the answer must have, as the request carries it to the provider.

    `mode` "native": the provider's own constrained decoding (each wire format puts `schema`
    where its API documents it); "tool": the output tool `name` is among the request's tools and
    the provider forces a tool call (naming it when it is the only tool); "prompted": the schema
    is already in the system prompt, nothing goes on the wire. `schema` is in the provider's
    dialect already (`providers._output_wire.wire_schema`); `strict` asks for strict adherence
    where the API has the flag.
    """

    mode: Literal["native", "tool", "prompted"]
    name: str
    schema: dict[str, Any]
    description: str = ""
    strict: bool = False


@dataclass(frozen=True)
class ModelRequest:
    """One request for the next assistant message. `cache`: mark the stable prefix (system
    prompt, tools, earlier conversation) for the provider's prompt cache where it has one.
    `output`: the structured answer asked for (`output=`), or None for free text."""

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    options: dict[str, Any] = field(default_factory=dict)
    cache: bool = True
    output: OutputFormat | None = None


@dataclass(frozen=True)
class TextPart:
    """Answer text as it streams from a provider."""

    text: str


@dataclass(frozen=True)
class ThinkingPart:
    """Reasoning text as it streams, with the signature that must go back with it."""

    text: str
    signature: str = ""


@dataclass(frozen=True)
class ToolCallPart:
    """A fragment of a tool call's arguments, by `index`."""

    index: int
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Completed:
    """The stream's last part: the whole message, its usage and stop reason, and the ids the
    provider gave it (for the attempt log and traces)."""

    message: Message
    usage: Usage
    stop_reason: str  # end_turn | tool_use | max_tokens | stop_sequence | refusal ...
    request_id: str | None = None
    model: str | None = None  # the model the provider says answered
    response_id: str | None = None  # the provider's id of this reply (msg_…, chatcmpl-…, resp_…)
    headers: dict[str, str] = field(default_factory=dict)  # rate-limit headers, for pacing
    note: str = ""  # what reading the stream had to assume (a server that left a field out)


StreamPart = TextPart | ThinkingPart | ToolCallPart | Completed
"""What a provider's stream yields: parts as they come, then one `Completed`."""


@runtime_checkable
class Provider(Protocol):
    """Anything that streams assistant messages."""

    name: str  # "anthropic", "openai", "openrouter", "ollama", "demo", "scripted"
    model: str  # the model id sent on the wire

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]: ...

    async def aclose(self) -> None: ...
