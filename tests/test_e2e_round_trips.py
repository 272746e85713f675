"""End to end over real sockets: what a provider must carry back arrives back, byte for byte.

The mock server signs Gemini's function calls and encrypts Responses' reasoning items, and refuses
a history that drops or alters them, as the real services do; so a tool-using run that succeeds
here has carried them back exactly. Also: Gemini's quotas and Anthropic's cache breakpoints as
the agent meets them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_e2e_faults import FAST
from test_e2e_faults import run as run_agent

from nbagent import Agent, tool
from nbagent import errors as E
from nbagent.events import Event, RetryScheduled
from nbagent.mock import MockServer
from nbagent.mock._conversation import encrypted_for, sign
from nbagent.providers import AnthropicProvider, GeminiProvider, ResponsesProvider


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return str(eval(expression, {"__builtins__": {}}))  # the demo asks for plain arithmetic


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


def run(agent: Agent, prompt: str = "What is 17 * 23 + 4?") -> Any:
    return run_agent(agent, prompt)


def test_gemini_thought_signatures_survive_a_tool_call(server: MockServer) -> None:
    provider = GeminiProvider("gemini-3-demo", api_key="test-key", base_url=server.url)
    agent = Agent(provider, tools=[calculator], retry=FAST, limiter=False)
    result = run(agent)
    assert "395" in result.final_text
    assert [m.role for m in agent.history] == ["user", "assistant", "user", "assistant"]
    first, second = (r.body for r in server.requests)
    model_turn = second["contents"][1]
    assert model_turn["role"] == "model"
    (part,) = [p for p in model_turn["parts"] if "functionCall" in p]
    call = part["functionCall"]
    assert part["thoughtSignature"] == sign(call["name"], call["args"])  # as the mock issued it
    assert second["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "395"}
    assert len(first["contents"]) == 1


def test_responses_reasoning_items_survive_a_tool_call(server: MockServer) -> None:
    provider = ResponsesProvider("o4-mini", api_key="test-key", base_url=server.openai_base_url)
    agent = Agent(provider, tools=[calculator], retry=FAST, limiter=False)
    result = run(agent)
    assert "395" in result.final_text
    first, second = (r.body for r in server.requests)
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    kinds = [item.get("type", item.get("role")) for item in second["input"]]
    assert kinds == ["user", "reasoning", "assistant", "function_call", "function_call_output"]
    reasoning = second["input"][1]
    assert reasoning["encrypted_content"] == encrypted_for(reasoning["id"])
    # the committed history holds the item itself, so a saved session carries it too
    opaque = [b for b in agent.history[1].blocks if getattr(b, "type", "") == "opaque"]
    assert [json.dumps(b.data) for b in opaque] == [json.dumps(reasoning)]


def test_gemini_daily_quota_fails_at_once_with_its_sentence(server: MockServer) -> None:
    server.set_faults(["quota"])
    provider = GeminiProvider("gemini-3-demo", api_key="test-key", base_url=server.url)
    agent = Agent(provider, retry=FAST, limiter=False)
    with pytest.raises(E.QuotaExceeded) as info:
        run(agent, "hello")
    assert "GenerateRequestsPerDayPerProjectPerModel-FreeTier" in str(info.value)
    assert "midnight Pacific time" in str(info.value)
    assert len(server.requests) == 1 and agent.history == []
    assert agent.attempts["action"].tolist() == ["fail"]


def test_gemini_per_minute_quota_waits_as_the_body_asks(server: MockServer) -> None:
    server.set_faults(["429:retry_after=0.2"])
    events: list[Event] = []
    provider = GeminiProvider("gemini-3-demo", api_key="test-key", base_url=server.url)
    agent = Agent(provider, retry=FAST, limiter=False, subscribers=[events.append])
    assert run(agent, "hello").final_text
    (retry,) = [e for e in events if isinstance(e, RetryScheduled)]
    assert retry.retry_after_s == pytest.approx(0.2) and retry.delay_s == pytest.approx(0.2)


@pytest.mark.parametrize("cache", [True, False])
def test_anthropic_cache_breakpoints_reach_the_server(server: MockServer, cache: bool) -> None:
    provider = AnthropicProvider("demo", api_key="test-key", base_url=server.url)
    agent = Agent(
        provider, tools=[calculator], system="Be brief.", retry=FAST, limiter=False, cache=cache
    )
    assert "395" in run(agent).final_text
    for record in server.requests:
        marked = "cache_control" in json.dumps(record.body)
        assert marked is cache
    if cache:
        last = server.requests[-1].body
        assert last["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert last["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
