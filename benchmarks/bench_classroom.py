"""The classroom's room server: CPU per request, and how late an arrival reaches the dashboard.

The room runs in its own process (as `nbagent classroom` does); this process plays the class,
sending bursts of Anthropic-format requests (with the join code and a student's name) from
many threads at once, while a teacher's live stream (SSE) is read in another thread.

- CPU per request: the room process's own CPU time (user + system, read from it before and
  after) over the requests it answered.
- Arrival-count lag: after each burst, the time from the last answer received to the first
  dashboard frame whose total counts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from common import Goal, Report, median, percentile

ROOM = """
import json, sys, time
from nbagent.classroom import Classroom
room = Classroom(capacity_rps=100000, max_students=1000).start()
print(json.dumps({"url": room.url, "code": room.code, "token": room.room.token}), flush=True)
for line in sys.stdin:
    print(json.dumps({"cpu": time.process_time(), "total": room.room.total}), flush=True)
room.stop()
"""

BODY = {"model": "demo", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}


def _watch(url: str, token: str, frames: list[tuple[float, int]], stop: threading.Event) -> None:
    """Read the dashboard's frames until stopped; the room closing the stream ends it quietly
    once `stop` is set."""
    try:
        with httpx.stream(
            "GET", url + "/classroom/events", params={"token": token}, timeout=60
        ) as s:
            for line in s.iter_lines():
                if line.startswith("data: "):
                    frames.append((time.perf_counter(), int(json.loads(line[6:])["total"])))
                if stop.is_set():
                    return
    except httpx.TransportError:
        if not stop.is_set():
            raise


def run(short: bool = False) -> Report:
    bursts, per_burst, students = (3, 40, 10) if short else (10, 400, 40)
    rep = Report(
        f"classroom room server: {bursts} bursts of {per_burst} requests, {students} students"
    )
    with subprocess.Popen(
        [sys.executable, "-c", ROOM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        room = json.loads(proc.stdout.readline())

        def usage() -> tuple[float, int]:
            proc.stdin.write("?\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            got = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            return float(got["cpu"]), int(got["total"])

        frames: list[tuple[float, int]] = []
        stop = threading.Event()
        watcher = threading.Thread(
            target=_watch, args=(room["url"], room["token"], frames, stop), daemon=True
        )
        watcher.start()
        clients = [
            httpx.Client(
                base_url=room["url"],
                headers={"x-api-key": room["code"], "x-nbagent-student": f"s{i}"},
            )
            for i in range(students)
        ]

        def send(i: int) -> int:
            return clients[i % students].post("/v1/messages", json=BODY).status_code

        lags: list[float] = []
        cpu0, total0 = usage()
        sent = 0
        with ThreadPoolExecutor(max_workers=students) as pool:
            for _ in range(bursts):
                statuses = list(pool.map(send, range(per_burst)))
                done_at = time.perf_counter()
                sent += len(statuses)
                assert set(statuses) == {200}, statuses
                while not any(t >= done_at and n >= total0 + sent for t, n in frames):
                    time.sleep(0.005)
                seen = min(t for t, n in frames if t >= done_at and n >= total0 + sent)
                lags.append(seen - done_at)
        cpu1, total1 = usage()
        stop.set()
        for c in clients:
            c.close()
        proc.stdin.close()
        proc.wait(30)
        watcher.join(10)  # the room's stream ended with it
    answered = total1 - total0
    cpu_ms = 1000 * (cpu1 - cpu0) / max(1, answered)
    rep.table(
        ["requests", "room CPU ms/request", "lag median s", "lag p95 s", "lag max s"],
        [[answered, cpu_ms, median(lags), percentile(lags, 0.95), max(lags)]],
    )
    if not short:
        rep.goals.append(Goal("room CPU per request (ms)", cpu_ms, 5.0))
        rep.goals.append(Goal("arrival-count lag, p95 (s)", percentile(lags, 0.95), 0.5))
    return rep


if __name__ == "__main__":
    run("--short" in sys.argv)
