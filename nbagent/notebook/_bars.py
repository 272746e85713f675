"""The bars of the timeline: one per attempt, tool call and compaction, in the lane it ran in.

A bar opens at its start event and is closed by its end event; one whose end comes without a
start is drawn as an instant, and whatever is still open when its run ends is cut off there.
What a bar says on hover (`detail`) is written here, from the event that ended it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..events import (
    AttemptEvent,
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    ToolCallFinished,
    ToolCallStarted,
)
from ._a11y import bar_names
from ._values import TOOL_TEXT_LIMIT, clip, failure_text, json_text, num


def lane(phase: str) -> str:
    """The lane an attempt of this phase runs in."""
    return "compaction" if phase == "compaction" else "request"


class Bars:
    def __init__(self) -> None:
        self._bars: list[dict[str, Any]] = []
        self._attempts: dict[tuple[str, str], dict[str, Any]] = {}
        self.tools: dict[str, dict[str, Any]] = {}  # the tool calls running, by call id
        self._compactions: dict[str, dict[str, Any]] = {}
        # run_id -> reasks so far, as the attempt log's `reask` (0 the first answer, 1, 2, ...)
        self._reasks: dict[str, int] = {}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._bars)

    def open(self, event: Event, lane: str, kind: str, **fields: Any) -> dict[str, Any]:
        t = num(event.time) or 0.0
        bar: dict[str, Any] = {
            "id": len(self._bars),
            "run_id": event.run_id,
            "turn": event.turn,
            "lane": lane,
            "kind": kind,
            "start": t,
            "end": None,
            "outcome": "running",
            "action": "",
            "label": "",
            "detail": "",
            "is_error": False,
        }
        bar.update(fields)
        self._bars.append(bar)
        return bar

    # -- attempts ---------------------------------------------------------------------------

    def attempt_started(self, event: AttemptStarted) -> None:
        where = lane(event.phase)
        what = "compaction request" if where == "compaction" else "attempt"
        label = f"{what} {event.attempt}/{event.max_attempts}"
        reask = self._reasks.get(event.run_id, 0) if where == "request" else None
        if reask:
            label = f"reask {reask}, {label}"
        self._attempts[(event.run_id, event.phase)] = self._open_attempt(
            event, label=label, reask=reask
        )

    def attempt_succeeded(self, event: AttemptSucceeded) -> None:
        bar = self._end_attempt(event)
        bar["outcome"] = "ok"
        bar["action"] = "none"
        counts = ((event.input_tokens, "in"), (event.output_tokens, "out"))
        tokens = [f"{n:,} {way}" for n, way in counts if n is not None]
        detail = f"{bar['label']} ok" + (f" · {', '.join(tokens)} tokens" if tokens else "")
        if event.stop_reason:
            detail += f" · stop: {event.stop_reason}"
        if event.request_id:
            detail += f" · request {event.request_id}"
        bar.update(detail=detail, ttft_s=num(event.ttft_s), stop_reason=event.stop_reason)

    def attempt_failed(self, event: AttemptFailed) -> str:
        """Close the attempt's bar as failed; returns what failed, in a reader's words."""
        bar = self._end_attempt(event)
        bar["outcome"] = "cancelled" if event.cancelled else "error"
        bar["action"] = event.action
        if event.action == "reask" and lane(event.phase) == "request":
            self._reasks[event.run_id] = self._reasks.get(event.run_id, 0) + 1
        bar["error"] = event.error
        bar["status_code"] = event.status_code
        failure = failure_text(event.error, event.status_code, event.message)
        bar["detail"] = f"{bar['label']}: {failure} → {event.action}"
        if event.request_id:
            bar["detail"] += f" [request id {event.request_id}]"
        if event.output_errors:  # a structured answer off its schema: what was wrong with it
            bar["output_errors"] = [clip(e, TOOL_TEXT_LIMIT) for e in event.output_errors[:10]]
        return failure

    def _end_attempt(self, event: AttemptSucceeded | AttemptFailed) -> dict[str, Any]:
        bar = self._attempts.pop((event.run_id, event.phase), None)
        if bar is None:  # an end without a start: draw it as an instant
            bar = self._open_attempt(event)
        bar.update(  # what it used, when the provider said (a failure often did not)
            end=num(event.time),
            input_tokens=event.input_tokens,
            output_tokens=event.output_tokens,
            cost_usd=num(event.cost_usd),
        )
        return bar

    def _open_attempt(self, event: AttemptEvent, **fields: Any) -> dict[str, Any]:
        """An attempt's bar, in its phase's lane, named by its number and model."""
        return self.open(
            event,
            lane(event.phase),
            "attempt",
            attempt=event.attempt,
            max_attempts=event.max_attempts,
            model=event.model,
            **fields,
        )

    # -- tool calls and compactions -----------------------------------------------------------

    def tool_started(self, event: ToolCallStarted) -> None:
        self.tools[event.call_id] = self.open(
            event,
            "tool",
            "tool",
            label=event.name,
            name=event.name,
            call_id=event.call_id,
            arguments=clip(json_text(event.arguments), TOOL_TEXT_LIMIT),
            source=event.source,
        )

    def tool_finished(self, event: ToolCallFinished) -> None:
        bar = self.tools.pop(event.call_id, None)
        if bar is None:
            bar = self.open(event, "tool", "tool", label=event.name, name=event.name)
            bar["start"] = (num(event.time) or 0.0) - (num(event.duration_s) or 0.0)
        bar.update(
            end=num(event.time),
            outcome="error" if event.is_error else "ok",
            action="tool_result",
            is_error=event.is_error,
            error=event.error,
            detail=clip(event.content, TOOL_TEXT_LIMIT),
        )

    def compaction_started(self, event: Event, **fields: Any) -> None:
        self._compactions[event.run_id] = self.open(event, "compaction", "compaction", **fields)

    def compaction_finished(self, event: Event) -> dict[str, Any]:
        """The compaction's bar, still to be filled in by the caller."""
        bar = self._compactions.pop(event.run_id, None)
        return bar if bar is not None else self.open(event, "compaction", "compaction")

    # -- the run's end, and the snapshot -----------------------------------------------------

    def cut(self, run_id: str, t: float | None, outcome: str) -> None:
        """Close whatever of this run is still open (cut off by whatever ended the run)."""
        for open_bars in (self._attempts, self.tools, self._compactions):
            _close(open_bars, run_id, end=t, outcome=outcome)

    def snapshot(self, waits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        bars = [dict(b) for b in self._bars]
        for bar, name in zip(bars, bar_names(bars, waits), strict=True):
            bar["aria"] = name  # what a screen reader says for the bar
        return bars


def _close(open_bars: dict[Any, dict[str, Any]], run_id: str, **fields: Any) -> None:
    for key in [k for k, bar in open_bars.items() if bar["run_id"] == run_id]:
        open_bars.pop(key).update(fields)
