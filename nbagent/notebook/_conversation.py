"""The conversation under the timeline: committed messages, the reply streaming in, and what
a failed attempt had streamed before it was discarded.

Streaming deltas are the hot path (thousands per reply): they append to a list of chunks that is
joined only when a snapshot is taken. Tool results name the tool they answer, which the result
block itself does not carry, so the names of tool calls are kept across messages.
"""

from __future__ import annotations

from typing import Any

from .._core import _messages
from ._values import STREAM_LIMIT, TEXT_LIMIT, TOOL_TEXT_LIMIT, clip, clip_head, json_text


class Conversation:
    """The widget's conversation entries, and the reply being streamed (not yet committed)."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self.tool_names: dict[str, str] = {}
        self.stream_model = ""
        self._chunks: list[str] = []
        self._thinking: list[str] = []
        self._tool_deltas: dict[int, dict[str, Any]] = {}

    # -- the stream -------------------------------------------------------------------------

    def text(self, delta: str) -> bool:
        """Append reply text; True when it is the first of this attempt."""
        first = not self._chunks
        self._chunks.append(delta)
        return first

    def thinking(self, delta: str) -> bool:
        """Append thinking; True when nothing was streamed before it."""
        first = not self._thinking and not self._chunks
        self._thinking.append(delta)
        return first

    def tool_delta(self, index: int, name: str, arguments: str) -> bool:
        """A streamed tool call; True when its name is first known."""
        delta = self._tool_deltas.setdefault(index, {"name": "", "arguments": []})
        named = bool(name) and not delta["name"]
        if name:
            delta["name"] = name
        if arguments:
            delta["arguments"].append(arguments)
        return named

    def streamed(self) -> str:
        return "".join(self._chunks)

    def reset_stream(self, model: str | None = None) -> None:
        self._chunks = []
        self._thinking = []
        self._tool_deltas = {}
        if model is not None:
            self.stream_model = model

    def _live(self) -> dict[str, Any] | None:
        if not (self._chunks or self._thinking or self._tool_deltas):
            return None
        if len(self._chunks) > 1:  # join once, so the next snapshot joins little
            self._chunks = ["".join(self._chunks)]
        if len(self._thinking) > 1:
            self._thinking = ["".join(self._thinking)]
        calls = [
            {"name": d["name"], "arguments": clip("".join(d["arguments"]), TOOL_TEXT_LIMIT)}
            for _, d in sorted(self._tool_deltas.items())
        ]
        return {
            "kind": "streaming",
            "role": "assistant",
            "text": clip_head(self._chunks[0] if self._chunks else "", STREAM_LIMIT),
            "thinking": clip_head(self._thinking[0] if self._thinking else "", TEXT_LIMIT),
            "tool_calls": calls,
            "model": self.stream_model,
        }

    # -- entries ----------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """The entries for a snapshot, the streaming reply last."""
        out = list(self._entries)
        live = self._live()
        if live is not None:
            out.append(live)
        return out

    def prompt(self, run_id: str, text: str) -> None:
        """The user's prompt, shown at once and replaced by the committed message later."""
        self._entries.append(
            {
                "kind": "message",
                "role": "user",
                "blocks": [{"type": "text", "text": clip(text, TEXT_LIMIT)}],
                "pending": True,
                "run_id": run_id,
            }
        )

    def discard(self, text: str, *, reason: str, action: str, attempt: int) -> None:
        """What a failed attempt had streamed: shown struck through, never committed."""
        self._entries.append(
            {
                "kind": "discarded",
                "role": "assistant",
                "text": clip(text, TEXT_LIMIT),
                "reason": reason,
                "action": action,
                "attempt": attempt,
            }
        )

    def note(self, text: str, ok: bool) -> None:
        self._entries.append({"kind": "note", "text": text, "ok": ok})

    def commit(self, run_id: str, index: int, message: _messages.Message) -> None:
        entry = message_entry(message, self.tool_names)
        entry["index"] = index
        if entry["role"] == "assistant":
            self.reset_stream()
        if entry["role"] == "user":
            pending = next(
                (
                    e
                    for e in reversed(self._entries)
                    if e.get("pending") and e.get("run_id") == run_id
                ),
                None,
            )
            if pending is not None and pending["blocks"] == entry["blocks"]:
                self._entries.remove(pending)
        self._entries.append(entry)

    def settle(self, run_id: str) -> None:
        """The run ended: a prompt never committed (a hard failure) stays, no longer pending."""
        for entry in self._entries:
            if entry.get("run_id") == run_id:
                entry.pop("pending", None)


def message_entry(message: _messages.Message, tool_names: dict[str, str]) -> dict[str, Any]:
    """The entry for a committed `Message` (the names of its tool calls go to `tool_names`)."""
    blocks: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, _messages.TextBlock):
            blocks.append({"type": "text", "text": clip(block.text, TEXT_LIMIT)})
        elif isinstance(block, _messages.ThinkingBlock):
            blocks.append({"type": "thinking", "text": clip(block.thinking, TEXT_LIMIT)})
        elif isinstance(block, _messages.ImageBlock):
            blocks.append({"type": "image", "media_type": block.media_type})
        elif isinstance(block, _messages.ToolUseBlock):
            tool_names[block.id] = block.name
            args = block.raw_input if block.raw_input is not None else json_text(block.input)
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "arguments": clip(args, TOOL_TEXT_LIMIT),
                }
            )
        elif isinstance(block, _messages.ToolResultBlock):
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "name": tool_names.get(block.tool_use_id, ""),
                    "text": clip(block.text, TOOL_TEXT_LIMIT),
                    "is_error": block.is_error,
                }
            )
    return {"kind": "message", "role": message.role, "blocks": blocks}
