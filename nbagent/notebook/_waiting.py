"""The waits between attempts, and the one being waited now (what the countdown counts down).

A wait is drawn as a striped gap after the attempt that failed: amber when the backoff policy
chose it, purple when the server asked for it (Retry-After), grey when the shared rate limiter
held the request back. The latest one, while it runs, drives the status line's live countdown:
`until` is its end on the agent's clock, `current` what the browser says about it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import describe
from ..events import PacedWait, RetryScheduled
from ._values import failure_text, num

_CURRENT_FIELDS = ("kind", "label", "server_wish", "delay_s", "next_attempt", "max_attempts")


class Waits:
    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self.until: float | None = None
        self.current: dict[str, Any] | None = None

    def retry(self, event: RetryScheduled, lane: str) -> None:
        self._begin(
            event,
            lane=lane,
            kind="retry",
            fields={
                "server_wish": event.retry_after_s is not None,
                "retry_after_s": num(event.retry_after_s),
                "policy_delay_s": num(event.policy_delay_s),
                "attempt": event.attempt,
                "next_attempt": event.next_attempt,
                "max_attempts": event.max_attempts,
                "error": event.error,
                "status_code": event.status_code,
                "label": describe(event.error),
                "detail": failure_text(event.error, event.status_code, event.message),
            },
        )

    def paced(self, event: PacedWait) -> None:
        self._begin(
            event,
            lane="request",
            kind="paced",
            fields={
                "server_wish": False,
                "label": "rate limiter",
                "detail": event.reason or "held back by the shared rate limiter",
            },
        )

    def _begin(
        self, event: RetryScheduled | PacedWait, *, lane: str, kind: str, fields: dict[str, Any]
    ) -> None:
        t = num(event.time) or 0.0
        delay = num(event.delay_s) or 0.0
        wait: dict[str, Any] = {
            "id": len(self._items),
            "run_id": event.run_id,
            "lane": lane,
            "kind": kind,
            "start": t,
            "end": t + delay,
            "delay_s": delay,
        }
        wait.update(fields)
        self._items.append(wait)
        self.until = t + delay
        self.current = {k: wait.get(k) for k in _CURRENT_FIELDS}

    def stop_countdown(self) -> None:
        """Something else happened: whatever was being waited for is over."""
        self.until = None
        self.current = None

    def cut(self, run_id: str, t: float) -> None:
        """The run ended at `t`: a wait it did not live to finish counts only the time waited."""
        for wait in self._items:
            if wait["run_id"] == run_id and wait["end"] > t:
                wait.update(end=t, delay_s=max(0.0, t - wait["start"]), cut=True)

    def of_run(self, run_id: str) -> Iterator[dict[str, Any]]:
        return (w for w in self._items if w["run_id"] == run_id)

    def snapshot(self) -> dict[str, Any]:
        return {
            "wait_until": self.until,
            "wait": dict(self.current) if self.current else None,
            "waits": [dict(w) for w in self._items],
        }


def waits_after(
    bars: Iterable[Mapping[str, Any]], waits: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any] | None]:
    """The wait that followed each bar, in order: for a retried attempt, the next retry wait
    of its run and lane that starts no earlier than it (each wait follows one attempt); None
    for every other bar. What the bar's accessible name and the static page both say."""
    queues: dict[tuple[Any, Any], deque[Mapping[str, Any]]] = {}
    for w in waits:
        if w.get("kind") == "retry":
            queues.setdefault((w.get("run_id"), w.get("lane")), deque()).append(w)
    out: list[Mapping[str, Any] | None] = []
    for bar in bars:
        queue = queues.get((bar.get("run_id"), bar.get("lane")))
        if bar.get("kind") != "attempt" or bar.get("action") != "retry" or not queue:
            out.append(None)
            continue
        while queue and (queue[0].get("start") or 0.0) < (bar.get("start") or 0.0):
            queue.popleft()  # a wait before this attempt began: no later attempt's either
        out.append(queue.popleft() if queue else None)
    return out
