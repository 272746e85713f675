"""`Classroom`: one room server for a class of notebooks, on the mock's route table."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..mock import MockServer
from ..mock._call import Call
from ..mock._faults import STREAM_KINDS
from ..mock._server import Served
from . import _frames
from ._capacity import Capacity, Refusal
from ._room import Arrival, Room
from ._routes import RoomPlan, room_routes
from ._scenarios import Scenario
from ._simulate import Simulation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Classroom"]

BROKEN_KINDS = STREAM_KINDS - {"stall"}  # a stall ends well, late


def _lan_address() -> str:
    """This machine's address on its network (no packet is sent), or 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


class Classroom(Served):
    """A room server: the demo model behind one shared capacity, scenarios the teacher starts,
    a lane per student, and a live dashboard. Use it as a context manager.

    Students join with `nbagent.classroom.join(room.url, code=room.code, name=...)`; the
    teacher opens `room.teacher_url`. It binds 127.0.0.1 (this machine only) unless `host`
    says otherwise: a room on a network is `host="0.0.0.0"`.

    Args:
        host: The address to listen on.
        port: The port; 0 for a free one.
        capacity_rps: Requests per second for the whole room.
        max_students: How many students may join.
        seed: Seeds the scenarios (and the simulated students).
        refusal: What a request past the capacity gets: "429" (with Retry-After) or "529".
        clock: The monotonic clock the room counts on.
        demo_delay_s: Seconds the demo model waits before each answer (an answer takes time,
            as a real model's does).

    Raises:
        ValueError: An argument out of range (one sentence naming it).

    Attributes:
        room: The students and the counters.
        capacity: The shared capacity.
        code: The join code (the students' API key).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        capacity_rps: float = 10,
        max_students: int = 200,
        seed: int = 0,
        *,
        refusal: Refusal = "429",
        clock: Callable[[], float] = time.monotonic,
        demo_delay_s: float = 0.0,
    ) -> None:
        self.room = Room(max_students=max_students, seed=seed, clock=clock)
        self.capacity = Capacity(capacity_rps, refusal=refusal, now=clock)
        self.code = self.room.code
        self.host_given = host
        self._pending: dict[int, Arrival] = {}
        self._lock = threading.Condition()
        self._simulations: list[Simulation] = []
        self.mock = MockServer(
            host=host,
            port=port,
            seed=seed,
            max_records=0,
            demo_delay_s=demo_delay_s,
            routes=room_routes(self),
            on_request=self._answered,
        )
        self.mock.plan = RoomPlan(self.room)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Classroom:
        """Open the room (idempotent).

        Returns:
            The room itself, so `room = Classroom().start()` reads well.
        """
        self.mock.start()
        return self

    def stop(self) -> None:
        """End the simulated students, the live views and the server (idempotent)."""
        for sim in self._simulations:
            sim.stop()
        self.mock.stop()

    def __repr__(self) -> str:
        where = self.url if self.mock.running else "closed"
        return f"Classroom({where}, {len(self.room.lanes())} students)"

    # --- addresses ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The room's address as students type it (this machine's network address when it
        listens on every interface)."""
        host = self.host_given
        if host in ("0.0.0.0", "", "::"):
            host = _lan_address()
        return f"http://{host}:{self.mock.port}"

    @property
    def teacher_url(self) -> str:
        """The dashboard, with the teacher token in it (never show it to the room)."""
        return f"{self.url}/classroom?token={self.room.token}"

    @property
    def join_line(self) -> str:
        """The line students run, with the room's URL and code."""
        return f'nbagent.classroom.join("{self.url}", code="{self.code}", name="your name")'

    @property
    def local_only(self) -> bool:
        """Whether only this machine can reach the room."""
        return self.host_given in ("127.0.0.1", "localhost", "::1")

    # --- the teacher's controls -----------------------------------------------------------------

    def scenario(self, name: str) -> Scenario:
        """Start a scenario now: "herd", "wall" or "storm" (a running one stops first).

        Args:
            name: The scenario.

        Returns:
            Its run (start, duration).

        Raises:
            ValueError: No scenario has that name.
        """
        return self.room.start_scenario(name)

    def stop_scenario(self) -> Scenario | None:
        """Stop the running scenario.

        Returns:
            The scenario stopped, or None when none was running.
        """
        return self.room.stop_scenario()

    def set_capacity(self, rps: Any) -> None:
        """Take a new capacity (requests per second for the whole room).

        Args:
            rps: Requests per second.

        Raises:
            ValueError: Not a number between 0 and 100000.
        """
        self.capacity.set(rps)
        self.room.version += 1

    def simulate(self, students: int, *, agents: int = 1) -> Simulation:
        """Fill the room with `students` seeded virtual students (half without jitter, half
        with full jitter), each running `agents` agents in a loop until the room stops.

        Args:
            students: How many.
            agents: Agents per student.

        Returns:
            The simulation (`stop()` ends it).
        """
        local = f"http://127.0.0.1:{self.mock.port}"
        sim = Simulation(local, self.code, students, agents=agents, seed=self.room.seed)
        self._simulations.append(sim)
        return sim.start()

    # --- what the teacher sees -----------------------------------------------------------------

    @property
    def arrivals(self) -> pd.DataFrame:
        """One row per second: requests and how they were answered (see `_frames`)."""
        return _frames.arrivals_frame(self.room)

    @property
    def students(self) -> pd.DataFrame:
        """One row per student: requests, retries, failures, waits, the policy reported."""
        return _frames.students_frame(self.room)

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until every request the room has taken is answered and counted.

        A client has its answer a moment before the room has counted how it was answered, so a
        script that reads `arrivals` or `students` right after its own requests calls this first.

        Args:
            timeout: Seconds to wait at most (a request still being answered, a stream or a
                client that went silent, keeps the room unsettled).

        Returns:
            True once nothing is in flight; False if something still was after `timeout`.
        """
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending, timeout)

    def snapshot(self) -> dict[str, Any]:
        """What the dashboard shows, as data.

        Returns:
            The live view's numbers (totals, capacity, scenario, peaks, arrivals, students).
        """
        return _frames.snapshot(self.room, self.capacity.rps, self.capacity.refusal)

    def figure(self) -> Figure:
        """Arrivals per second against the capacity, scenarios shaded.

        Returns:
            A matplotlib figure.
        """
        return _frames.figure(self.room, self.capacity.rps)

    # --- counting (the routes and the mock's request hook) ------------------------------------

    def pending(self, call: Call, arrival: Arrival) -> None:
        """Keep a counted request until the mock's hook says how it was answered.

        Args:
            call: The request.
            arrival: Its count in the room.
        """
        with self._lock:
            self._pending[id(call)] = arrival

    def _answered(self, call: Call, status: int) -> None:
        with self._lock:  # popped and counted at once, so `settle()` never sees one half-done
            arrival = self._pending.pop(id(call), None)
            if arrival is None:
                return
            broken = status == 200 and call.fault.kind in BROKEN_KINDS
            self.room.answer(arrival, status, broken=broken)
            self._lock.notify_all()
