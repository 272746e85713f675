"""The Anthropic Messages API, streamed (`POST {base_url}/v1/messages`, `stream: true`).

Also the wire format of the embedded `demo` model (the loopback mock server speaks it).

Stop reasons: `model_context_window_exceeded` means the context is full, so it raises
`ContextOverflow` (compact, then retry) rather than taking the max_tokens path, which would resend
the same oversized context; `pause_turn` (the server paused a long turn) is reported as the
`Completed` stop reason `"pause_turn"` for the loop to send the reply back and continue;
`refusal` is `ContentFiltered`. `redacted_thinking` blocks are kept (`RedactedThinkingBlock`) and
sent back unchanged, as are blocks of kinds nbagent does not model (a server tool's
`server_tool_use` and its `web_search_tool_result`, kept whole as `OpaqueBlock`s), which a paused
turn must send back to be continued.

Prompt caching (`ModelRequest.cache`, on by default): cache breakpoints (`cache_control`) on the
system prompt, the last tool and the conversation's stable prefix: the last block of the last
message (what the next request will start with) and the block where the previous request put its
own (so a turn that adds many blocks still reads the cache). Four at most, as the API allows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._core._messages import (
    Block,
    ImageBlock,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ._anthropic_batch import AnthropicBatches
from ._anthropic_events import ANTHROPIC, MessageReading
from ._base import Dialect, ModelRequest
from ._http import HTTPProvider
from ._output_wire import add_anthropic_output
from ._whole_body import NotAnAnswer, WholeEvents

ANTHROPIC_VERSION = "2023-06-01"


CACHE_CONTROL: dict[str, Any] = {"type": "ephemeral"}
# Blocks that may carry a cache breakpoint (thinking blocks may not).
_CACHEABLE = frozenset({"text", "image", "tool_use", "tool_result"})
# Keys of the request body that come from ModelRequest, not from options.
_RESERVED = frozenset({"model", "messages", "system", "tools", "stream"})


# -- serialisation ---------------------------------------------------------------------------


def _image(block: ImageBlock) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.media_type, "data": block.data},
    }


def _block(block: Block) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ThinkingBlock):
        # Anthropic accepts thinking back only with its signature; unsigned thinking (from
        # another provider) is dropped.
        if not block.signature:
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, OpaqueBlock):
        # a server tool's call or result goes back as it came; other providers' state does not
        return dict(block.data) if block.provider == ANTHROPIC else None
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    content = _content(block.content)  # a tool result's text and images, as a message's
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    if content:
        out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _content(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    return [d for d in (_block(b) for b in blocks) if d is not None]


def _mark_last_cacheable(content: list[dict[str, Any]]) -> bool:
    for block in reversed(content):
        if block.get("type") in _CACHEABLE:
            block["cache_control"] = dict(CACHE_CONTROL)
            return True
    return False


def _cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark the stable prefix for Anthropic's prompt cache (see the module docstring)."""
    if isinstance(body.get("system"), str):
        body["system"] = [
            {"type": "text", "text": body["system"], "cache_control": dict(CACHE_CONTROL)}
        ]
    tools = body.get("tools")
    if tools:
        tools[-1]["cache_control"] = dict(CACHE_CONTROL)
    messages = body["messages"]
    # the last message (the next request starts with everything up to it), and the one the
    # previous request of this conversation ended with (two messages earlier: assistant + results)
    for index in (len(messages) - 1, len(messages) - 3):
        if index >= 0:
            _mark_last_cacheable(messages[index]["content"])


# -- the provider ---------------------------------------------------------------------------------


class AnthropicProvider(HTTPProvider):
    """Streams Claude models through the Messages API ("anthropic:..." model strings).

    Attributes:
        default_base_url: https://api.anthropic.com, when no `base_url` is given.
        default_name: "anthropic", in model strings and the attempt log.
        output_dialect: The schema dialect of its structured outputs ("anthropic":
            `output_config.format`, with the keywords it does not take moved into descriptions).
        stream_markers: What the events that end its answers hold (for a watcher).
    """

    default_base_url = "https://api.anthropic.com"
    default_name = "anthropic"
    output_dialect: Dialect = "anthropic"  # structured outputs: output_config.format (_output_wire)
    stream_markers = (b"message_start", b"message_delta", b"message_stop", b"error")
    _batch_class = AnthropicBatches
    _reading = MessageReading

    # the API under base_url, where the messages and the message batches are: {base_url}/v1
    # (base_url itself when it ends in /v1); the endpoint {base_url}/v1/messages
    _versions, _path = ("/v1",), "/messages"

    auth_header, auth_prefix = "x-api-key", ""

    def _headers(self) -> dict[str, str]:
        return {**super()._headers(), "anthropic-version": ANTHROPIC_VERSION}

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this wire format sends for `request` (the Messages API).

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            The body, before encoding: `model`, `messages`, `max_tokens` and `stream`, with
            `system`, `tools`, the output format and prompt-cache marks where the request has
            them.
        """
        body: dict[str, Any] = {k: v for k, v in request.options.items() if k not in _RESERVED}
        body.setdefault("max_tokens", request.max_tokens)
        body["model"] = self.model
        body["messages"] = [
            {"role": m.role, "content": _content(m.blocks)} for m in request.messages
        ]
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        add_anthropic_output(body, request.output)
        if request.cache:
            _cache_breakpoints(body)
        body["stream"] = True
        return body

    def whole_events(self, message: dict[str, Any]) -> WholeEvents:
        """A Messages `message` as `message_start`, a start per content block, `message_delta`
        (its stop reason) and `message_stop`; the usage rides on `message_start` whole.

        Args:
            message: The whole Messages answer.

        Returns:
            The events, each (event name, its data).

        Raises:
            NotAnAnswer: `message` has no content list.
        """
        content = message.get("content")
        if not isinstance(content, list):
            raise NotAnAnswer("a message without a content list")
        head = {k: message[k] for k in ("id", "model", "usage") if k in message}
        out: WholeEvents = [("message_start", {"type": "message_start", "message": head})]
        for i, block in enumerate(content):
            start = {"type": "content_block_start", "index": i, "content_block": block}
            out.append(("content_block_start", start))
            out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        delta = {k: message.get(k) for k in ("stop_reason", "stop_sequence")}
        out.append(("message_delta", {"type": "message_delta", "delta": delta}))
        out.append(("message_stop", {"type": "message_stop"}))
        return out
