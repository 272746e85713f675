"""Recording and replay: what recording costs per SSE chunk, and replaying a 10-minute session
in virtual time.

- Recording cost, side by side: the streaming benchmark's reply (20,000 text deltas from the
  mock server in its own process) read by an agent turn with and without `record=`, runs
  interleaved, medians compared; and the recorder alone fed that reply's bytes one SSE event
  per chunk (the worst case: a network read per event) into a real file, with an API key to
  mask, so the cost per chunk is measured without the network's noise.
- Replay in virtual time: a 10-minute session (the shipped Anthropic overload storm, repeated
  back to back) answered by `what_if` (no socket), and by an agent on a `VirtualClock` against
  `MockServer(replay=..., speed=math.inf)` over real HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import tempfile
import time
from pathlib import Path

from common import Goal, Report, median, mock_process

from nbagent import Agent, RetryPolicy, VirtualClock
from nbagent.demo._replay import replay_provider, shipped_recordings
from nbagent.recording import Recorder, Recording, read_recording, write_recording
from nbagent.simulate import what_if


async def _turn(url: str, deltas: int, record: Path | None) -> int:
    agent = Agent("demo", base_url=url, max_tokens=100_000, record=record)
    try:
        result = await agent.run(f"[demo:deltas={deltas}] Go.", show=False)
    finally:
        await agent.aclose()
        if agent.recorder is not None:
            agent.recorder.close()
    return len(result.final_text)


def _recorder_alone(events: list[bytes], tmp: Path, rounds: int) -> float:
    """Seconds for all `events` through `Exchange.chunk` into a real file, key masking on
    (the best of `rounds`)."""
    best = math.inf
    for i in range(rounds):
        rec = Recorder(tmp / f"alone-{i}.nbrec")
        ex = rec.exchange(
            "POST", "http://127.0.0.1/v1/messages", {}, b"{}", secrets=["demo-key-not-secret"]
        )
        ex.response(200, {"content-type": "text/event-stream"})
        t0 = time.perf_counter()
        for data in events:
            ex.chunk(data)
        best = min(best, time.perf_counter() - t0)
        ex.end()
        rec.close()
    return best


def _ten_minutes(tmp: Path) -> tuple[Path, int]:
    storm = read_recording(shipped_recordings()["anthropic-overload-storm"])
    span = storm.duration_s + 1.0
    copies = math.ceil(600.0 / span)
    exchanges = []
    for k in range(copies):
        for ex in storm.exchanges:
            shifted = dataclasses.replace(
                ex,
                number=len(exchanges) + 1,
                at=ex.at + k * span,
                body_sha256=f"{k}-{ex.body_sha256}",
            )
            exchanges.append(shifted)
    path = write_recording(
        tmp / "ten-minutes.nbrec", Recording(None, dict(storm.header), exchanges)
    )
    return path, copies * 3


async def _agent_replay(path: Path, prompts: int) -> int:
    provider = replay_provider(str(path), speed=math.inf)
    agent = Agent(provider, clock=VirtualClock(), limiter=False, retry=RetryPolicy(max_attempts=10))
    async with agent:
        for i in range(prompts):
            await agent.run(f"request {i}", show=False)
    return len(agent.attempts)


def run(short: bool = False) -> Report:
    deltas = 2_000 if short else 20_000
    repeats = 1 if short else 5
    rep = Report(f"recording and replay: {deltas:,} deltas; a 10-minute session in virtual time")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        plain: list[float] = []
        recorded: list[float] = []
        chunks = 0
        with mock_process() as url:
            asyncio.run(_turn(url, 10, None))
            for i in range(repeats):
                t0 = time.perf_counter()
                asyncio.run(_turn(url, deltas, None))
                plain.append(time.perf_counter() - t0)
                path = tmp / f"turn-{i}.nbrec"
                t0 = time.perf_counter()
                asyncio.run(_turn(url, deltas, path))
                recorded.append(time.perf_counter() - t0)
                chunks = len(read_recording(path).exchanges[0].chunks)
        reads = [data for _, data in read_recording(tmp / "turn-0.nbrec").exchanges[0].chunks]
        body = b"".join(reads)
        events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
        rounds = 3 if short else 7
        as_read = _recorder_alone(reads, tmp, rounds) / len(events)  # per SSE event
        worst = _recorder_alone(events, tmp, rounds) / len(events)
        p, r = median(plain), median(recorded)
        rep.table(
            [
                "agent turn",
                "seconds",
                "chunks recorded",
                "us/chunk over plain",
                "us/delta over plain",
            ],
            [
                ["without record=", p, 0, float("nan"), float("nan")],
                ["with record=", r, chunks, 1e6 * (r - p) / max(1, chunks), 1e6 * (r - p) / deltas],
            ],
        )
        rep.table(
            ["recorder alone, the same reply", "chunks", "SSE events", "us/SSE event"],
            [
                ["as the network delivered it", len(reads), len(events), 1e6 * as_read],
                ["worst case: one event per chunk", len(events), len(events), 1e6 * worst],
            ],
        )
        path, prompts = _ten_minutes(tmp)
        rec = read_recording(path)
        t0 = time.perf_counter()
        result = what_if(path, policy=RetryPolicy(max_attempts=10, seed=1))
        t_what_if = time.perf_counter() - t0
        t0 = time.perf_counter()
        attempts = asyncio.run(_agent_replay(path, prompts))
        t_agent = time.perf_counter() - t0
        rep.table(
            ["10-minute session", "recorded s", "answers", "attempts", "wall s"],
            [
                [
                    "what_if (virtual time, no socket)",
                    rec.duration_s,
                    len(rec),
                    len(result.attempts),
                    t_what_if,
                ],
                [
                    "agent on VirtualClock, replay speed=inf",
                    rec.duration_s,
                    len(rec),
                    attempts,
                    t_agent,
                ],
            ],
        )
    rep.goals.append(Goal("recording cost per SSE event of the reply, us", 1e6 * as_read, 5.0))
    rep.goals.append(
        Goal("10-minute session replayed in virtual time (what_if), s", t_what_if, 1.0)
    )
    rep.lines.append(
        "  (the agent over HTTP costs what a request to the mock server costs, whatever the "
        "recording's length: its waits are virtual, the replay does not pace at speed=inf)"
    )
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
