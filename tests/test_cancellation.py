"""Cancellation at any point leaves the history exactly as before the step; the agent runs again.

A manual `VirtualClock` turns every wait of the run into a point where the test can cancel: the
model's connect and its gaps between deltas (a gated scripted model), backoff sleeps, tools that
take time, and the summary request of a compaction. The random test walks the run from sleep to
sleep and cancels at a random one; the targeted tests name each point. Over real sockets the mock
server holds the response back (connect) or stalls mid-stream while the run is cancelled.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from reliability_support import (
    check_conversation,
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
from nbagent import errors as E
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    CompactionStarted,
    Event,
    MessageCommitted,
    RetryScheduled,
    RunFinished,
    ToolCallStarted,
)
from nbagent.providers._base import ModelRequest, StreamPart

SUMMARY_SYSTEM = "You summarise conversations faithfully and briefly."


class GatedModel:
    """A scripted model whose connect and every gap between parts is a sleep on the clock."""

    def __init__(self, script: list[Any], clock: VirtualClock, *, gap: float = 0.1) -> None:
        self.inner = ScriptedModel(script)
        self.name = "scripted"
        self.model = "gated"
        self.clock = clock
        self.gap = gap
        self.connects = 0

    @property
    def requests(self) -> list[ModelRequest]:
        return self.inner.requests

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self.connects += 1
        await self.clock.sleep(1.0)  # connect
        gen = self.inner.stream(request)
        try:
            async for part in gen:
                yield part
                await self.clock.sleep(self.gap)  # between deltas
        finally:
            await gen.aclose()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.agent: Agent | None = None
        self.after_commit: list[Message] | None = None

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, MessageCommitted) and self.agent is not None:
            self.after_commit = list(self.agent.history)


@tool
async def slow_lookup(key: str) -> str:
    """Look a key up slowly (virtual time)."""
    clock = CLOCK.get("clock")
    assert clock is not None
    await clock.sleep(5.0)
    return f"value of {key}"


@tool
def blocking_lookup(key: str) -> str:
    """Look a key up in a worker thread (real time)."""
    time.sleep(0.02)
    return f"blocking value of {key}"


CLOCK: dict[str, VirtualClock] = {}


def base_history() -> list[Message]:
    return [Message.user("earlier question"), Message.assistant("earlier answer " + "x" * 400)]


def chaotic_script(rng: random.Random) -> list[Any]:
    """A run with retries, tools, a compaction and its summary, in some order."""
    script: list[Any] = []
    for _ in range(rng.randint(0, 2)):
        script.append(
            rng.choice(
                [
                    fault("500"),
                    fault("429", retry_after=2),
                    Partial(fault("stream"), text="broken half"),
                ]
            )
        )
    if rng.random() < 0.4:
        script += [fault("overflow"), "summary of the conversation"]
    calls = [
        ToolUse(rng.choice(["slow_lookup", "blocking_lookup"]), {"key": f"k{i}"})
        for i in range(rng.randint(1, 3))
    ]
    script.append(Reply("let me look", calls))
    if rng.random() < 0.5:
        script.append(fault("503"))
    script.append("all done")
    return script


async def drive(agent: Agent, clock: VirtualClock, prompt: str, cancel_at: int) -> int:
    """Run `prompt`, advancing the clock from sleep to sleep; cancel at sleep number
    `cancel_at`. Returns how many sleeps were passed (== cancel_at when it cancelled)."""
    handle = agent.start(prompt, show=False)
    seen = 0
    while not handle.done():
        spins = 0
        while clock.sleepers == 0 and not handle.done():
            await asyncio.sleep(0 if spins < 50 else 0.001)  # a worker thread may be busy
            spins += 1
        if handle.done():
            break
        if seen == cancel_at:
            handle.cancel()
            with pytest.raises(E.Aborted):
                await handle
            return seen
        seen += 1
        clock.advance(max(0.0, clock._waiters[0][0] - clock.now()))
    await handle
    return seen


def check_cancelled(agent: Agent, rec: Recorder, first: int, history0: list[Message]) -> None:
    expected = rec.after_commit if rec.after_commit is not None else history0
    assert agent.history == expected
    check_conversation(agent.history)
    check_conversation(agent.transcript, where="transcript")
    run_events = rec.events[first:]
    check_run_events(run_events)
    finished = run_events[-1]
    assert isinstance(finished, RunFinished) and finished.end_reason == "cancelled"
    assert finished.error == "Aborted"


def test_cancel_at_random_points_then_run_again() -> None:
    rng = random.Random(11)
    points: dict[str, int] = {}

    async def one(seed: int) -> None:
        clock = VirtualClock(auto_advance=False)
        CLOCK["clock"] = clock
        r = random.Random(seed)
        script = chaotic_script(r)
        rec = Recorder()
        model = GatedModel([*script, "after the cancel"], clock)
        agent = Agent(
            model,
            tools=[slow_lookup, blocking_lookup],
            clock=clock,
            retry=RetryPolicy(seed=seed, initial_delay=1.0),
            history=base_history(),
            subscribers=[rec],
            budget=Budget(max_turns=10),
        )
        rec.agent = agent
        # how many sleeps does the whole run take? (a dry run on a twin agent)
        twin_clock = VirtualClock(auto_advance=False)
        CLOCK["clock"] = twin_clock
        twin = Agent(
            GatedModel(list(script), twin_clock),
            tools=[slow_lookup, blocking_lookup],
            clock=twin_clock,
            retry=RetryPolicy(seed=seed, initial_delay=1.0),
            history=base_history(),
        )
        total = await drive(twin, twin_clock, "do the task", cancel_at=10_000)
        CLOCK["clock"] = clock
        cancel_at = r.randrange(total)
        first = len(rec.events)
        history0 = list(agent.history)
        transcript0 = list(agent.transcript)
        await drive(agent, clock, "do the task", cancel_at)
        # classify where it was cancelled, for the report
        last = [
            e
            for e in rec.events[first:]
            if not isinstance(e, RunFinished) and not (isinstance(e, AttemptFailed) and e.cancelled)
        ][-1]
        kind = type(last).__name__
        if getattr(last, "phase", "") == "compaction" or isinstance(last, CompactionStarted):
            kind = "compaction"
        elif isinstance(last, AttemptStarted):
            kind = "connect"
        elif kind in ("TextDelta", "ThinkingDelta", "ToolCallDelta"):
            kind = "mid-stream"
        elif isinstance(last, RetryScheduled):
            kind = "backoff"
        elif isinstance(last, ToolCallStarted):
            kind = "tools"
        points[kind] = points.get(kind, 0) + 1
        check_cancelled(agent, rec, first, history0)
        committed = [e.message for e in rec.events[first:] if isinstance(e, MessageCommitted)]
        assert agent.transcript == [*transcript0, *committed]
        # the attempt that was running is logged as cancelled
        cancelled = [e for e in rec.events[first:] if isinstance(e, AttemptFailed) and e.cancelled]
        frame = agent.attempts
        assert (frame["outcome"] == "cancelled").sum() >= len(cancelled)
        # and the agent runs again, from the history the cancel left
        again = Agent(
            ScriptedModel(["after the cancel"]), clock=VirtualClock(), history=agent.history
        )
        result = await again.run("next", show=False)
        assert result.final_text == "after the cancel"
        check_conversation(again.history)
        model.inner.script = ["fresh answer"]
        CLOCK["clock"] = clock
        await drive(agent, clock, "one more", cancel_at=10_000)
        assert agent.history[-1].text == "fresh answer"
        check_conversation(agent.history)
        await check_no_other_tasks()

    with no_leaks():
        for _seed in range(60):
            asyncio.run(one(rng.randrange(1 << 30)))
    print(f"\ncancelled at: {points}")
    assert {"connect", "mid-stream", "backoff", "tools"} <= set(points), points


def _agent(script: list[Any], clock: VirtualClock, **kw: Any) -> tuple[Agent, Recorder]:
    rec = Recorder()
    CLOCK["clock"] = clock
    agent = Agent(
        GatedModel(script, clock),
        tools=[slow_lookup, blocking_lookup],
        clock=clock,
        retry=RetryPolicy(seed=0, initial_delay=2.0, jitter=None),
        history=base_history(),
        subscribers=[rec],
        **kw,
    )
    rec.agent = agent
    return agent, rec


async def _cancel_when(
    agent: Agent, clock: VirtualClock, rec: Recorder, ready: Any, *, advance: float = 0.0
) -> None:
    """Start a run, advance the clock until `ready(events)` and a sleep is pending; cancel."""
    handle = agent.start("go", show=False)
    for _ in range(10_000):
        await asyncio.sleep(0)
        if clock.sleepers and ready(rec.events):
            break
        if clock.sleepers:
            clock.advance(max(advance, clock._waiters[0][0] - clock.now()))
    else:  # pragma: no cover
        pytest.fail("the run never reached the point to cancel at")
    handle.cancel()
    with pytest.raises(E.Aborted):
        await handle


@pytest.mark.parametrize(
    ("point", "script", "ready"),
    [
        ("connect", ["never"], lambda ev: True),
        (
            "mid-stream",
            ["a long answer that streams in many small pieces"],
            lambda ev: sum(type(e).__name__ == "TextDelta" for e in ev) >= 2,
        ),
        (
            "backoff",
            [fault("500"), "never"],
            lambda ev: any(isinstance(e, RetryScheduled) for e in ev),
        ),
        (
            "tools",
            [
                Reply(
                    "", [ToolUse("slow_lookup", {"key": "a"}), ToolUse("slow_lookup", {"key": "b"})]
                )
            ],
            lambda ev: (
                any(isinstance(e, ToolCallStarted) for e in ev)
                and not any(type(e).__name__ == "ToolCallFinished" for e in ev)
            ),
        ),
        (
            "compaction",
            [fault("overflow"), "the summary", "never"],
            lambda ev: any(getattr(e, "phase", "") == "compaction" for e in ev),
        ),
    ],
)
def test_cancel_at_each_named_point(point: str, script: list[Any], ready: Any) -> None:
    async def main() -> None:
        clock = VirtualClock(auto_advance=False)
        agent, rec = _agent(script, clock)
        history0 = list(agent.history)
        transcript0 = list(agent.transcript)
        await _cancel_when(agent, clock, rec, ready)
        assert agent.history == history0, point
        assert agent.transcript == transcript0, point
        check_cancelled(agent, rec, 0, history0)
        assert not [e for e in rec.events if isinstance(e, MessageCommitted)]
        # the agent can run again
        agent._providers[0].inner.script = ["recovered"]  # type: ignore[attr-defined]
        await drive(agent, clock, "again", cancel_at=10_000)
        assert [m.text for m in agent.history[-2:]] == ["again", "recovered"]
        assert agent.history[:2] == history0
        await check_no_other_tasks()

    with no_leaks():
        asyncio.run(main())


def test_cancel_while_a_worker_thread_tool_runs() -> None:
    gate = threading.Event()
    started = threading.Event()

    @tool
    def waits_for_gate() -> str:
        """Blocks its worker thread until released."""
        started.set()
        gate.wait(5)
        return "released"

    async def main() -> None:
        rec = Recorder()
        agent = Agent(
            ScriptedModel([Reply("", [ToolUse("waits_for_gate")]), "after"]),
            tools=[waits_for_gate],
            clock=VirtualClock(),
            history=base_history(),
            subscribers=[rec],
        )
        rec.agent = agent
        history0 = list(agent.history)
        handle = agent.start("go", show=False)
        while not started.is_set():
            await asyncio.sleep(0.001)
        handle.cancel()
        with pytest.raises(E.Aborted):
            await handle
        gate.set()
        assert agent.history == history0
        check_cancelled(agent, rec, 0, history0)
        agent._providers[0].script = ["ok now"]  # type: ignore[attr-defined]
        result = await agent.run("again", show=False)
        assert result.final_text == "ok now"
        check_conversation(agent.history)

    with no_leaks():
        asyncio.run(main())


# -- real sockets --------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("fault_spec", ["slow=600", "stall=600"])
@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_cancel_over_real_sockets_then_run_again(fmt: str, fault_spec: str) -> None:
    from nbagent.mock import serve
    from nbagent.providers._anthropic import AnthropicProvider
    from nbagent.providers._openai_chat import OpenAIProvider

    # The fault lasts until the server stops: a run that ends `Aborted` while the server still
    # runs did not wait for the server. Should the cancel wait anyway, the guard stops the server
    # (the test then fails on the check below instead of hanging for ten minutes).
    with no_leaks(), serve([fault_spec]) as server:
        guard = threading.Timer(60, server.stop)
        guard.start()

        async def main() -> None:
            provider: Any
            if fmt == "anthropic":
                provider = AnthropicProvider("claude-mock", api_key="k-mock", base_url=server.url)
            else:
                provider = OpenAIProvider(
                    "gpt-mock", api_key="k-mock", base_url=server.openai_base_url
                )
            rec = Recorder()
            agent = Agent(provider, history=base_history(), subscribers=[rec], limiter=False)
            rec.agent = agent
            history0 = list(agent.history)
            handle = agent.start("Hello there.", show=False)
            await asyncio.sleep(0.3)  # inside the slow answer or the stalled stream
            assert not handle.done()
            handle.cancel()
            with pytest.raises(E.Aborted):
                await handle
            assert not server.stopping.is_set()  # cancelled while the server still stalled
            assert agent.history == history0
            check_cancelled(agent, rec, 0, history0)
            result = await agent.run("Hello again.", show=False)  # no faults left
            assert result.final_text
            assert agent.history[:2] == history0 and len(agent.history) == 4
            check_conversation(agent.history)
            await agent.aclose()
            await check_no_other_tasks()

        try:
            asyncio.run(main())
        finally:
            guard.cancel()
            guard.join()


# -- a run that stops reading mid-stream closes the stream at once --------------------------------


class ClosingProbe:
    """A provider whose stream records whether it was closed (and so its HTTP response)."""

    name = "scripted"
    model = "probe"

    def __init__(self) -> None:
        self.closed_streams = 0
        self.opened = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self.opened += 1
        inner = ScriptedModel(["a reply streamed in many small pieces"], chunk_size=2)
        try:
            async for part in inner.stream(request):
                yield part
        finally:
            self.closed_streams += 1

    async def aclose(self) -> None:
        return None


def test_a_subscriber_raising_mid_stream_closes_the_stream_at_once() -> None:
    probe = ClosingProbe()
    calls = 0

    def breaks_on_third_delta(event: Event) -> None:
        nonlocal calls
        if type(event).__name__ == "TextDelta":
            calls += 1
            if calls == 3:
                raise RuntimeError("the widget broke")

    agent = Agent(
        probe, clock=VirtualClock(), subscribers=[breaks_on_third_delta], history=base_history()
    )
    with pytest.raises(E.HostError) as info:
        asyncio.run(agent.run("go", show=False))
    kept = info.value  # a notebook keeps the last exception (and its traceback) alive
    assert probe.opened == 1
    assert probe.closed_streams == 1, "the stream stayed open after the run failed"
    assert agent.history == base_history()
    assert "the widget broke" in str(kept)


@pytest.mark.e2e
def test_a_subscriber_raising_mid_stream_over_a_socket_leaves_nothing_open() -> None:
    from nbagent.mock import serve
    from nbagent.providers._anthropic import AnthropicProvider

    errors: list[BaseException] = []

    def breaks(event: Event) -> None:
        if type(event).__name__ == "TextDelta":
            raise RuntimeError("the widget broke")

    with no_leaks(), serve() as server:

        async def main() -> None:
            agent = Agent(
                AnthropicProvider("claude-mock", api_key="k", base_url=server.url),
                subscribers=[breaks],
                limiter=False,
            )
            for _ in range(3):
                try:
                    await agent.run("Hello there.", show=False)
                except E.HostError as exc:
                    errors.append(exc)  # kept alive, as a notebook would
            await agent.aclose()
            await check_no_other_tasks()

        asyncio.run(main())
    assert len(errors) == 3
