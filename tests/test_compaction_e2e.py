"""Compaction end to end: the real providers against the mock server's context window.

The mock server counts the prompt's tokens and answers an oversized one with the provider's real
overflow error (Anthropic: "prompt is too long: N tokens > M maximum"; OpenAI: 400
`context_length_exceeded`, "This model's maximum context length is M tokens. However, your
messages resulted in N tokens."). The agent must parse those, compact and retry, or compact
before sending so the server never sees an oversized request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from nbagent import Agent, RetryPolicy, VirtualClock, tool
from nbagent import errors as E
from nbagent._core._messages import Message
from nbagent._loop._compaction import stub_text
from nbagent._loop._summaries import SUMMARY_MARKER
from nbagent.events import AttemptFailed, CompactionFinished, CompactionStarted, Event
from nbagent.mock import MockServer, serve
from nbagent.providers._anthropic import AnthropicProvider
from nbagent.providers._base import Provider
from nbagent.providers._openai_chat import OpenAIProvider

pytestmark = pytest.mark.e2e

WINDOW = 8000
FILES = {
    "data/a.txt": "alpha line\n" + "a" * 20_000,
    "data/b.txt": "beta line\n" + "b" * 20_000,
}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return FILES[path]


FORMATS: dict[str, Callable[[MockServer], Provider]] = {
    "anthropic": lambda s: AnthropicProvider("claude-mock", api_key="test", base_url=s.url),
    "openai": lambda s: OpenAIProvider("gpt-mock", api_key="test", base_url=s.url + "/v1"),
}
OVERFLOW_TEXT = {
    "anthropic": "prompt is too long",
    "openai": "maximum context length",
}


def agent_for(server: MockServer, fmt: str, events: list[Event], **kw: Any) -> Agent:
    kw.setdefault("tools", [read_file])
    return Agent(
        FORMATS[fmt](server),
        clock=VirtualClock(),
        retry=RetryPolicy(seed=0),
        subscribers=[events.append],
        **kw,
    )


async def turns(agent: Agent, *prompts: str) -> list[str]:
    try:
        return [(await agent.run(p, show=False)).final_text for p in prompts]
    finally:
        await agent.aclose()


def statuses(server: MockServer) -> list[tuple[int, str]]:
    return [(r.status, r.fault) for r in server.requests if r.format is not None]


def results(messages: list[Message]) -> list[str]:
    return [r.text for m in messages for r in m.tool_results]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_reactive_overflow_from_the_server_is_compacted_and_retried(fmt: str) -> None:
    events: list[Event] = []
    with serve(context_window=WINDOW) as server:
        agent = agent_for(server, fmt, events)
        texts = asyncio.run(turns(agent, "read data/a.txt", "now read data/b.txt"))
        seen = statuses(server)
    assert all(texts)
    assert seen.count((400, "context_window")) == 1
    assert seen[-1][0] == 200 and seen[-2] == (400, "context_window")
    (failed,) = [e for e in events if isinstance(e, AttemptFailed)]
    assert failed.action == "compact" and failed.error == "ContextOverflow"
    assert OVERFLOW_TEXT[fmt] in failed.message
    (finished,) = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished.ok and finished.strategy == "stub"
    stub = stub_text("read_file", len(FILES["data/a.txt"]))
    assert results(agent.history) == [stub, FILES["data/b.txt"]]
    assert results(agent.transcript) == [FILES["data/a.txt"], FILES["data/b.txt"]]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_proactive_compaction_means_the_server_never_sees_an_overflow(fmt: str) -> None:
    events: list[Event] = []
    with serve(context_window=WINDOW) as server:
        agent = agent_for(server, fmt, events, context_window=WINDOW)
        texts = asyncio.run(turns(agent, "read data/a.txt", "now read data/b.txt"))
        seen = statuses(server)
    assert all(texts)
    assert all(status == 200 for status, _ in seen)
    assert not [e for e in events if isinstance(e, AttemptFailed)]
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert started and all(e.reason == "proactive" for e in started)
    assert results(agent.history)[0].startswith("[tool output of read_file")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_prompt_larger_than_the_window_fails_hard_with_the_servers_counts(fmt: str) -> None:
    events: list[Event] = []
    with serve(context_window=WINDOW) as server:
        agent = agent_for(server, fmt, events, tools=[])
        with pytest.raises(E.ContextOverflow) as info:
            asyncio.run(turns(agent, "x " * 20_000))
        seen = statuses(server)
    assert seen == [(400, "context_window")]
    assert info.value.limit == WINDOW
    assert info.value.tokens is not None and info.value.tokens > WINDOW
    assert info.value.status_code == 400
    assert agent.history == []


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_text_turns_are_summarised_by_the_demo_model_over_the_wire(fmt: str) -> None:
    events: list[Event] = []
    q = "tell me about this: " + "word " * 3600  # about 4,500 tokens a prompt
    with serve(context_window=WINDOW) as server:
        agent = agent_for(server, fmt, events, tools=[])
        texts = asyncio.run(turns(agent, "first " + q, "second " + q))
        seen = statuses(server)
    assert all(texts)
    # the second prompt overflowed; the summary request and the retry went through
    assert [s for s, _ in seen] == [200, 400, 200, 200]
    assert agent.history[0].text.startswith(SUMMARY_MARKER)
    assert agent.history[2].text.startswith("second")
    (finished,) = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished.strategy == "summarize"
    comp = agent.attempts[agent.attempts.phase == "compaction"]
    assert list(comp.outcome) == ["ok"]
