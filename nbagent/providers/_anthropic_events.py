"""Reading a Messages stream: one handler per event type, over the answer's state so far.

`MessageReading` keeps what the events of one answer have said (its blocks in order, the usage,
the stop reason) and `read` hands each event to the method of its type: `message_start`,
`content_block_start`, `content_block_delta`, `message_delta` (a text delta, nearly every event,
on a fast path of its own), and `result` is the message they made. `StreamEnds.read_events`
drives it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._core._budget import Usage
from .._core._messages import (
    Block,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ..errors import ContentFiltered, ContextOverflow
from ._base import StreamPart, TextPart, ThinkingPart, ToolCallPart
from ._parts import PartBuffer, decode_arguments, whole_number
from ._sse import ServerSentEvent
from ._stream_ends import ErrorEvent, Reading, Refused

ANTHROPIC = "anthropic"  # the provider name on the blocks it keeps whole

# The stop reasons an answer ends with as they are; any other is read as end_turn.
_STOP_REASONS = frozenset(
    {"end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"}
)
Handler = Callable[["MessageReading", ServerSentEvent, dict[str, Any]], None]
_USAGE = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read"),
    ("cache_creation_input_tokens", "cache_write"),
)


@dataclass
class _BlockState:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    tool_id: str = ""
    tool_name: str = ""
    tool_index: int = -1
    raw: dict[str, Any] | None = None  # a block of a kind nbagent does not model, as it came

    def grow(self, piece: Any, buf: PartBuffer, part: Callable[[str], StreamPart]) -> None:
        """Add a streamed piece of the block's text (if it is text) and hand it on as `part`."""
        if isinstance(piece, str) and piece:
            self.text.append(piece)
            buf.add(part(piece))

    def finish(self) -> Block | None:
        if self.raw is not None:
            block = dict(self.raw)
            if self.text:  # a server tool's input, streamed like a tool call's
                args, raw = decode_arguments("".join(self.text))
                block["input"] = args if raw is None else raw
            return OpaqueBlock(ANTHROPIC, block)
        if self.kind == "redacted_thinking":
            return RedactedThinkingBlock("".join(self.text))
        if self.kind == "text":
            text = "".join(self.text)
            return TextBlock(text) if text else None
        if self.kind == "thinking":
            return ThinkingBlock("".join(self.text), "".join(self.signature))
        if self.kind == "tool_use":
            args, raw = decode_arguments("".join(self.text))
            return ToolUseBlock(self.tool_id, self.tool_name, args, raw)
        return None


@dataclass
class MessageReading(Reading):
    """What one answer's events have said so far (`ended`: message_stop came; `reported`:
    message_delta reported usage). Its `input_tokens` are the uncached ones, as the Messages
    API counts them; `usage` adds the cache's reads and writes, as the other formats' totals
    do."""

    blocks: dict[int, _BlockState] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    tool_calls: int = 0
    handlers: ClassVar[dict[str, Handler]]
    MARKERS = ("message_stop", "stop_reason")

    def read(self, event: ServerSentEvent) -> None:
        if event.event == "ping":
            return
        data = self.es.json(event)
        kind = data.get("type", event.event)
        if kind == "content_block_delta":  # nearly every event: a text delta
            delta = data.get("delta")
            fast = self.blocks.get(data.get("index"))  # type: ignore[arg-type]
            if fast is not None and type(delta) is dict and delta.get("type") == "text_delta":
                text = delta.get("text")
                if type(text) is str and text:
                    fast.text.append(text)
                    self.buf.text(text)
                return
        if kind == "error" or event.event == "error":
            raise ErrorEvent(data)
        if kind == "message_stop":
            self.ended = True
            return
        handler = self.handlers.get(kind)  # content_block_stop, unknown types: none
        if handler is not None:
            handler(self, event, data)

    def result(self) -> tuple[list[Block], str, str]:
        blocks, stop_reason = self.blocks, self.finish
        if stop_reason == "model_context_window_exceeded":
            usage = self.usage()
            raise Refused(
                ContextOverflow,
                "the conversation filled the model's context window "
                "(stop_reason: model_context_window_exceeded)",
                code="model_context_window_exceeded",
                tokens=usage.input_tokens + usage.output_tokens,
            )
        if stop_reason == "refusal":
            said = "".join("".join(b.text) for b in blocks.values() if b.kind == "text").strip()
            raise Refused(
                ContentFiltered,
                "the model refused to answer (stop_reason: refusal)"
                + (f": {said[:500]}" if said else ""),
                code="refusal",
            )
        out = [b for b in (blocks[i].finish() for i in self.order) if b is not None]
        note = ""
        if stop_reason is None:  # usage, message_stop and a clean end (a cut one failed: end)
            note = "the stream ended with message_stop but no stop_reason; read as end_turn"
        return out, stop_reason if stop_reason in _STOP_REASONS else "end_turn", note

    def usage(self) -> Usage:
        counted = self.input_tokens + self.cache_read + self.cache_write
        return dataclasses.replace(super().usage(), input_tokens=counted)

    def message_start(self, event: ServerSentEvent, data: dict[str, Any]) -> None:
        msg = data.get("message")
        if not isinstance(msg, dict):
            return
        self.named(msg.get("model"), msg.get("id"))
        usage = msg.get("usage")
        if isinstance(usage, dict):
            for key, attr in _USAGE:
                setattr(self, attr, whole_number(usage.get(key)) or 0)

    def block_start(self, event: ServerSentEvent, data: dict[str, Any]) -> None:
        index = data.get("index")
        cb = data.get("content_block")
        if not isinstance(index, int) or not isinstance(cb, dict):
            raise self.es.bad_data(event, "content_block_start without index or block")
        btype = cb.get("type")
        state = _BlockState(kind=str(btype))
        buf = self.buf
        if btype == "text":
            state.grow(cb.get("text"), buf, TextPart)
        elif btype == "thinking":
            state.grow(cb.get("thinking"), buf, ThinkingPart)
            sig = cb.get("signature")
            if isinstance(sig, str) and sig:
                state.signature.append(sig)
        elif btype == "redacted_thinking":
            if isinstance(cb.get("data"), str):
                state.text.append(cb["data"])
        elif btype == "tool_use":
            state.tool_id = str(cb.get("id") or f"toolu_{index}")
            state.tool_name = str(cb.get("name") or "")
            state.tool_index = self.tool_calls
            self.tool_calls += 1
            initial = cb.get("input")
            if isinstance(initial, dict) and initial:
                state.text.append(json.dumps(initial))
            buf.add(ToolCallPart(state.tool_index, state.tool_id, state.tool_name, ""))
        else:
            state.raw = dict(cb)  # server tools and their results: kept whole
        if index not in self.blocks:
            self.order.append(index)
        self.blocks[index] = state

    def block_delta(self, event: ServerSentEvent, data: dict[str, Any]) -> None:
        index = data.get("index")
        delta = data.get("delta")
        state = self.blocks.get(index) if isinstance(index, int) else None
        if state is None or not isinstance(delta, dict):
            raise self.es.bad_data(event, "delta for a content block that never started")
        dtype = delta.get("type")
        buf = self.buf
        if dtype == "text_delta":
            state.grow(delta.get("text"), buf, TextPart)
        elif dtype == "thinking_delta":
            state.grow(delta.get("thinking"), buf, ThinkingPart)
        elif dtype == "signature_delta":
            sig = delta.get("signature")
            if isinstance(sig, str) and sig:
                state.signature.append(sig)
                buf.add(ThinkingPart("", signature=sig))
        elif dtype == "input_json_delta":
            frag = delta.get("partial_json")
            if isinstance(frag, str) and frag:
                state.text.append(frag)
                if state.kind == "tool_use":
                    buf.add(ToolCallPart(state.tool_index, arguments=frag))

    def message_delta(self, event: ServerSentEvent, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            self.finish = delta["stop_reason"]
        usage = data.get("usage")
        if not isinstance(usage, dict):
            return
        # cumulative counts: the latest value replaces the earlier one
        for key, attr in _USAGE:
            count = whole_number(usage.get(key))
            if count is not None:
                setattr(self, attr, count)
                self.reported = self.reported or key == "output_tokens"


MessageReading.handlers = {
    "message_start": MessageReading.message_start,
    "content_block_start": MessageReading.block_start,
    "content_block_delta": MessageReading.block_delta,
    "message_delta": MessageReading.message_delta,
}
