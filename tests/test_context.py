"""`ContextKeeper`, the loop's compaction collaborator, on its own (no agent, no provider), and the\nrequest path's fit before sending that asks it to compact."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from nbagent import (
    Agent,
    DefaultCompaction,
    ScriptedModel,
    StubOldToolOutput,
    Summarize,
    TokenEstimator,
)
from nbagent import errors as E
from nbagent._core._messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from nbagent._loop._context import ContextKeeper
from nbagent._loop._estimate import estimate_tokens
from nbagent._loop._parts import RunState
from nbagent._loop._request import Requester, _Step
from nbagent.events import CompactionFinished, CompactionStarted, Event
from nbagent.providers import ModelRequest

BIG = "x" * 8_000


def conversation(n: int, output: str = BIG) -> list[Message]:
    msgs = [Message.user("start")]
    for i in range(n):
        msgs.append(Message("assistant", (ToolUseBlock(f"t{i}", "read_file", {"path": "x"}),)))
        msgs.append(Message("user", (ToolResultBlock(f"t{i}", (TextBlock(output),)),)))
    return msgs


def keeper(strategy: object, events: list[Event]) -> ContextKeeper:
    return ContextKeeper(strategy, system=None, emit=events.append)  # type: ignore[arg-type]


async def no_summary(messages: Sequence[Message], instruction: str) -> str:
    raise AssertionError("no summary was expected")


def fit(working: list[Message], window: int, events: list[Event]) -> tuple[list[Message], int]:
    """The request path's fit before sending (`Requester._fit`), for a model with `window`;
    the conversation it sends and the compactions it made."""
    model = ScriptedModel([])
    model.context_window = window  # type: ignore[attr-defined]
    agent = Agent(model, compaction=StubOldToolOutput(), subscribers=[events.append])
    step = _Step(working, ())
    asyncio.run(Requester(agent, RunState("r", 0.0, None))._fit(step))
    return step.working, step.compactions


def test_below_the_threshold_nothing_is_compacted_or_announced() -> None:
    events: list[Event] = []
    working = conversation(2)
    out, compacted = fit(working, 100_000, events)
    assert out == working and not compacted and events == []


def test_past_the_threshold_it_compacts_before_sending_and_announces_it() -> None:
    events: list[Event] = []
    k = keeper(StubOldToolOutput(), [])
    working = conversation(4)
    window = int(k.estimate(working, ()) / 0.9)  # the estimate is 90 % of the window
    out, compacted = fit(working, window, events)
    assert compacted and k.estimate(out, ()) < k.estimate(working, ())
    started, finished = events
    assert isinstance(started, CompactionStarted) and started.reason == "proactive"
    assert isinstance(finished, CompactionFinished) and finished.ok and finished.removed >= 1


def test_the_remembered_cutoff_is_applied_to_later_conversations() -> None:
    events: list[Event] = []
    strategy = StubOldToolOutput()
    k = keeper(strategy, events)
    overflow = E.ContextOverflow("too long", tokens=9000, limit=3000)
    first = asyncio.run(
        k.compact(conversation(3), (), no_summary, overflow, 1, target=overflow.limit)
    )
    assert first is not None and strategy.keep is not None
    events.clear()
    later = asyncio.run(k.prepare(conversation(5), ()))
    assert later != conversation(5)  # old outputs are stubbed up front
    assert [type(e).__name__ for e in events] == ["CompactionStarted", "CompactionFinished"]
    assert "remembered cutoff" in events[-1].message  # type: ignore[attr-defined]


def test_nothing_left_to_shed_is_announced_as_a_failed_compaction() -> None:
    events: list[Event] = []
    k = keeper(StubOldToolOutput(), events)
    overflow = E.ContextOverflow("too long")
    assert (
        asyncio.run(k.compact([Message.user("hi")], (), no_summary, overflow, 1, target=None))
        is None
    )
    finished = events[-1]
    assert isinstance(finished, CompactionFinished) and not finished.ok
    assert finished.message == "nothing left to shed"


def test_a_summary_is_asked_through_the_callers_summarizer() -> None:
    asked: list[str] = []

    async def summarize(messages: Sequence[Message], instruction: str) -> str:
        asked.append(instruction)
        return "They talked about the weather."

    history: list[Message] = []
    for i in range(6):
        history += [Message.user(f"question {i} " + "y" * 2_000), Message.assistant("z" * 2_000)]
    history.append(Message.user("and now?"))
    events: list[Event] = []
    k = keeper(Summarize(), events)
    overflow = E.ContextOverflow("too long", tokens=12_000, limit=6_000)
    out = asyncio.run(k.compact(history, (), summarize, overflow, 1, target=overflow.limit))
    assert out is not None and len(asked) == 1
    assert "They talked about the weather." in out[0].text
    assert out[-1] == history[-1]


def test_calibration_teaches_the_strategys_estimator() -> None:
    estimator = TokenEstimator()
    k = keeper(DefaultCompaction(estimator=estimator), [])
    request = ModelRequest(tuple(conversation(2)))
    raw = estimate_tokens(request.messages)
    k.calibrate(request, reported=raw * 2)
    assert estimator.samples == 1 and estimator.ratio == 2.0
    assert k.estimate(request.messages, ()) == 2 * raw
