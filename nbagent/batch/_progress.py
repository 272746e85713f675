"""What a batch is doing right now: counts, one lane per agent, the shared limiter's pace.

Both backends feed one `BatchProgress`: in one process the agents' events arrive directly (each
agent gets `progress.lane(i)` as a subscriber); on Ray each worker tracks its agents with the same
`lane_state` and the driver applies what it drains from the workers. The notebook view and the
terminal bar only read `snapshot()` / `text()`, so they never know which backend ran.

Lanes: queued → running ⇄ waiting (a paced wait or a retry's backoff) → ok | failed | cancelled.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..events import AttemptFailed, AttemptStarted, Event, PacedWait, RetryScheduled, RunFinished

__all__ = ["FINAL", "BatchProgress", "TerminalBar", "lane_state"]

FINAL = frozenset({"ok", "failed", "cancelled"})
RATE_WINDOW_S = 60.0
"""Retries per minute are counted over the last minute."""


def lane_state(event: Event) -> str | None:
    """The lane state an event moves its agent to, or None when it moves nothing."""
    if isinstance(event, AttemptStarted):
        return "running"
    if isinstance(event, (PacedWait, RetryScheduled)):
        return "waiting"
    if isinstance(event, RunFinished):
        return (
            "failed"
            if event.end_reason in ("error", "budget")
            else ("cancelled" if event.end_reason == "cancelled" else "ok")
        )
    return None


@dataclass
class BatchProgress:
    """Counts across all agents of a batch, and one lane per prompt.

    Pass one as an agent subscriber (`subscribers=[progress]`) to count any agents' events; the
    batch runners use `lane(i)` per prompt and `finish(i, state)` when a prompt's row is in.
    """

    total: int
    done: int = 0
    failed: int = 0
    retries: int = 0
    retry_wait_s: float = 0.0
    paced: int = 0
    paced_wait_s: float = 0.0
    errors: int = 0  # failed attempts
    reasked: int = 0  # prompts whose structured answer was asked for again at least once
    started: float = field(default_factory=time.monotonic)
    on_change: Callable[[BatchProgress, bool], None] | None = None
    lanes: list[str] = field(default_factory=list)
    pace: dict[str, Any] = field(default_factory=dict)
    backend: str = "local"
    workers: int = 1
    _retry_times: deque[float] = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        if not self.lanes:
            self.lanes = ["queued"] * self.total

    # -- fed by events ----------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """Count an event of any agent (done comes from RunFinished)."""
        final = False
        if isinstance(event, RunFinished):
            self.done += 1
            if event.end_reason in ("error", "cancelled", "budget"):
                self.failed += 1
            final = self.done >= self.total
        elif not self.count(event):
            return
        self.changed(final)

    def count(self, event: Event) -> bool:
        """Add a retry, a paced wait or a failed attempt to the counters; False for others."""
        if isinstance(event, RetryScheduled):
            self.add_retry(float(event.delay_s))
        elif isinstance(event, PacedWait):
            self.paced += 1
            self.paced_wait_s += float(event.delay_s)
        elif isinstance(event, AttemptFailed):
            self.errors += 1
        else:
            return False
        return True

    def add_retry(self, delay_s: float, n: int = 1) -> None:
        self.retries += n
        self.retry_wait_s += delay_s
        now = time.monotonic()
        self._retry_times.extend([now] * n)

    def lane(self, i: int) -> Callable[[Event], None]:
        """A subscriber for the agent of prompt `i`: moves its lane and counts its events."""

        def on_event(event: Event) -> None:
            state = lane_state(event)
            counted = self.count(event)
            if state is not None and state not in FINAL:
                self.lanes[i] = state
            if counted or state is not None:
                self.changed(False)

        return on_event

    # -- fed by the runner ------------------------------------------------------------------

    def set_lane(self, i: int, state: str) -> None:
        if self.lanes[i] not in FINAL:
            self.lanes[i] = state

    def finish(self, i: int, state: str, *, reasked: bool = False) -> None:
        """Prompt `i` has its row: `state` is ok, failed or cancelled; `reasked` when its
        structured answer needed a reask."""
        if self.lanes[i] in FINAL:
            return
        self.lanes[i] = state
        self.done += 1
        self.reasked += bool(reasked)
        if state != "ok":
            self.failed += 1
        self.changed(self.done >= self.total)

    def changed(self, final: bool = False) -> None:
        if self.on_change is not None:
            self.on_change(self, final)

    # -- read by the views ------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out = {"queued": 0, "running": 0, "waiting": 0, "ok": 0, "failed": 0, "cancelled": 0}
        for state in self.lanes:
            out[state] = out.get(state, 0) + 1
        return out

    def retries_per_minute(self) -> float:
        now = time.monotonic()
        while self._retry_times and now - self._retry_times[0] > RATE_WINDOW_S:
            self._retry_times.popleft()
        span = min(RATE_WINDOW_S, max(1.0, now - self.started))
        return len(self._retry_times) * 60.0 / span

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able picture for the batch view."""
        c = self.counts()
        return {
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "cancelled": c["cancelled"],
            "running": c["running"],
            "waiting": c["waiting"],
            "queued": c["queued"],
            "retries": self.retries,
            "retries_per_min": round(self.retries_per_minute(), 1),
            "paced": self.paced,
            "reasked": self.reasked,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "pace": dict(self.pace),
            "backend": self.backend,
            "workers": self.workers,
            "lanes": "".join(_LANE_CODES.get(s, "?") for s in self.lanes),
        }

    def text(self) -> str:
        elapsed = time.monotonic() - self.started
        c = self.counts()
        rate = self.pace.get("rate")
        pace = f" · pace {rate:.1f}/s" if isinstance(rate, (int, float)) else ""
        return (
            f"{self.done}/{self.total} done ({self.failed} failed) · {c['running']} running · "
            f"{c['waiting']} waiting · {elapsed:.1f} s · {self.retries} retries "
            f"({self.retry_wait_s:.1f} s backoff, {self.retries_per_minute():.0f}/min) · "
            f"{self.paced} paced waits ({self.paced_wait_s:.1f} s){pace}"
            + (f" · {self.reasked} reasked" if self.reasked else "")
        )


_LANE_CODES = {
    "queued": "q",
    "running": "r",
    "waiting": "w",
    "ok": "o",
    "failed": "f",
    "cancelled": "c",
}
"""One letter per lane in the snapshot: hundreds of lanes stay a short string."""


class TerminalBar:
    """A one-line progress bar on stderr, redrawn at most `min_interval` apart."""

    def __init__(
        self, progress: BatchProgress, stream: TextIO | None = None, min_interval: float = 0.1
    ) -> None:
        self.progress = progress
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = min_interval
        self._last = -float("inf")

    def update(self, progress: BatchProgress, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        total = max(1, progress.total)
        width = 24
        filled = int(width * progress.done / total)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r[{bar}] {progress.text()}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self.update(self.progress, force=True)
        self.stream.write("\n")
        self.stream.flush()
