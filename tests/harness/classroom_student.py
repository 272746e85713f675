"""One student as its own process: join the room, run agents, print what was sent as JSON.

    python classroom_student.py URL CODE NAME AGENTS RUNS JITTER

Each of AGENTS agents runs RUNS prompts one after the other (the agents at once); the line
printed counts the HTTP requests the agents sent (their attempt logs) and how the runs ended,
so a test compares the room's counts with the clients' own.
"""

from __future__ import annotations

import asyncio
import json
import sys

from nbagent import Agent, RetryPolicy
from nbagent.classroom import join
from nbagent.errors import NbAgentError


async def main(url: str, code: str, name: str, agents: int, runs: int, jitter: str) -> None:
    seat = join(url, code=code, name=name)
    policy = RetryPolicy(
        max_attempts=8, initial_delay=0.5, jitter=None if jitter == "none" else "full"
    )
    crew = [seat.agent(retry=policy, limiter=False) for _ in range(agents)]
    ended: list[str] = []

    async def work(agent: Agent) -> None:
        for i in range(runs):
            try:
                await agent.run(f"What is {i} + 2?")
                ended.append("ok")
            except NbAgentError as err:
                ended.append(type(err).__name__)

    await asyncio.gather(*(work(a) for a in crew))
    sent = 0
    statuses: dict[str, int] = {}
    for agent in crew:
        frame = agent.attempts
        rows = frame[(frame["phase"] == "request") & frame["attempt"].notna()]
        sent += len(rows)
        for status in rows["status_code"].fillna(0).astype(int):
            statuses[str(status)] = statuses.get(str(status), 0) + 1
    print(json.dumps({"name": seat.name, "sent": sent, "statuses": statuses, "ended": ended}))


if __name__ == "__main__":
    url, code, name, agents, runs, jitter = sys.argv[1:7]
    asyncio.run(main(url, code, name, int(agents), int(runs), jitter))
