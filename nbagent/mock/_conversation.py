"""A neutral view of a chat request, and its token estimate, with what the mock signs in a reply
and checks when the next request sends it back (Gemini's thought signatures, Responses'
encrypted reasoning). The four wire formats' request parsers, which make it, are in
`_request_parsers`; each format's replies and errors are in its wire module (`_gemini_wire`,
...)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..recording._paths import WireFormat

Format = WireFormat
"""The wire format a request speaks (the recordings' table of paths names them)."""
IMAGE_TOKENS = 1000
CHARS_PER_TOKEN = 4
SIGNATURE_STANDIN = "skip_thought_signature_validator"  # Gemini's documented stand-in
ENCRYPTED = "reasoning.encrypted_content"  # Responses' `include` that asks for it
_GEMINI_KEY = b"nbagent-mock-gemini"
_RESPONSES_KEY = b"nbagent-mock-responses"


class RequestError(ValueError):
    """The request body breaks the wire format; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call in the request's history, as the client sent it.

    Attributes:
        id: The call's id.
        name: The tool's name.
        arguments: The arguments' JSON text as the model produced it (may be invalid).
    """

    id: str
    name: str
    arguments: str  # JSON text as the model produced it (may be invalid)


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer in the request's history.

    Attributes:
        tool_use_id: The id of the call it answers.
        content: Its text.
        is_error: Whether it is an error result.
    """

    tool_use_id: str
    content: str
    is_error: bool


Block = Text | ToolUse | ToolResult


@dataclass(frozen=True)
class Turn:
    """One message of the request's history, format-independent.

    Attributes:
        role: "user" or "assistant".
        blocks: Its text, tool calls and tool results, in order.
    """

    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]

    @property
    def text(self) -> str:
        """Its text blocks, one a line."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, Text))

    @property
    def tool_uses(self) -> tuple[ToolUse, ...]:
        """Its tool calls."""
        return tuple(b for b in self.blocks if isinstance(b, ToolUse))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """Its tool results."""
        return tuple(b for b in self.blocks if isinstance(b, ToolResult))


@dataclass(frozen=True)
class Conversation:
    """A request decoded from whichever wire format it came in: what a `Responder` answers.

    Attributes:
        format: The wire format it came in.
        model: The model asked for.
        system: The system prompt ("" for none).
        turns: The history, oldest first.
        tools: The tools the model may call, by name, with their JSON Schemas (all those
            offered, unless Gemini's `allowedFunctionNames` narrows them).
        stream: Whether it asked for a stream.
        include_usage: Whether it asked for usage in the stream (OpenAI's `stream_options`).
        thinking: Whether it asked for reasoning.
        max_tokens: The answer's limit, or None.
        prompt_tokens: The prompt's estimated size (characters / 4, plus images).
        output_schema: The JSON Schema of a native structured answer the request asks for
            (`{"type": "object"}` for JSON mode without one), or None.
        forced_tool: The tool the request forces ("*": any tool), or None.
    """

    format: Format
    model: str
    system: str
    turns: tuple[Turn, ...]
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> JSON schema
    stream: bool = False
    include_usage: bool = False
    thinking: bool = False
    max_tokens: int | None = None
    prompt_tokens: int = 0
    output_schema: dict[str, Any] | None = None  # a native structured answer's JSON Schema
    forced_tool: str | None = None  # the tool the request forces ("*": any), if any


def estimate_tokens(chars: int, images: int = 0) -> int:
    """chars/4 rounded up, plus a flat cost per image.

    Args:
        chars: Characters of text.
        images: How many images.

    Returns:
        The estimate, in tokens.
    """
    return -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- what the mock signs, for the client to send back unchanged ---------------------------------


def _mac(key: bytes, material: str) -> bytes:
    """The HMAC-SHA256 of `material` under `key`."""
    return hmac.new(key, material.encode(), hashlib.sha256).digest()


def sign(name: str, args: Any) -> str:
    """The signature the mock gives a function call: the same call always gets the same one."""
    return sign_text(json.dumps([name, args], sort_keys=True, separators=(",", ":")))


def sign_text(text: str) -> str:
    return base64.b64encode(_mac(_GEMINI_KEY, text)).decode()


def encrypted_for(item_id: str) -> str:
    """The encrypted content the mock gives a reasoning item (verifiable, opaque to clients)."""
    return "gAAAA" + base64.urlsafe_b64encode(_mac(_RESPONSES_KEY, item_id) * 3).decode()
