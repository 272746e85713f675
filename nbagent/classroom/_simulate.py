"""Virtual students, so a teacher can rehearse alone and a reader can run a room offline.

Each is a real client of the room: it joins like a student, and its agents send real HTTP
requests with their own retry policy (half of the students without jitter, half with full
jitter, seeded), pausing a seeded think time between prompts. They all run on one event loop
in one background thread, without the process's shared pacing (each student is its own
client, as in a real room).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading

from .._core._retry import RetryPolicy
from ..errors import NbAgentError
from ._seat import Seat, join

__all__ = ["Simulation"]

PROMPTS = ("What is 2 + 2?", "Say hello to the class.", "Name a prime number.", "Count to three.")


class Simulation:
    """`students` virtual students in the room at `url`, each running `agents` agents in a loop.

    Args:
        url: The room's address.
        code: Its join code.
        students: How many virtual students.
        agents: Agents per student.
        seed: Seeds the policies' jitter and the think times.
        think_s: The longest pause between one student's prompts, in seconds.

    Attributes:
        seats: The seats taken.
        runs: Prompts answered.
        failures: Runs that ended in an error (after their retries).
    """

    def __init__(
        self,
        url: str,
        code: str,
        students: int,
        *,
        agents: int = 1,
        seed: int = 0,
        think_s: float = 2.0,
    ) -> None:
        if isinstance(students, bool) or not isinstance(students, int) or students < 0:
            raise ValueError(f"simulate needs a whole number of students, got {students!r}.")
        self.url, self.code = url, code
        self.students = students
        self.agents = max(1, int(agents))
        self.seed = seed
        self.think_s = think_s
        self.seats: list[Seat] = []
        self.runs = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> Simulation:
        """Seat the students and start their agents in a background thread."""
        for i in range(self.students):
            jitter = "none" if i % 2 == 0 else "full"
            name = f"virtual {i + 1:02d} ({jitter})"
            self.seats.append(join(self.url, code=self.code, name=name))
        self._thread = threading.Thread(target=self._run, name="nbagent-classroom-sim", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the students' loops (idempotent)."""
        self._stop.set()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: None)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._all())
        finally:
            loop.close()

    async def _all(self) -> None:
        tasks = [
            asyncio.ensure_future(self._student(i, seat, k))
            for i, seat in enumerate(self.seats)
            for k in range(self.agents)
        ]
        while not self._stop.is_set() and not all(t.done() for t in tasks):
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _student(self, i: int, seat: Seat, k: int) -> None:
        rng = random.Random(self.seed * 100_003 + i * 101 + k)
        policy = RetryPolicy(
            max_attempts=6,
            initial_delay=0.5,
            jitter=None if i % 2 == 0 else "full",
            seed=rng.randrange(2**31),
        )
        await asyncio.sleep(rng.uniform(0, self.think_s))
        while not self._stop.is_set():
            agent = seat.agent(retry=policy, limiter=False)
            try:
                await agent.run(rng.choice(PROMPTS), show=False)
                self.runs += 1
            except NbAgentError:
                self.failures += 1
            await asyncio.sleep(rng.uniform(0.2, self.think_s))
