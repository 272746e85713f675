"""The first attempt of a fresh process against the later ones.

Each process is new, so what a process loads once is really paid: before, httpx loaded its
transport (httpcore, h11, anyio's backend) inside the first attempt's timed window, about a
quarter of a second that `duration_s` and the demo's picture showed as a slow server. A provider
now loads it when it is made. The script runs the demo model behind the loopback mock server, as
`nbagent demo` does: one prompt answered after a 500, then plain answers.
"""

from __future__ import annotations

import sys
from typing import Any

from common import ROOT, Goal, Report, fresh_python, median

_SCRIPT = """
import json, sys, time
runs = int(sys.argv[1])
t0 = time.perf_counter()
from nbagent import Agent
from nbagent.mock import MockServer
imported = time.perf_counter() - t0
with MockServer(["500"]) as server:
    t0 = time.perf_counter()
    agent = Agent("demo", base_url=server.url)
    made = time.perf_counter() - t0
    for i in range(runs):
        agent.run_sync(f"What is {i} + 1?", show=False)
    frame = agent.attempts
durations = [float(x) for x in frame[frame["phase"] == "request"]["duration_s"]]
print(json.dumps({"imported": imported, "made": made, "durations": durations}))
"""


def fresh_process(runs: int, root: str = ROOT) -> dict[str, Any]:
    """One fresh process of `_SCRIPT`: its import and Agent() times, every attempt's duration.
    `root`: the source tree to import nbagent from (this checkout unless given)."""
    return fresh_python(_SCRIPT, str(runs), root=root)


def run(short: bool = False) -> Report:
    repeats, runs = (2, 3) if short else (7, 6)
    rep = Report(f"first attempt: {repeats} fresh processes, {runs} prompts each")
    first, later, made = [], [], []
    for _ in range(repeats):
        r = fresh_process(runs)
        first.append(r["durations"][0])
        later.append(median(r["durations"][1:]))
        made.append(r["made"])
    extra = 1e3 * (median(first) - median(later))
    rep.table(
        ["fresh process", "1st attempt ms", "later ms", "extra ms", "Agent() ms"],
        [
            [
                "demo model, loopback mock",
                1e3 * median(first),
                1e3 * median(later),
                extra,
                1e3 * median(made),
            ]
        ],
    )
    rep.goals.append(Goal("first attempt, ms more than later ones", extra, 50.0))
    return rep


if __name__ == "__main__":
    run("--short" in sys.argv).show()
