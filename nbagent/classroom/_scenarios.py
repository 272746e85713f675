"""The teacher's scenarios: what the room does to every request for a while, seeded.

- ``herd``: a short outage (every request gets a 529) that every client retries into at
  once, then the aftermath, where clients without jitter keep arriving in waves.
- ``wall``: a tight rate limit (a fifth of the room's capacity, at least 1 per second): 429s
  with Retry-After.
- ``storm``: a burst of 529s and broken streams, drawn from the mock's `FaultPlan` with the
  room's seed.

Each is the mock's fault machinery (`Fault`, `FaultPlan`) on the room's clock; it ends by
itself after its duration, or when the teacher stops it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..mock import Fault, FaultPlan, parse_fault

__all__ = ["SCENARIOS", "Scenario", "check_scenario"]

SCENARIOS: dict[str, str] = {
    "herd": "a 3 s outage (529 for everyone), then 17 s of aftermath",
    "wall": "a tight rate limit for 20 s (a fifth of the capacity): 429s",
    "storm": "12 s of random 529s (30%) and broken streams (15%)",
}
"""The scenarios a teacher can start, each with what it does."""

_OUTAGE_S = 3.0
_DURATION_S = {"herd": 20.0, "wall": 20.0, "storm": 12.0}
_STORM_RATES: dict[str | Fault, float] = {"529": 0.30, "drop_after_tokens=2": 0.15}


def check_scenario(name: object) -> str:
    """The scenario's name, or ValueError with a sentence naming the known ones."""
    if not isinstance(name, str) or name not in SCENARIOS:
        known = ", ".join(SCENARIOS)
        raise ValueError(f"There is no scenario {name!r}; the scenarios are {known}.")
    return name


@dataclass
class Scenario:
    """One run of a scenario: started at `started_s` on the room's clock (seconds).

    Attributes:
        name: herd, wall or storm.
        started_s: When it started.
        seed: Seeds its random faults.
        duration_s: How long it lasts unless stopped.
        stopped_s: When it ended (by itself or by the teacher), or None while it runs.
    """

    name: str
    started_s: float
    seed: int = 0
    duration_s: float = 0.0
    stopped_s: float | None = None
    _plan: FaultPlan = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        check_scenario(self.name)
        if not self.duration_s:
            self.duration_s = _DURATION_S[self.name]
        rates = _STORM_RATES if self.name == "storm" else None
        self._plan = FaultPlan((), seed=self.seed, fault_rates=rates)

    def running(self, now_s: float) -> bool:
        """Whether it still acts at `now_s` (it ends itself after its duration)."""
        if self.stopped_s is None and now_s >= self.started_s + self.duration_s:
            self.stopped_s = self.started_s + self.duration_s
        return self.stopped_s is None

    def fault(self, now_s: float) -> Fault | None:
        """The fault a request arriving at `now_s` gets from the scenario, or None."""
        if not self.running(now_s):
            return None
        if self.name == "herd":
            return parse_fault("529") if now_s < self.started_s + _OUTAGE_S else None
        if self.name == "storm":
            with self._lock:
                drawn = self._plan.next()
            return None if drawn.kind == "ok" else drawn
        return None

    def capacity(self, base_rps: float, now_s: float) -> float | None:
        """The capacity the scenario imposes at `now_s` (None: the room's own)."""
        if self.name == "wall" and self.running(now_s):
            return max(1.0, base_rps / 5.0)
        return None
