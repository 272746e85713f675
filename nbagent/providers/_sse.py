"""Server-sent events from bytes: nbagent's own incremental parser.

Why not a library's: one network read often carries many events (a fast model sends dozens of
deltas per read), and `feed` returns all the events a read completed at once, so a provider can
merge them into one part (see `_parts.PartBuffer`); the size cap on a single event is enforced on
the bytes before they are parsed (`_event_stream`).
"""

from __future__ import annotations

import codecs
from typing import NamedTuple


class ServerSentEvent(NamedTuple):
    """One dispatched event: its type (`event`, "" when the server named none), its `data` lines
    joined by newlines, the last event `id` seen, and the `retry` field when it came with it.

    A named tuple, not a dataclass: a fast stream dispatches tens of thousands of these, and a
    tuple is the cheapest immutable record to build."""

    event: str = ""
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEParser:
    """Server-sent events from bytes, as the WHATWG event-stream rules read them.

    Lines end at CRLF, LF or CR; a blank line dispatches the event, unless it has no `data`
    line (a lone `event:` dispatches nothing); `:` lines are comments; `data` lines join with
    newlines; `retry` counts only when it is ASCII digits; unknown fields are ignored; a UTF-8
    byte order mark at the start is skipped. Incremental: `feed` takes each chunk as it comes
    and returns the events it completed.
    """

    def __init__(self) -> None:
        # utf-8-sig drops a BOM at the very start only, as the event-stream rules ask.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._tail = ""
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes, *, final: bool = False) -> list[ServerSentEvent]:
        text = self._tail + self._decoder.decode(chunk, final)
        self._tail = ""
        if not final and text.endswith("\r"):
            self._tail, text = "\r", text[:-1]  # may be the first half of a CRLF
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()  # the line still being received
        if final:
            lines += [rest, ""] if rest else [""]
        else:
            self._tail = rest + self._tail
        out: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    joined = data[0] if len(data) == 1 else "\n".join(data)
                    out.append(ServerSentEvent(self._event, joined, self._id, self._retry))
                    data = self._data = []
                self._event, self._retry = "", None
                continue
            # the two lines of nearly every event first, without the general split
            if line[:6] == "data: ":
                data.append(line[6:])
                continue
            if line[:7] == "event: ":
                self._event = line[7:]
                continue
            if line[0] == ":":
                continue
            field, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                self._event = value
            elif field == "id":
                if "\0" not in value:
                    self._id = value
            elif field == "retry" and value.isascii() and value.isdigit():
                self._retry = int(value)
        return out
