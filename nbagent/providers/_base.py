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

Dialect = Literal["anthropic", "openai", "openai-compatible", "gemini", "any"]
"""How a provider takes an output schema natively (`_output_wire`): Anthropic's
`output_config.format`, OpenAI's strict schemas, the schema as it is (another server speaking an
OpenAI format), Gemini's `responseJsonSchema`, or every schema and mode as given (scripted)."""


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool.

    Attributes:
        name: The name it calls the tool by.
        description: What it reads about the tool.
        input_schema: The JSON Schema of the arguments (each provider converts it to its form).
    """

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
    where the API has the flag. `form` is the native form on the Chat format: "json_schema"
    (`response_format: {type: "json_schema", json_schema: {...}}`), or "json_object" with the
    schema beside the type, the one llama-cpp-python's server takes.
    """

    mode: Literal["native", "tool", "prompted"]
    name: str
    schema: dict[str, Any]
    description: str = ""
    strict: bool = False
    form: Literal["json_schema", "json_object"] = "json_schema"


@dataclass(frozen=True)
class ModelRequest:
    """One request for the next assistant message: what a provider turns into its wire format.

    Attributes:
        messages: The conversation so far, oldest first.
        system: The system prompt, or None.
        tools: The tools the model may call.
        max_tokens: The most tokens the answer may have.
        options: Provider-specific body fields, merged into the request as given
            (`Agent(options=...)`: temperature, reasoning settings, ...).
        cache: Whether to mark the stable prefix (system prompt, tools, earlier conversation)
            for the provider's prompt cache, where it has one.
        output: The structured answer asked for (`output=`), or None for free text.
    """

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    options: dict[str, Any] = field(default_factory=dict)
    cache: bool = True
    output: OutputFormat | None = None


@dataclass(frozen=True)
class TextPart:
    """Answer text as it streams from a provider.

    Attributes:
        text: The new text.
    """

    text: str


@dataclass(frozen=True)
class ThinkingPart:
    """Reasoning text as it streams, with the signature that must go back with it.

    Attributes:
        text: The new reasoning text.
        signature: The provider's signature of the reasoning, when this part carries it.
    """

    text: str
    signature: str = ""


@dataclass(frozen=True)
class ToolCallPart:
    """A fragment of a tool call's arguments, by `index`.

    Attributes:
        index: The call's position in the reply.
        call_id: The provider's id of the call, in the part that first carries it.
        name: The tool's name, in the part that first carries it.
        arguments: The next piece of the arguments' JSON text.
    """

    index: int
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Completed:
    """The stream's last part: the whole message, its usage and stop reason, and the ids the
    provider gave it (for the attempt log and traces).

    Attributes:
        message: The assistant message, assembled.
        usage: Its tokens (and cost, once priced).
        stop_reason: Why the model stopped ("end_turn", "tool_use", "max_tokens",
            "stop_sequence", "refusal", ...).
        request_id: The provider's request id, or None.
        model: The model the provider says answered, or None.
        response_id: The provider's id of this reply ("msg_…", "chatcmpl-…", "resp_…").
        headers: The rate-limit headers of the response, for pacing.
        note: What reading the stream had to assume (a server that left a field out), or "".
        status_code: The HTTP status the answer came with (200), or None when it did not come
            over HTTP.
    """

    message: Message
    usage: Usage
    stop_reason: str  # end_turn | tool_use | max_tokens | stop_sequence | refusal ...
    request_id: str | None = None
    model: str | None = None  # the model the provider says answered
    response_id: str | None = None  # the provider's id of this reply (msg_…, chatcmpl-…, resp_…)
    headers: dict[str, str] = field(default_factory=dict)  # rate-limit headers, for pacing
    note: str = ""  # what reading the stream had to assume (a server that left a field out)
    status_code: int | None = None  # the HTTP status the answer came with (None: not over HTTP)


StreamPart = TextPart | ThinkingPart | ToolCallPart | Completed
"""What a provider's stream yields: parts as they come, then one `Completed`."""


@runtime_checkable
class Provider(Protocol):
    """Anything that streams assistant messages: pass one as `Agent(model=...)`.

    The built-in ones speak HTTP (`HTTPProvider`); `ScriptedModel` answers from a script. A
    provider knows its wire format, not policy: it raises the `ProviderError` subclass for what
    went wrong, and the agent decides what to do.

    Attributes:
        name: The provider's name ("anthropic", "openai", "openrouter", "ollama", "demo",
            "scripted").
        model: The model id sent on the wire.
    """

    name: str  # "anthropic", "openai", "openrouter", "ollama", "demo", "scripted"
    model: str  # the model id sent on the wire

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Send `request` and read the answer as it streams.

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            An async iterator of text, thinking and tool-call parts as they arrive, then one
            `Completed`. A failure is raised from it as a `ProviderError` subclass.
        """
        ...

    async def aclose(self) -> None:
        """Close the connections it opened in the running event loop."""
        ...


class ProviderBase:
    """What nbagent's own providers declare beyond `Provider` (a provider of one's own need not
    derive from it): the dialect of its structured outputs, and how an error names them.

    Attributes:
        outputs_named: How an error about a schema its native structured outputs refuse names
            them, when not by its dialect's owner ("Anthropic's structured outputs"); None: so.
        native_outputs: Whether it takes native structured outputs whatever its model id says
            (the demo model); False: its dialect's rule for the model id decides.
    """

    outputs_named: str | None = None
    native_outputs: bool = False

    @property
    def output_dialect(self) -> Dialect | None:
        """How it takes an output schema natively (a format sets its own); None: it has no
        native form, only tool and prompted modes."""
        return None
