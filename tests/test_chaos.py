"""Chaos soak: whatever fails, the conversation stays correct and nothing is left open.

Two soaks:

* virtual time: at least 1,000 agent runs against a scripted model that faults on ~35% of its
  attempts (every provider fault kind, streams broken mid-reply, `x-should-retry` overrides,
  far Retry-Afters) while tools fail 20% of the time (raise, time out) and the model sends
  unknown tools, broken JSON and schema-breaking arguments;
* real sockets: at least 100 runs against the loopback mock server with random faults of every
  kind it knows, over both wire formats.

Every run must end in success or a typed error of DESIGN's table; the history is unchanged by a
failed run and grows by exactly the run's messages on success; no assistant message is
duplicated, no partial text is committed; every tool_use has exactly one tool_result, in order;
no run passes its wall budget; no task, socket or file is left open.

Short mode (the default, used by CI) meets those counts; `NBAGENT_SOAK=full` runs ten times more:

    NBAGENT_SOAK=full .venv/bin/pytest tests/test_chaos.py -s
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from reliability_support import (
    TABLE_ERRORS,
    check_conversation,
    check_no_duplicates,
    check_no_marker,
    check_no_other_tasks,
    check_run_events,
    no_leaks,
)

from nbagent import (
    Agent,
    Budget,
    Message,
    Partial,
    Reply,
    RetryPolicy,
    ScriptedModel,
    ToolUse,
    VirtualClock,
    fault,
    tool,
)
from nbagent._loop._tools import Tool
from nbagent.events import Event, MessageCommitted, ToolCallFinished
from nbagent.providers._anthropic import AnthropicProvider
from nbagent.providers._base import ModelRequest
from nbagent.providers._openai_chat import OpenAIProvider

FULL = os.environ.get("NBAGENT_SOAK", "").strip().lower() == "full"
VIRTUAL_RUNS = 10_000 if FULL else 1_000
SOCKET_RUNS = 1_000 if FULL else 100
SEED = int(os.environ.get("NBAGENT_SOAK_SEED", "20240607"))

# Every provider fault kind the scripted model knows, weighted so that most runs can still
# succeed: the retryable ones often, the final ones rarely.
RETRYABLE_KINDS = ("429", "529", "500", "502", "503", "504", "408", "transport", "stream", "empty")
FINAL_KINDS = ("quota", "401", "403", "404", "400", "invalid", "filtered")
FAULT_RATE = 0.35
TOOL_FAILURE_RATE = 0.20
SUMMARY_SYSTEM = "You summarise conversations faithfully and briefly."
PARTIAL_MARKER = "PARTIAL~"
WALL_BUDGETS = (20.0, 60.0, 900.0)  # the virtual runs' wall budgets (Budget.max_wall_s)
TOOL_SLEEP_MAX = 2.0  # virtual seconds a tool may take; a turn may pass the budget by this
REAL_TIMEOUT_S = 20.0  # a run that takes longer in real time is hung


def report(title: str, counts: collections.Counter[str], extra: dict[str, Any]) -> str:
    lines = [f"{title}: {sum(counts.values())} runs"]
    lines += [f"  {k:<24} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])]
    lines += [f"  ({k}: {v})" for k, v in extra.items()]
    text = "\n".join(lines)
    print("\n" + text)
    return text


# -- the chaotic model ---------------------------------------------------------------------------


@dataclass
class Chaos:
    """Decides each request's fate from a seeded generator; counts what it injected."""

    rng: random.Random
    serial: int = 0
    requests: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def fault(self) -> Any:
        r = self.rng
        roll = r.random()
        if roll < 0.15:  # a stream that breaks off after some text (or thinking)
            err = fault(r.choice(("stream", "529", "500", "transport")))
            self.faults["partial:" + type(err).__name__] += 1
            text = f"{PARTIAL_MARKER}{self.next_serial()} half an answer"
            return Partial(err, text=text, thinking=PARTIAL_MARKER if r.random() < 0.3 else "")
        if roll < 0.20:  # the server's x-should-retry verdict
            kind = r.choice(RETRYABLE_KINDS + FINAL_KINDS)
            verdict = r.random() < 0.5
            self.faults[f"{kind}:should_retry={verdict}"] += 1
            return fault(kind, should_retry=verdict)
        if roll < 0.25:  # a Retry-After: near (honoured) or far (becomes a quota error)
            wait = r.choice((0.0, 0.5, 3.0, 45.0, 300.0))
            self.faults[f"429:retry_after={wait:g}"] += 1
            return fault("429", retry_after=wait)
        if roll < 0.28:  # a raw socket error from deep inside a provider
            self.faults["ConnectionResetError"] += 1
            return ConnectionResetError("connection reset by peer")
        if roll < 0.35:
            self.faults["overflow"] += 1
            return fault("overflow")
        kind = r.choice(FINAL_KINDS) if r.random() < 0.12 else r.choice(RETRYABLE_KINDS)
        self.faults[kind] += 1
        return fault(kind)

    def __call__(self, request: ModelRequest) -> Any:
        self.requests += 1
        r = self.rng
        if r.random() < FAULT_RATE:
            return self.fault()
        n = self.next_serial()
        if request.system == SUMMARY_SYSTEM:
            return Reply(f"summary #{n}: the user asked things and tools answered.")
        turns = sum(1 for m in request.messages if m.role == "assistant")
        roll = r.random()
        if roll < 0.04:
            self.faults["max_tokens-empty"] += 1
            return Reply(stop_reason="max_tokens")
        if turns < 4 and roll < 0.55:
            calls = [self.call() for _ in range(r.randint(1, 3))]
            text = f"calling tools (#{n})" if r.random() < 0.5 else ""
            thinking = f"let me think #{n}" if r.random() < 0.2 else ""
            return Reply(text, calls, thinking=thinking, input_tokens=r.randint(50, 4000))
        return Reply(f"final answer #{n}", input_tokens=r.randint(50, 4000))

    def call(self) -> ToolUse:
        r = self.rng
        roll = r.random()
        if roll < 0.04:
            return ToolUse("no_such_tool", {"x": 1})
        if roll < 0.08:
            return ToolUse("flaky_sync", '{"x": 3, ')  # arguments that are not JSON
        if roll < 0.12:
            return ToolUse("flaky_async", {"x": "three"})  # breaks the schema
        name = r.choice(("flaky_sync", "flaky_async"))
        return ToolUse(name, {"x": r.randrange(1_000_000)})


def chaos_tools(clock: VirtualClock) -> list[Tool]:
    """Two tools that fail on 20% of their calls, decided by the argument (deterministic)."""

    def fails(x: int) -> int | None:
        """None: succeed; else the failure mode 0..3."""
        return None if (x % 100) >= TOOL_FAILURE_RATE * 100 else x % 4

    def flaky_sync(x: int) -> str:
        """A synchronous tool (runs in a worker thread)."""
        mode = fails(x)
        if mode is None:
            return f"sync ok {x}"
        if mode == 0:
            raise ValueError(f"bad value {x}")
        if mode == 1:
            raise KeyError(x)
        if mode == 2:
            raise PermissionError(f"not allowed: {x}")
        time.sleep(0.05)  # past its 0.01 s timeout
        return "too late"

    async def flaky_async(x: int) -> str:
        """An asynchronous tool that takes virtual time."""
        await clock.sleep((x % 7) / 7 * TOOL_SLEEP_MAX)
        mode = fails(x)
        if mode is None:
            return f"async ok {x}"
        if mode == 3:
            await asyncio.sleep(0.05)  # real time, past its 0.01 s timeout
            return "too late"
        raise RuntimeError(f"async tool failed for {x}")

    return [tool(flaky_sync), tool(flaky_async)]


# -- one run and its checks ----------------------------------------------------------------------


@dataclass
class Tally:
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    tool_calls: int = 0
    tool_errors: int = 0
    attempts: int = 0


class Recorder:
    """A subscriber keeping every event and the history as it stood after each commit."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.agent: Agent | None = None
        self.committed_history: list[Message] | None = None

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, MessageCommitted) and self.agent is not None:
            self.committed_history = list(self.agent.history)


async def checked_run(
    agent: Agent,
    rec: Recorder,
    prompt: str,
    tally: Tally,
    *,
    now: Callable[[], float],
    wall_budget: float,
    slack: float,
    real_timeout: float = REAL_TIMEOUT_S,
    unique_replies: bool = True,
) -> None:
    """Run once and check every invariant of the issue.

    `unique_replies`: every reply the model gives is distinct (the chaos model numbers them),
    so equal assistant messages in the transcript can only be a duplicated commit.
    """
    rec.agent = agent
    rec.committed_history = None
    history0 = list(agent.history)
    transcript0 = list(agent.transcript)
    first_event = len(rec.events)
    started = now()
    try:
        result = await asyncio.wait_for(agent.run(prompt, show=False), real_timeout)
    except asyncio.TimeoutError:
        pytest.fail(f"a run hung for {real_timeout} s of real time: {agent!r}")
    except TABLE_ERRORS as exc:
        tally.outcomes[type(exc).__name__] += 1
        # the failed step left the history exactly as the last committed step did
        before_step = history0 if rec.committed_history is None else rec.committed_history
        assert agent.history == before_step, f"{type(exc).__name__} changed the history"
        committed = [e.message for e in rec.events[first_event:] if isinstance(e, MessageCommitted)]
        assert agent.transcript == [*transcript0, *committed]
        if not committed:
            assert agent.history == history0
    else:
        tally.outcomes["success"] += 1
        new = result.messages
        assert new and new[0].role == "user" and new[-1].role == "assistant"
        assert agent.transcript == [*transcript0, *new]
        assert rec.committed_history == agent.history
        assert result.final_text == new[-1].text
    elapsed = now() - started
    assert elapsed <= wall_budget + slack, f"a run took {elapsed:g} s, budget {wall_budget:g} s"
    for where, msgs in (("history", agent.history), ("transcript", agent.transcript)):
        check_conversation(msgs, where=where)
        check_no_marker(msgs, PARTIAL_MARKER, where=where)
    if unique_replies:
        check_no_duplicates(agent.transcript)
    run_events = rec.events[first_event:]
    # each message is committed once, at the next index of the transcript
    indices = [e.index for e in run_events if isinstance(e, MessageCommitted)]
    assert indices == list(range(len(transcript0), len(agent.transcript))), indices
    check_run_events(run_events)
    finished = [e for e in run_events if isinstance(e, ToolCallFinished)]
    tally.tool_calls += len(finished)
    tally.tool_errors += sum(e.is_error for e in finished)
    await check_no_other_tasks()


# -- the virtual-time soak -----------------------------------------------------------------------


def make_virtual_agent(rng: random.Random, chaos: Chaos) -> tuple[Agent, Recorder, VirtualClock]:
    clock = VirtualClock()
    rec = Recorder()
    jitter = rng.choice(["full", "equal", 0.3, None])
    policy = RetryPolicy(
        max_attempts=rng.randint(1, 6),
        initial_delay=rng.choice([0.0, 0.5, 2.0]),
        max_delay=rng.choice([5.0, 30.0]),
        jitter=jitter,
        max_retry_after=60.0,
        seed=rng.randrange(1 << 30),
        retry_after_partial=rng.choice(["always", "always", "reasoning_only", "never"]),
    )
    tools = chaos_tools(clock)
    agent = Agent(
        ScriptedModel([chaos] * 10_000),
        tools=tools,
        clock=clock,
        retry=policy,
        budget=Budget(max_turns=rng.choice([3, 6, 10]), max_wall_s=rng.choice(WALL_BUDGETS)),
        context_window=rng.choice([None, None, 6_000]),
        tool_timeout=0.01,
        subscribers=[rec],
    )
    return agent, rec, clock


@pytest.mark.slow
def test_virtual_time_soak() -> None:
    rng = random.Random(SEED)
    chaos = Chaos(random.Random(SEED + 1))
    tally = Tally()
    runs = 0
    t0 = time.perf_counter()

    async def session(agent: Agent, rec: Recorder, clock: VirtualClock, n: int) -> None:
        for i in range(n):
            await checked_run(
                agent,
                rec,
                f"task {i}: use the tools",
                tally,
                now=clock.now,
                wall_budget=agent.budget.max_wall_s or 0.0,
                slack=TOOL_SLEEP_MAX + 1e-6,
            )
        frame = agent.attempts
        tally.attempts += int((frame["phase"] != "tool").sum())
        assert set(frame["outcome"].dropna()) <= {"ok", "error", "cancelled"}
        await agent.aclose()

    with no_leaks():
        while runs < VIRTUAL_RUNS:
            batch = []
            while runs < VIRTUAL_RUNS and len(batch) < 50:
                n = min(rng.randint(1, 4), VIRTUAL_RUNS - runs)
                batch.append((*make_virtual_agent(rng, chaos), n))
                runs += n

            async def main(batch: list[Any] = batch) -> None:
                for agent, rec, clock, n in batch:
                    await session(agent, rec, clock, n)
                await check_no_other_tasks()

            asyncio.run(main())

    total = sum(tally.outcomes.values())
    text = report(
        "virtual-time soak",
        tally.outcomes,
        {
            "requests": chaos.requests,
            "faulted requests": sum(chaos.faults.values()),
            "tool calls": tally.tool_calls,
            "tool error results": tally.tool_errors,
            "seconds": round(time.perf_counter() - t0, 1),
        },
    )
    assert total == VIRTUAL_RUNS >= 1000, text
    assert sum(chaos.faults.values()) >= 0.30 * chaos.requests, text
    kinds = {k.split(":")[0] for k in chaos.faults}
    missing = set(RETRYABLE_KINDS + FINAL_KINDS + ("overflow",)) - kinds
    assert not missing, f"fault kinds never injected: {missing}\n{text}"
    # the mix exercised both ends of the table
    assert tally.outcomes["success"] >= total * 0.3, text
    assert len(tally.outcomes) >= 8, text
    assert tally.tool_errors >= 0.2 * tally.tool_calls, text


# -- the real-socket soak ------------------------------------------------------------------------

# Every fault kind of the mock server, with the delays scaled down to milliseconds.
MOCK_FAULT_RATES: dict[str, float] = {
    "429:retry_after=0.01": 0.03,
    "quota": 0.01,
    "529": 0.03,
    "overloaded_midstream": 0.03,
    "500": 0.03,
    "502": 0.02,
    "503": 0.02,
    "504": 0.02,
    "408": 0.02,
    "409": 0.02,
    "400": 0.005,
    "401": 0.005,
    "402": 0.005,
    "403": 0.005,
    "404": 0.005,
    "413": 0.005,
    "overflow": 0.02,
    "close": 0.03,
    "drop_after_tokens=2": 0.03,
    "malformed": 0.03,
    "stall=0.3": 0.01,
    "empty": 0.02,
    "slow=0.01": 0.02,
    "500:should_retry=false": 0.005,
    "400:should_retry=true": 0.005,
}
MOCK_PROMPTS = (
    "What is 17 * 23 + 4?",
    "Read the file notes.txt and tell me what it says.",
    "[demo:unknown_tool] Tidy up the data folder for me.",
    "Read the file secrets/plan.txt please.",
    "List the files in the data folder.",
    "[demo:bad_json] What is 2 + 2?",
    "[demo:bad_args] What is 3 * 3?",
    "Hello there.",
)


@pytest.mark.e2e
@pytest.mark.slow
def test_mock_server_soak_over_real_sockets() -> None:
    from nbagent.demo._tools import calculator, file_tools
    from nbagent.mock import serve

    assert sum(MOCK_FAULT_RATES.values()) >= 0.30
    rng = random.Random(SEED + 2)
    tally = Tally()
    t0 = time.perf_counter()
    wall = 10.0
    runs = 0
    with no_leaks(), serve(seed=SEED, fault_rates=MOCK_FAULT_RATES) as server:

        async def session(fmt: str, n: int) -> None:
            nonlocal runs
            provider: AnthropicProvider | OpenAIProvider
            if fmt == "anthropic":
                provider = AnthropicProvider(
                    "claude-mock", api_key="sk-mock", base_url=server.url, idle_timeout=0.15
                )
            else:
                provider = OpenAIProvider(
                    "gpt-mock",
                    api_key="sk-mock",
                    base_url=server.openai_base_url,
                    idle_timeout=0.15,
                )
            rec = Recorder()
            agent = Agent(
                provider,
                tools=[calculator, *file_tools()],
                retry=RetryPolicy(
                    max_attempts=rng.randint(2, 5),
                    initial_delay=0.001,
                    max_delay=0.01,
                    seed=rng.randrange(1 << 30),
                ),
                budget=Budget(max_wall_s=wall, max_turns=8),
                limiter=False,
                subscribers=[rec],
            )
            try:
                for _ in range(n):
                    await checked_run(
                        agent,
                        rec,
                        rng.choice(MOCK_PROMPTS),
                        tally,
                        now=agent.clock.now,
                        wall_budget=wall,
                        slack=1.0,
                        unique_replies=False,  # the demo model is deterministic
                    )
                    runs += 1
            finally:
                await agent.aclose()

        async def main() -> None:
            while runs < SOCKET_RUNS:
                fmt = rng.choice(("anthropic", "openai"))
                await session(fmt, min(rng.randint(1, 3), SOCKET_RUNS - runs))
            await check_no_other_tasks()

        asyncio.run(main())
        served = len(server.requests)

    text = report(
        "real-socket soak (mock server)",
        tally.outcomes,
        {
            "requests served": served,
            "tool calls": tally.tool_calls,
            "tool error results": tally.tool_errors,
            "seconds": round(time.perf_counter() - t0, 1),
        },
    )
    assert sum(tally.outcomes.values()) == SOCKET_RUNS >= 100, text
    assert tally.outcomes["success"] >= SOCKET_RUNS * 0.3, text


def test_history_survives_failures_between_successes() -> None:
    """A failed run between two good ones leaves no trace; the next run continues cleanly."""
    model = ScriptedModel(
        [
            "first",
            fault("401"),
            Partial(fault("stream"), text=PARTIAL_MARKER + " broken"),
            "second",
        ]
    )
    agent = Agent(model, clock=VirtualClock(), retry=RetryPolicy(seed=1))

    async def main() -> None:
        await agent.run("one", show=False)
        with pytest.raises(TABLE_ERRORS):
            await agent.run("two", show=False)
        await agent.run("three", show=False)

    asyncio.run(main())
    assert [m.text for m in agent.history] == ["one", "first", "three", "second"]
    check_no_marker(agent.history, PARTIAL_MARKER)
    assert model.requests[-1].messages[:2] == (Message.user("one"), Message.assistant("first"))


def test_the_leak_check_itself_catches_a_leak() -> None:
    """The soak's `no_leaks` is not vacuous: an unclosed socket and an unawaited coroutine fail."""
    import socket

    async def never_awaited() -> None:
        pass

    with pytest.raises(AssertionError, match="ResourceWarning"), no_leaks():
        s = socket.socket()
        del s
    with pytest.raises(AssertionError, match="never awaited"), no_leaks():
        c = never_awaited()
        del c
