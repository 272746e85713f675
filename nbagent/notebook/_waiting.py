"""The waits between attempts, and the one being waited now (what the countdown counts down).

A wait is drawn as a striped gap after the attempt that failed: amber when the backoff policy
chose it, purple when the server asked for it (Retry-After), grey when the shared rate limiter
held the request back. The latest one, while it runs, drives the status line's live countdown:
`until` is its end on the agent's clock, `current` what the browser says about it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import describe
from ..events import Event, PacedWait, RetryScheduled
from ._values import failure_text, num

__all__ = ["Waits"]

_CURRENT_FIELDS = ("kind", "label", "server_wish", "delay_s", "next_attempt", "max_attempts")


class Waits:
    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self.until: float | None = None
        self.current: dict[str, Any] | None = None

    def retry(self, event: RetryScheduled, lane: str) -> None:
        self._begin(
            event,
            delay=num(event.delay_s) or 0.0,
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
            delay=num(event.delay_s) or 0.0,
            lane="request",
            kind="paced",
            fields={
                "server_wish": False,
                "label": "rate limiter",
                "detail": event.reason or "held back by the shared rate limiter",
            },
        )

    def _begin(
        self, event: Event, *, delay: float, lane: str, kind: str, fields: dict[str, Any]
    ) -> None:
        t = num(event.time) or 0.0
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
