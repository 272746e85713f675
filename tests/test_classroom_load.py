"""A full room on one machine: 40 student processes with 4 agents each through a storm.

Every request is answered (a 200, or the scenario's 429/529/broken stream), the room's counts
equal the requests the clients counted themselves, and the teacher's live stream keeps sending
frames from the first arrival to the last.
"""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from test_classroom_processes import reports, students

from nbagent.classroom import Classroom

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.load]


def test_forty_students_with_four_agents_each_through_a_storm() -> None:
    with Classroom(capacity_rps=40, max_students=200, seed=5) as room:
        frames: list[int] = []
        broken: list[httpx.TransportError] = []
        stop = threading.Event()

        def watch() -> None:
            params = {"token": room.room.token}
            try:
                with httpx.stream(
                    "GET", room.url + "/classroom/events", params=params, timeout=None
                ) as s:
                    for line in s.iter_lines():
                        if line.startswith("data: "):
                            frames.append(int(json.loads(line[6:])["total"]))
                        if stop.is_set():
                            return
            except (
                httpx.TransportError
            ) as err:  # the room closing ends the stream: fine once stopped
                if not stop.is_set():
                    broken.append(err)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        procs = students(room, 40, agents=4, runs=1)
        while room.room.total < 20 and all(p.poll() is None for p in procs):
            stop.wait(0.05)
        room.scenario("storm")
        done = reports(procs, timeout=900)
        sent = sum(int(r["sent"]) for r in done)  # type: ignore[call-overload]
        while not frames or frames[-1] < sent:
            stop.wait(0.05)
            assert watcher.is_alive()
        stop.set()
        assert room.settle()
        frame = room.arrivals
        assert frame["requests"].sum() == sent == room.room.total
        answered = frame[["status_200", "status_429", "status_529", "broken"]].to_numpy().sum()
        assert answered == sent and frame["other"].sum() == 0
        assert len(room.students) == 40
        assert (room.students["agents"] == 4).all()
        assert frames == sorted(frames)  # the counts only grow
        during = [n for n in frames if 0 < n < sent]
        assert len(during) >= 5  # frames kept coming while the class was running
        assert httpx.get(room.teacher_url).status_code == 200
    watcher.join(timeout=60)
    assert not watcher.is_alive() and broken == []
