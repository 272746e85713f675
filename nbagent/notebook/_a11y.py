"""What the timeline says to someone who cannot see it, and where its bars go on the time axis.

Three things the widget's state carries besides the picture:

- `bar_names`: each bar's accessible name, a sentence that says what it is ("request attempt
  2 of 4: 503 service unavailable after 0.4 s; backoff 0.8 s"), read by a screen reader when
  the bar gets the keyboard focus;
- `Announcer`: the one polite live region's text. It changes only when something a listener
  must know happens (a wait starts, a tool fails, a compaction ends, the run ends), each such
  event at most once, never for a streamed delta: the browser speaks it when its id changes;
- `timeline_axis`: the compressed time axis (`nbagent._axis`, the one the PNGs use) for the
  bars and waits of the state, shipped as knots so timeline.js only interpolates.
"""

from __future__ import annotations

import http
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._axis import picture_axis
from ..errors import describe
from ..events import (
    AttemptFailed,
    CompactionFinished,
    Event,
    FallbackStarted,
    PacedWait,
    RetryScheduled,
    RunFinished,
    SDKRetryScheduled,
    ToolCallFinished,
)
from ._values import num
from ._waiting import waits_after


def spoken_seconds(value: float | None) -> str:
    """Seconds as a reader says them: "0.4 s", "1 s", "12 s", "0.05 s"."""
    if value is None:
        return "an unknown time"
    if value < 0.095:
        return f"{value:.2f} s"
    if value < 10:
        return f"{round(value, 1):g} s"
    return f"{round(value):d} s"


def _failure(bar: Mapping[str, Any]) -> str:
    """ "503 service unavailable", "429 too many requests"; other codes say the error kind
    ("400 context overflow"), which tells more than "bad request"."""
    code = bar.get("status_code")
    kind = describe(str(bar.get("error") or "error"))
    if not isinstance(code, int) or not code or bar.get("error") in _OF_THE_ANSWER:
        return kind
    if code == 429 or code >= 500:
        try:
            return f"{code} {http.HTTPStatus(code).phrase.lower()}"
        except ValueError:
            pass
    return f"{code} {kind}"


def _wait_words(wait: Mapping[str, Any]) -> str:
    delay = spoken_seconds(num(wait.get("delay_s")))
    if wait.get("server_wish"):
        return f"the server's Retry-After {delay}"
    if wait.get("kind") == "paced":
        return f"paced {delay}"
    return f"backoff {delay}"


_ACTIONS = {
    "compact": "compacting",
    "fallback": "falling back",
    "fail": "gave up",
    "reask": "asked again with the errors (reask)",
}
_OF_THE_ANSWER = ("OutputInvalid", "OutputTruncated")  # the answer came (200); its shape failed


def _name(bar: Mapping[str, Any], wait: Mapping[str, Any] | None) -> str:
    took = ""
    if bar.get("end") is not None and bar.get("start") is not None:
        took = f" after {spoken_seconds(max(0.0, bar['end'] - bar['start']))}"
    outcome = bar.get("outcome")
    kind = bar.get("kind")
    if kind == "tool":
        name = bar.get("name") or bar.get("label") or "tool"
        if outcome == "running":
            return f"tool {name}: running"
        said = "returned an error" if bar.get("is_error") else str(outcome)
        return f"tool {name}: {said}{took}"
    if kind == "compaction":
        if outcome == "running":
            return f"compaction of {bar.get('tokens_before', 0):,} tokens: running"
        if outcome != "ok":
            return f"compaction failed{took}"
        before, after = bar.get("tokens_before", 0), bar.get("tokens_after", 0)
        return f"compaction: {before:,} → {after:,} tokens{took.replace(' after ', ' in ')}"
    what = "compaction request" if bar.get("lane") == "compaction" else "request attempt"
    head = f"{what} {bar.get('attempt')} of {bar.get('max_attempts')}"
    if outcome == "running":
        return f"{head}: running"
    if outcome in ("ok", "cancelled"):
        return f"{head}: {outcome}{took}"
    text = f"{head}: {_failure(bar)}{took}"
    if wait is not None:
        return f"{text}; {_wait_words(wait)}"
    action = _ACTIONS.get(str(bar.get("action") or ""))
    return f"{text}; {action}" if action else text


def bar_names(bars: Iterable[Mapping[str, Any]], waits: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each bar's accessible name, in order; a failed attempt names the wait that followed."""
    bars = list(bars)
    return [_name(bar, wait) for bar, wait in zip(bars, waits_after(bars, waits), strict=True)]


class Announcer:
    """The live region's text and a counter that moves once per announcement.

    `heard(event)` is called with every event but the streamed deltas (those never announce);
    it changes the text only for the events a listener must be told about.
    """

    def __init__(self) -> None:
        self.count = 0
        self.text = ""
        self._recent: list[tuple[int, str]] = []

    def heard(self, event: Event) -> None:
        text = _announcement(event)
        if text:
            self.count += 1
            self.text = text
            self._recent = [*self._recent[-(_RECENT - 1) :], (self.count, text)]

    def snapshot(self) -> dict[str, Any]:
        """`recent` holds the last few, so a browser that got two changes in one push (the
        widget coalesces pushes) says both, once."""
        return {"id": self.count, "text": self.text, "recent": [list(r) for r in self._recent]}


_RECENT = 4


def _announcement(event: Event) -> str | None:
    if isinstance(event, SDKRetryScheduled):  # a watched SDK waits, not the agent
        who = event.sdk or "the SDK"
        delay = spoken_seconds(num(event.delay_s))
        why = "the server's Retry-After" if event.retry_after_s is not None else "its own backoff"
        step = f"attempt {event.next_attempt}"
        return f"{describe(event.error)}: {who} is waiting {delay} ({why}) before {step}"
    if isinstance(event, RetryScheduled):
        delay = spoken_seconds(num(event.delay_s))
        step = f"attempt {event.next_attempt} of {event.max_attempts}"
        if event.retry_after_s is not None:
            return f"{describe(event.error)}: waiting for the server's Retry-After of {delay}"
        return f"{describe(event.error)}: waiting {delay} (backoff) before {step}"
    if isinstance(event, PacedWait):
        return f"the rate limiter holds the request for {spoken_seconds(num(event.delay_s))}"
    if isinstance(event, ToolCallFinished) and event.is_error:
        return f"tool `{event.name}` returned an error"
    if isinstance(event, AttemptFailed) and event.action == "reask":
        return f"the answer did not match its schema ({event.message}): asking again"
    if isinstance(event, CompactionFinished):
        if not event.ok:
            return "compaction failed"
        return f"compacted {event.tokens_before:,} → {event.tokens_after:,} tokens"
    if isinstance(event, FallbackStarted):
        return f"falling back from {event.from_model} to {event.to_model}"
    if isinstance(event, RunFinished):
        if event.end_reason == "cancelled":
            return "cancelled"
        if event.error or event.end_reason == "error":
            return f"failed with {event.error or 'an error'}"
        return "finished"
    return None


def timeline_axis(
    bars: Sequence[Mapping[str, Any]],
    waits: Sequence[Mapping[str, Any]],
    start: float | None,
    now: float | None,
) -> dict[str, Any] | None:
    """The compressed axis for the picture timeline.js draws: from the earliest start to the
    latest end (or now, for what still runs), as `nbagent._axis.Axis.as_state`. None before
    the first event (a state with no start has no bars or waits, and `now` is set with it)."""
    if start is None or now is None:
        return None
    items = [*bars, *waits]
    t0 = min([start, *(float(x["start"]) for x in items)])
    t1 = max([now, *(float(x.get("end") or x["start"]) for x in items)])
    busy = [
        (float(b["start"]) - t0, float(b["end"] if b.get("end") is not None else t1) - t0)
        for b in bars
    ]
    return picture_axis(busy, t1 - t0).as_state(t0)
