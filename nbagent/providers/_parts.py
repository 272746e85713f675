"""Merging stream parts that arrived together; a tool call's streamed arguments decoded; JSON
values read leniently (a body that may not be JSON, a number that may come as text)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._base import StreamPart, TextPart, ThinkingPart, ToolCallPart


class PartBuffer:
    """Deltas that arrived together, merged: consecutive text (or thinking, or one tool call's
    argument fragments) become one part, so a fast stream does not cost one event per token.

    Text and thinking deltas are kept as pieces and joined once, when the run of them ends or
    the buffer is taken: a read of a hundred deltas costs a hundred list appends, not a hundred
    parts built and concatenated (`text` skips building a part per delta at all).
    """

    __slots__ = ("_kind", "_pieces", "parts")

    def __init__(self) -> None:
        self.parts: list[StreamPart] = []
        self._pieces: list[str] = []
        self._kind: type[TextPart] | type[ThinkingPart] | None = None

    def text(self, text: str) -> None:
        """One text delta (what `add(TextPart(text))` does, without the part)."""
        self._piece(TextPart, text)

    def _piece(self, kind: type[TextPart] | type[ThinkingPart], text: str) -> None:
        """One text or thinking delta, kept as a piece of the run of its kind."""
        if self._kind is not kind:
            self._flush()
            self._kind = kind
        self._pieces.append(text)

    def add(self, part: StreamPart) -> None:
        kind = type(part)
        if kind is TextPart or (kind is ThinkingPart and not getattr(part, "signature", None)):
            assert isinstance(part, (TextPart, ThinkingPart))
            self._piece(kind, part.text)
            return
        self._flush()
        parts = self.parts
        if parts and kind is ToolCallPart:
            assert isinstance(part, ToolCallPart)
            last = parts[-1]
            if (
                type(last) is ToolCallPart
                and part.index == last.index
                and not part.call_id
                and not part.name
            ):
                parts[-1] = ToolCallPart(
                    last.index, last.call_id, last.name, last.arguments + part.arguments
                )
                return
        parts.append(part)

    def _flush(self) -> None:
        kind = self._kind
        if kind is None:
            return
        pieces = self._pieces
        self.parts.append(kind(pieces[0] if len(pieces) == 1 else "".join(pieces)))
        self._pieces = []
        self._kind = None

    def take(self) -> list[StreamPart]:
        self._flush()
        parts, self.parts = self.parts, []
        return parts


def json_or_none(data: bytes | str) -> Any:
    """`data` read as JSON (bytes as UTF-8, a bad byte replaced), or None when it is not JSON."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def json_object(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The object under `key` in `doc`, or an empty one when it holds none (or another value)."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def whole_number(value: Any) -> int | None:
    """A JSON integer (not a bool) or a string of ASCII digits (Gemini's int64 counts, a code
    sent as text), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def decode_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as (input, raw_input): raw_input keeps text that is not a JSON object."""
    if not text.strip():
        return {}, None
    value = json_or_none(text)
    return (value, None) if isinstance(value, dict) else ({}, text)
