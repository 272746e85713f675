"""Helpers for the mock server's tests: a small SSE decoder of their own.

It is deliberately not nbagent's parser: the mock's wire output is checked by a second reader.
"""

from __future__ import annotations


def sse_events(raw: bytes | str) -> list[tuple[str | None, str]]:
    """Decode raw SSE into (event name, data) pairs; comment lines are skipped."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    events: list[tuple[str | None, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if name is not None or data:
            events.append((name, "\n".join(data)))
    return events
