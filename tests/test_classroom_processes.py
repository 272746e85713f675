"""Students as real separate processes against a real room: the room counts what they sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nbagent.classroom import Classroom

pytestmark = pytest.mark.e2e

STUDENT = Path(__file__).parent / "harness" / "classroom_student.py"


def students(room: Classroom, count: int, agents: int, runs: int) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(STUDENT),
                room.url,
                room.code,
                f"student {i}",
                str(agents),
                str(runs),
                "none" if i % 2 else "full",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]


def reports(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, object]]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def test_three_student_processes_through_a_storm_are_counted_exactly() -> None:
    with Classroom(capacity_rps=6, seed=3) as room:
        room.scenario("storm")
        done = reports(students(room, 3, agents=2, runs=1), timeout=300)
        sent = {str(r["name"]): int(r["sent"]) for r in done}  # type: ignore[call-overload]
        assert room.settle()
        frame, lanes = room.arrivals, room.students.set_index("name")
        assert sorted(sent) == ["student 0", "student 1", "student 2"]
        assert frame["requests"].sum() == sum(sent.values())
        for name, count in sent.items():
            assert lanes.loc[name, "requests"] == count
            assert lanes.loc[name, "agents"] == 2
        answered = frame[["status_200", "status_429", "status_529", "broken"]].to_numpy().sum()
        assert answered == sum(sent.values())  # every request: a 200 or the scenario's refusal
        assert frame["other"].sum() == 0
        jitters = {name: lanes.loc[name, "jitter"] for name in sent}
        assert jitters == {"student 0": "full", "student 1": "none", "student 2": "full"}
