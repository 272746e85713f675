"""Merging stream parts that arrived together."""

from __future__ import annotations

from ._base import StreamPart, TextPart, ThinkingPart, ToolCallPart

__all__ = ["PartBuffer"]


class PartBuffer:
    """Deltas that arrived together, merged: consecutive text (or thinking, or one tool call's
    argument fragments) become one part, so a fast stream does not cost one event per token."""

    def __init__(self) -> None:
        self.parts: list[StreamPart] = []

    def add(self, part: StreamPart) -> None:
        parts = self.parts
        if parts:
            last = parts[-1]
            if type(part) is TextPart and type(last) is TextPart:
                parts[-1] = TextPart(last.text + part.text)
                return
            if (
                type(part) is ThinkingPart
                and type(last) is ThinkingPart
                and not part.signature
                and not last.signature
            ):
                parts[-1] = ThinkingPart(last.text + part.text)
                return
            if (
                type(part) is ToolCallPart
                and type(last) is ToolCallPart
                and part.index == last.index
                and not part.call_id
                and not part.name
            ):
                parts[-1] = ToolCallPart(
                    last.index, last.call_id, last.name, last.arguments + part.arguments
                )
                return
        parts.append(part)

    def take(self) -> list[StreamPart]:
        parts, self.parts = self.parts, []
        return parts
