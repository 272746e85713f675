"""Streaming overhead: one reply of many text deltas, read by nbagent and by two baselines.

The mock server runs in its own process. nbagent runs a full agent turn with the attempt log and
a timeline widget model subscribed; the bare loop reads the same SSE stream with httpx +
httpx-sse and JSON-decodes every event; the SDK rows use the official `anthropic` client.
Runs are interleaved, and the median of the repeats is reported.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from common import Goal, Report, median, mock_process
from httpx_sse import aconnect_sse

from nbagent import Agent

MODEL = "demo"


def _body(deltas: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 100_000,
        "stream": True,
        "messages": [{"role": "user", "content": f"[demo:deltas={deltas}] Go."}],
    }


async def nbagent_turn(url: str, deltas: int) -> int:
    from nbagent.notebook._widget import TimelineWidget

    agent = Agent("demo", base_url=url, max_tokens=100_000)
    agent.subscribe(TimelineWidget())  # the widget model (no front end attached)
    try:
        result = await agent.run(f"[demo:deltas={deltas}] Go.", show=False)
    finally:
        await agent.aclose()
    assert len(agent.attempts) >= 1
    return len(result.final_text)


async def bare_loop(url: str, deltas: int) -> int:
    text: list[str] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        aconnect_sse(
            client,
            "POST",
            url + "/v1/messages",
            json=_body(deltas),
            headers={"x-api-key": "bench", "anthropic-version": "2023-06-01"},
        ) as es,
    ):
        async for sse in es.aiter_sse():
            data = json.loads(sse.data)
            if data.get("type") == "content_block_delta":
                text.append(data["delta"].get("text", ""))
    return len("".join(text))


async def sdk_stream_helper(url: str, deltas: int) -> int:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=url, api_key="bench", max_retries=0)
    try:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=100_000,
            messages=[{"role": "user", "content": f"[demo:deltas={deltas}] Go."}],
        ) as stream:
            async for _ in stream.text_stream:
                pass
            message = await stream.get_final_message()
    finally:
        await client.close()
    return sum(len(getattr(b, "text", "")) for b in message.content)


async def sdk_raw_events(url: str, deltas: int) -> int:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=url, api_key="bench", max_retries=0)
    text: list[str] = []
    try:
        stream = await client.messages.create(
            model=MODEL,
            max_tokens=100_000,
            messages=[{"role": "user", "content": f"[demo:deltas={deltas}] Go."}],
            stream=True,
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
    finally:
        await client.close()
    return len("".join(text))


CLIENTS: list[tuple[str, Callable[[str, int], Awaitable[int]]]] = [
    ("nbagent (agent turn + attempt log + widget model)", nbagent_turn),
    ("bare httpx + httpx-sse + json.loads", bare_loop),
    ("anthropic SDK messages.stream()", sdk_stream_helper),
    ("anthropic SDK create(stream=True)", sdk_raw_events),
]


def run(short: bool = False) -> Report:
    deltas = 2_000 if short else 20_000
    repeats = 1 if short else 5
    rep = Report(f"streaming: one reply of {deltas:,} text deltas")
    times: dict[str, list[float]] = {name: [] for name, _ in CLIENTS}
    with mock_process() as url:
        for _, fn in CLIENTS:  # warm up: imports, the server process
            asyncio.run(fn(url, 10))
        for _ in range(repeats):
            for name, fn in CLIENTS:
                t0 = time.perf_counter()
                n = asyncio.run(fn(url, deltas))
                times[name].append(time.perf_counter() - t0)
                assert n > deltas, f"{name} read only {n} characters"
    med = {k: median(v) for k, v in times.items()}
    ours = med[CLIENTS[0][0]]
    rows = [[k, v, v / ours if ours else float("nan"), 1e6 * v / deltas] for k, v in med.items()]
    rep.table(["client", "seconds", "x nbagent", "us/delta"], rows)
    rep.goals.append(Goal("nbagent / bare loop", ours / med[CLIENTS[1][0]], 1.1))
    rep.goals.append(Goal("nbagent / SDK messages.stream()", ours / med[CLIENTS[2][0]], 1.0))
    rep.goals.append(Goal("nbagent / SDK create(stream=True)", ours / med[CLIENTS[3][0]], 1.0))
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
