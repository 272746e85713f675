"""The room's state: who joined, what arrived each second, each student's lane.

No HTTP here: the server tells the room that a request arrived (`arrive`) and how it was
answered (`answer`), and the room counts. A retry is read from the requests themselves, as
a server would: the same body again from the same agent of the same student. The time
between the answer that failed and that repeat is the student's wait. Every number is on the
injected clock, so a test moves time by hand.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import NbAgentError
from ._names import clean_name, join_code, teacher_token, unique_name
from ._scenarios import Scenario, check_scenario

__all__ = ["Arrival", "Lane", "Room", "RoomFull", "peak_to_mean"]

MAX_SECONDS = 6 * 3600  # a long teaching day of arrivals; older seconds are let go
MAX_AGENTS = 64  # agents remembered per student for retry detection
POLICY_FIELDS = ("attempts", "jitter", "budget")


class RoomFull(NbAgentError):
    """The room has as many students as it takes (`max_students`)."""


def parse_policy(value: str | None) -> dict[str, str]:
    """``attempts=4; jitter=full`` (the policy header) to a dict of the known fields."""
    out: dict[str, str] = {}
    for part in (value or "").split(";"):
        key, _, raw = part.partition("=")
        key = key.strip().lower()
        if key in POLICY_FIELDS:
            out[key] = clean_name(raw)[:20]
    return out


@dataclass
class Lane:
    """One student's numbers.

    Attributes:
        name: The name as shown (cleaned, made unique).
        seat: The order they joined in, from 1.
        joined_s: When they joined, in room seconds.
        requests: Requests received.
        retries: Of those, repeats of the same agent's previous request.
        failures: Answers other than 200.
        wait_s: Seconds between failed answers and their repeats, summed.
        policy: What their last agent reported (attempts, jitter, budget).
        agents: How many agents (or SDK clients) sent requests.
        last_s: When the last request arrived, or None.
    """

    name: str
    seat: int
    joined_s: float
    requests: int = 0
    retries: int = 0
    failures: int = 0
    wait_s: float = 0.0
    policy: dict[str, str] = field(default_factory=dict)
    agents: int = 0
    last_s: float | None = None
    # agent -> (body digest of its last request, when it was answered, whether it failed)
    _last: OrderedDict[str, tuple[str, float | None, bool]] = field(
        default_factory=OrderedDict, repr=False
    )


@dataclass(frozen=True)
class Arrival:
    """One counted request, handed back to `Room.answer` once its status is known."""

    lane: Lane
    agent: str
    digest: str
    second: int


def peak_to_mean(counts: list[int]) -> float | None:
    """The busiest second over the mean second (1.0 is perfectly even); None with no requests."""
    total = sum(counts)
    if not counts or total == 0:
        return None
    return max(counts) / (total / len(counts))


class Room:
    """A classroom's students, join code, teacher token and counters. Thread-safe.

    Args:
        max_students: How many students may join (past it `join` raises `RoomFull`).
        seed: Seeds the scenarios.
        clock: The monotonic clock, in seconds.
        code: The join code; None for a fresh one.
        token: The teacher token; None for a fresh one.

    Attributes:
        code: What students type to join (and send as their API key).
        token: What the teacher's dashboard sends.
        max_students: The room's size.
        seed: The scenarios' seed.
        scenario: The scenario running or last run, or None.
        history: Every scenario run, oldest first.
    """

    def __init__(
        self,
        *,
        max_students: int = 200,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        code: str | None = None,
        token: str | None = None,
    ) -> None:
        if isinstance(max_students, bool) or not isinstance(max_students, int) or max_students < 1:
            raise ValueError(
                f"max_students must be a whole number, 1 or more, got {max_students!r}."
            )
        self.max_students = max_students
        self.seed = seed
        self.code = code or join_code()
        self.token = token or teacher_token()
        self._clock = clock
        self._t0 = clock()
        self._lock = threading.Lock()
        self._lanes: dict[str, Lane] = {}
        self._seconds: OrderedDict[int, Counter[str]] = OrderedDict()
        self.scenario: Scenario | None = None
        self.history: list[Scenario] = []
        self.version = 0  # moves on every change, so the live view sends only news
        self.total = 0

    def now(self) -> float:
        """Seconds since the room opened."""
        return self._clock() - self._t0

    # --- students ------------------------------------------------------------------------------

    def join(self, raw_name: str) -> Lane:
        """Seat a student under a cleaned, unique name.

        Args:
            raw_name: The name as the student gave it.

        Returns:
            The student's lane (its name cleaned, with a suffix when it was taken).

        Raises:
            ValueError: Nothing printable is left of the name.
            RoomFull: The room is full.
        """
        name = clean_name(raw_name)
        if not name:
            raise ValueError("A student needs a name with at least one visible character.")
        with self._lock:
            return self._seat(name, unique=True)

    def _seat(self, name: str, *, unique: bool) -> Lane:
        if not unique and name in self._lanes:
            return self._lanes[name]
        if len(self._lanes) >= self.max_students:
            raise RoomFull(
                f"The room is full: it has {self.max_students} students, its limit; "
                "ask the teacher to start it with a larger --max-students."
            )
        name = unique_name(name, self._lanes)
        lane = Lane(name=name, seat=len(self._lanes) + 1, joined_s=self.now())
        self._lanes[name] = lane
        self.version += 1
        return lane

    def lanes(self) -> list[Lane]:
        """Every student's lane, in the order they joined."""
        with self._lock:
            return list(self._lanes.values())

    # --- counting ------------------------------------------------------------------------------

    def arrive(self, name: str, agent: str, digest: str, policy: dict[str, str]) -> Arrival:
        """Count a request of `name` (joined now if they never did) from `agent`.

        Args:
            name: The student's name, from the request's header.
            agent: Which of their agents sent it.
            digest: The request body's digest (the same again from one agent: a retry).
            policy: The retry policy the agent reported (attempts, jitter), if any.

        Returns:
            The arrival, as counted.

        Raises:
            RoomFull: An unknown name and a full room.
        """
        now = self.now()
        second = int(now)
        with self._lock:
            lane = self._seat(clean_name(name) or "anonymous", unique=False)
            lane.requests += 1
            lane.last_s = now
            if policy:
                lane.policy = policy
            previous = lane._last.get(agent)
            if previous is None:
                lane.agents += 1
            elif previous[0] == digest:
                lane.retries += 1
                answered_at = previous[1]
                if previous[2] and answered_at is not None:
                    lane.wait_s += max(0.0, now - answered_at)
            lane._last[agent] = (digest, None, False)
            lane._last.move_to_end(agent)
            while len(lane._last) > MAX_AGENTS:
                lane._last.popitem(last=False)
            counts = self._seconds.get(second)
            if counts is None:
                counts = self._seconds[second] = Counter()
                while len(self._seconds) > MAX_SECONDS:
                    self._seconds.popitem(last=False)
            counts["requests"] += 1
            self.total += 1
            self.version += 1
        return Arrival(lane=lane, agent=agent, digest=digest, second=second)

    def answer(self, arrival: Arrival, status: int, *, broken: bool = False) -> None:
        """Count how a request was answered: its status (0 for a dropped connection), and
        whether a 200 was cut off mid-answer."""
        now = self.now()
        failed = status != 200 or broken
        key = "broken" if broken else str(status) if status in (200, 400, 429, 529) else "other"
        with self._lock:
            counts = self._seconds.get(arrival.second)
            if counts is not None:
                counts[key] += 1
            lane = arrival.lane
            if failed:
                lane.failures += 1
            if lane._last.get(arrival.agent, ("",))[0] == arrival.digest:
                lane._last[arrival.agent] = (arrival.digest, now, failed)
            self.version += 1

    def per_second(self) -> list[tuple[int, Counter[str]]]:
        """Every second from the first arrival to now, quiet seconds included."""
        with self._lock:
            seconds = dict(self._seconds)
        if not seconds:
            return []
        first, last = min(seconds), max(max(seconds), int(self.now()))
        return [(s, seconds.get(s, Counter())) for s in range(first, last + 1)]

    # --- scenarios -----------------------------------------------------------------------------

    def start_scenario(self, name: str) -> Scenario:
        """Start `name` now (a running one is stopped first)."""
        check_scenario(name)
        now = self.now()
        with self._lock:
            if self.scenario is not None and self.scenario.running(now):
                self.scenario.stopped_s = now
            run = Scenario(name, started_s=now, seed=self.seed + len(self.history))
            self.scenario = run
            self.history.append(run)
            self.version += 1
            return run

    def stop_scenario(self) -> Scenario | None:
        """Stop the running scenario; the one stopped, or None when none ran."""
        now = self.now()
        with self._lock:
            run = self.scenario
            if run is None or not run.running(now):
                return None
            run.stopped_s = now
            self.version += 1
            return run

    def active(self) -> Scenario | None:
        """The scenario acting now, or None."""
        run = self.scenario
        return run if run is not None and run.running(self.now()) else None

    def peaks(self, window_s: float = 30.0) -> dict[str, Any]:
        """Peak-to-mean of arrivals in the `window_s` before the last scenario and since it
        started (to its end), so the teacher sees the herd form and, with jitter, spread."""
        run = self.scenario
        if run is None:
            return {"scenario": None, "before": None, "after": None}
        rows = dict(self.per_second())
        start = int(run.started_s)
        end = int(run.stopped_s) if run.stopped_s is not None else int(self.now())

        def ratio(lo: int, hi: int) -> float | None:
            counts = [rows[s]["requests"] for s in range(lo, hi + 1) if s in rows]
            while counts and counts[0] == 0:  # from the first arrival in the window
                counts.pop(0)
            return peak_to_mean(counts)

        return {
            "scenario": run.name,
            "before": ratio(max(0, start - int(window_s)), start - 1),
            "after": ratio(start, end),
        }
