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
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from .._core._words import counted
from ..events import AttemptFailed, AttemptStarted, Event, PacedWait, RetryScheduled, RunFinished

LANES = ("queued", "running", "waiting", "ok", "failed", "cancelled")
"""A lane's states, in the order the views count them (each shown by its first letter)."""
FINAL = frozenset(LANES[3:])
PROVIDER_LANES_UP_TO = 2000
"""A provider batch of more items than this shows its batches' counts, not one lane each."""
RATE_WINDOW_S = 60.0
"""Retries per minute are counted over the last minute."""


def lane_state(event: Event) -> str | None:
    """The lane state an event moves its agent to, or None when it moves nothing."""
    if isinstance(event, AttemptStarted):
        return "running"
    if isinstance(event, (PacedWait, RetryScheduled)):
        return "waiting"
    if isinstance(event, RunFinished):
        return end_lane(event.end_reason)
    return None


def end_lane(end_reason: str | None) -> str:
    """The lane a run ends in, from its end reason (a `RunFinished`'s, or a row's)."""
    if end_reason in ("error", "budget"):
        return "failed"
    return "cancelled" if end_reason == "cancelled" else "ok"


@dataclass
class BatchProgress:
    """Counts across all agents of a batch, and one lane per prompt.

    Pass one as an agent subscriber (`subscribers=[progress]`) to count any agents' events; the
    batch runners use `lane(i)` per prompt and `finish(i, state)` when a prompt's row is in.

    Attributes:
        total: How many prompts.
        done: How many have their row.
        failed: How many of those failed (or were cancelled).
        retries: Retries scheduled, in all.
        retry_wait_s: Seconds of backoff scheduled, in all.
        paced: Waits the rate limiter imposed.
        paced_wait_s: Seconds of those waits.
        errors: Failed attempts, in all.
        started: When the batch started (`time.monotonic()`).
        on_change: Called with `(progress, final)` after each change (the views redraw).
        lanes: One state per prompt: "queued", "running", "waiting", "ok", "failed",
            "cancelled".
        pace: What the shared limiter has learned ("rate", "capacity", ...).
        backend: "local", "ray" or "provider".
        workers: How many processes run the agents.
        batches: The provider batches (`backend="provider"`), by submission number: each
            one's id, status, the provider's counts, elapsed time and next poll.
        resubmissions: How many of those batches were made of resubmitted items.
        state_path: Where a provider batch keeps its state (`nbagent.batch.resume` reads it).
        reasked: How many prompts' structured answers were asked for again at least once.
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
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)  # provider batches, by n
    resubmissions: int = 0  # provider batches made of retried items
    state_path: str = ""  # where a provider batch keeps its state
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
            self.failed += lane_state(event) != "ok"
            final = self.done >= self.total
        elif not self.count(event):
            return
        self.changed(final)

    def count(self, event: Event) -> bool:
        """Add a retry, a paced wait or a failed attempt to the counters.

        Args:
            event: Any event of an agent of the batch.

        Returns:
            True when it counted; False for an event the counters ignore.
        """
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
        """Count scheduled retries (`n` at once, their backoff together).

        Args:
            delay_s: Their backoff, in seconds, together.
            n: How many.
        """
        self.retries += n
        self.retry_wait_s += delay_s
        now = time.monotonic()
        self._retry_times.extend([now] * n)

    def lane(self, i: int) -> Callable[[Event], None]:
        """A subscriber for the agent of prompt `i`: moves its lane and counts its events.

        Args:
            i: The prompt's position.

        Returns:
            The subscriber.
        """

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
        """Move prompt `i`'s lane, unless it has finished.

        Args:
            i: The prompt's position.
            state: "queued", "running" or "waiting".
        """
        if self.lanes[i] not in FINAL:
            self.lanes[i] = state

    def finish(self, i: int, state: str, *, reasked: bool = False) -> None:
        """Prompt `i` has its row (counted once, however often it is said).

        Args:
            i: The prompt's position.
            state: "ok", "failed" or "cancelled".
            reasked: Whether its structured answer needed a reask.
        """
        if self.lanes[i] in FINAL:
            return
        self.mark(i, state)
        self.reasked += bool(reasked)
        self.changed(self.done >= self.total)

    def finish_row(self, i: int, row: dict[str, Any]) -> None:
        """Prompt `i` has `row` (from `row_ok` / `row_failed`): its lane ends as the row says.

        Args:
            i: The prompt's position.
            row: Its row.
        """
        self.finish(i, end_lane(row.get("end_reason")), reasked=bool(row.get("reasks")))

    def mark(self, i: int, state: str) -> None:
        """Move lane `i` without telling the views (a runner with thousands of rows to move at
        once calls `changed()` after them): a final state counts it done.

        Args:
            i: The prompt's position.
            state: Its lane's new state ("running", "ok", "error", "cancelled", ...).
        """
        if self.lanes[i] in FINAL:
            return
        self.lanes[i] = state
        if state in FINAL:
            self.done += 1
            if state != "ok":
                self.failed += 1

    def changed(self, final: bool = False) -> None:
        """Tell `on_change`.

        Args:
            final: Whether the batch has ended (a view draws its last state).
        """
        if self.on_change is not None:
            self.on_change(self, final)

    # -- read by the views ------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """How many lanes are in each state.

        Returns:
            A count for each of "queued", "running", "waiting", "ok", "failed", "cancelled".
        """
        return {**dict.fromkeys(LANES, 0), **Counter(self.lanes)}

    def retries_per_minute(self) -> float:
        """Retries over the last minute (or since the start, when shorter), per minute.

        Returns:
            The rate.
        """
        now = time.monotonic()
        while self._retry_times and now - self._retry_times[0] > RATE_WINDOW_S:
            self._retry_times.popleft()
        span = min(RATE_WINDOW_S, max(1.0, now - self.started))
        return len(self._retry_times) * 60.0 / span

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able picture for the batch view.

        Returns:
            The counts, the rates, the limiter's pace, and the lanes as one letter each.
        """
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
            "lanes": self._lane_codes(),
            **self._provider_batches(),
        }

    def _lane_codes(self) -> str:
        """One letter per lane (its state's first): hundreds of lanes stay a short string."""
        if self.backend == "provider" and self.total > PROVIDER_LANES_UP_TO:
            return ""  # tens of thousands of items: the per-batch counts say it
        return "".join(s[0] if s in LANES else "?" for s in self.lanes)

    def _provider_batches(self) -> dict[str, Any]:
        """Each provider batch: its status and the provider's counts, its age, the next poll."""
        if not self.batches:
            return {}
        now = time.monotonic()
        rows = []
        for n in sorted(self.batches):
            b = self.batches[n]
            wait, since = b.get("next_poll_in"), float(b.get("next_poll_set", now))
            open_ = not b.get("collected") and b.get("phase") != "ended"
            rows.append(
                {
                    "n": n,
                    **{k: b.get(k) for k in ("id", "status", "submission", "items")},
                    "counts": dict(b.get("counts") or {}),
                    "elapsed_s": round(max(0.0, now - float(b.get("seen_at", now))), 1),
                    "next_poll_s": (
                        round(max(0.0, float(wait) - (now - since)), 1)
                        if open_ and wait is not None
                        else None
                    ),
                    "collected": bool(b.get("collected")),
                }
            )
        return {"batches": rows, "resubmissions": self.resubmissions, "state": self.state_path}

    def batches_text(self) -> str:
        """The provider batches in a few words, for the terminal line.

        Returns:
            " · 2 batches (1 open, 3 resubmitted): 40 succeeded, 2 errored", or "" when the
            batch went through no provider batch API.
        """
        if not self.batches:
            return ""
        live = [b for b in self.batches.values() if not b.get("collected")]
        counts: Counter[str] = Counter()
        for b in live:
            counts.update({k: int(v) for k, v in (b.get("counts") or {}).items()})
        words = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        resub = f", {self.resubmissions} resubmitted" if self.resubmissions else ""
        tail = f": {words}" if words else ""
        made = counted(len(self.batches), "batch", "batches")
        return f" · {made} ({len(live)} open{resub}){tail}"

    def text(self) -> str:
        """One line for a terminal: done, running, waiting, time, retries, paced waits, pace.

        Returns:
            The line.
        """
        elapsed = time.monotonic() - self.started
        c = self.counts()
        rate = self.pace.get("rate")
        pace = f" · pace {rate:.1f}/s" if isinstance(rate, (int, float)) else ""
        return (
            f"{self.done}/{self.total} done ({self.failed} failed) · {c['running']} running · "
            f"{c['waiting']} waiting · {elapsed:.1f} s · "
            f"{counted(self.retries, 'retry', 'retries')} "
            f"({self.retry_wait_s:.1f} s backoff, {self.retries_per_minute():.0f}/min) · "
            f"{counted(self.paced, 'paced wait')} ({self.paced_wait_s:.1f} s){pace}"
            + (f" · {self.reasked} reasked" if self.reasked else "")
            + self.batches_text()
        )


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
