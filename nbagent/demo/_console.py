"""Live status lines in a terminal: the same words the widget's status line shows.

A subscriber like any other: it feeds the widget's pure-Python state and prints the status
whenever it says something new, plus a line for each tool error the model will read.
"""

from __future__ import annotations

from typing import TextIO

from ..events import Event, RunFinished, ToolCallFinished
from ..notebook._state import TimelineState

_QUIET_PREFIXES = (
    "receiving reply",
    "model is thinking",
    "model is calling",
    "starting run",
    "requesting",
    "idle",
)
# said again, with the wait, by the RetryScheduled that follows at once
_QUIET_SUFFIXES = (": retrying", ": compacting the conversation", ": falling back")


class ConsoleReporter:
    """Prints "provider unavailable: retrying in 2.4s (attempt 2/4)" and friends as they happen."""

    def __init__(self, stream: TextIO) -> None:
        self.state = TimelineState()
        self.stream = stream
        self._last = ""

    def __call__(self, event: Event) -> None:
        self.state(event)
        if isinstance(event, ToolCallFinished) and event.is_error:
            text = event.content if len(event.content) <= 160 else event.content[:157] + "..."
            self._print(f"tool {event.name} → error result: {text}")
            self._last = self.state.status
            return
        status = self.state.status
        quiet = status.startswith(_QUIET_PREFIXES) or status.endswith(_QUIET_SUFFIXES)
        if status != self._last and not quiet and not isinstance(event, RunFinished):
            self._print(status)
        self._last = status

    def _print(self, line: str) -> None:
        print(f"  {line}", file=self.stream, flush=True)
