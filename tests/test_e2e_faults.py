"""End to end over real sockets: the agent, a real provider, the loopback mock server.

Every fault the mock server can inject ends in the action DESIGN's table gives it, in every wire
format (Anthropic, OpenAI Chat, OpenAI Responses, Gemini, Azure's Chat and Responses), with the
conversation intact: retried faults leave exactly one user and one assistant message; final ones
leave the history as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from provider_support import idle_timeout_on_first_answer

from nbagent import Agent, Budget, RetryPolicy
from nbagent import errors as E
from nbagent.events import Event, FallbackStarted, RetryScheduled
from nbagent.mock import MockServer
from nbagent.providers import (
    AnthropicProvider,
    AzureChatProvider,
    AzureResponsesProvider,
    GeminiProvider,
    OpenAIProvider,
    ResponsesProvider,
)

pytestmark = pytest.mark.e2e

FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1, max_retry_after=5)


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


FORMATS = ["anthropic", "openai", "responses", "gemini", "azure", "azure-responses"]


def provider(fmt: str, server: MockServer, **kw: Any) -> Any:
    if fmt == "anthropic":
        return AnthropicProvider("demo", api_key="test-key", base_url=server.url, **kw)
    if fmt == "responses":
        return ResponsesProvider("demo", api_key="test-key", base_url=server.openai_base_url, **kw)
    if fmt == "gemini":
        return GeminiProvider("demo", api_key="test-key", base_url=server.url, **kw)
    if fmt == "azure":
        return AzureChatProvider("demo", api_key="test-key", base_url=server.url, **kw)
    if fmt == "azure-responses":
        return AzureResponsesProvider(
            "demo", api_key="test-key", base_url=server.url, api_version="2025-04-01-preview", **kw
        )
    return OpenAIProvider("demo", api_key="test-key", base_url=server.openai_base_url, **kw)


def run(agent: Agent, prompt: str = "Tell me about backoff.") -> Any:
    async def main() -> Any:
        try:
            return await agent.run(prompt, show=False)
        finally:
            await agent.aclose()

    return asyncio.run(main())


RETRIED = [
    "429:retry_after=0.05",
    "529",
    "overloaded_midstream",
    "500",
    "502",
    "503",
    "504",
    "close",
    "drop_after_tokens=3",
    "cut_after_done",
    "malformed",
    "empty",
    "stall=3600",  # until the server stops: only the idle timeout ends the first answer
]
FINAL = {
    "quota": E.QuotaExceeded,
    "401": E.AuthFailed,
    "404": E.ModelNotFound,
    "400": E.BadRequest,
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fault", RETRIED)
def test_retryable_faults_are_retried_and_the_reply_is_kept_once(
    server: MockServer, fmt: str, fault: str
) -> None:
    server.set_faults([fault])
    events: list[Event] = []
    model = provider(fmt, server)
    if fault.startswith("stall"):
        # only the stalled first answer is timed tightly: the retried one cannot time out too,
        # however slowly a busy machine streams it
        model = idle_timeout_on_first_answer(model, 0.4)
    agent = Agent(model, retry=FAST, limiter=False, subscribers=[events.append])
    result = run(agent)
    assert result.final_text
    assert [m.role for m in agent.history] == ["user", "assistant"]
    assert agent.history[1].text == result.final_text
    retries = [e for e in events if isinstance(e, RetryScheduled)]
    assert len(retries) == 1, fault
    frame = agent.attempts
    assert frame["action"].tolist() == ["retry", "none"]
    if fault.startswith("429"):
        assert retries[0].retry_after_s == pytest.approx(0.05)
    if fault.startswith("stall"):
        assert retries[0].error == "TransportError" and "idle" in retries[0].message
        assert "0.4 s" in retries[0].message


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("fault", "error"), list(FINAL.items()))
def test_final_faults_fail_at_once_with_history_intact(
    server: MockServer, fmt: str, fault: str, error: type[E.ProviderError]
) -> None:
    server.set_faults([fault])
    agent = Agent(provider(fmt, server), retry=FAST, limiter=False)
    with pytest.raises(error):
        run(agent)
    assert agent.history == []
    assert agent.attempts["action"].tolist() == ["fail"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_overflow_with_nothing_to_shed_fails_with_the_servers_numbers(
    server: MockServer, fmt: str
) -> None:
    server.set_faults(["overflow", "overflow", "overflow"])
    agent = Agent(provider(fmt, server), retry=FAST, limiter=False)
    with pytest.raises(E.ContextOverflow) as info:
        run(agent)
    assert info.value.tokens and info.value.limit and info.value.tokens > info.value.limit
    assert agent.history == []


def test_x_should_retry_header_overrides_the_table(server: MockServer) -> None:
    server.set_faults(["400:should_retry=true"])
    agent = Agent(provider("anthropic", server), retry=FAST, limiter=False)
    assert run(agent).final_text
    server.set_faults(["503:should_retry=false"])
    agent = Agent(provider("anthropic", server), retry=FAST, limiter=False)
    with pytest.raises(E.ServerError):
        run(agent)


def test_size_cap_makes_an_oversized_event_an_invalid_response(server: MockServer) -> None:
    server.set_faults([])
    agent = Agent(provider("anthropic", server, max_event_bytes=64), retry=FAST, limiter=False)
    with pytest.raises(E.InvalidResponse):
        run(agent)
    assert agent.history == []


def test_fallback_chain_across_servers_and_formats() -> None:
    with MockServer(faults=["503", "503"]) as bad, MockServer() as good:
        events: list[Event] = []
        agent = Agent(
            [provider("anthropic", bad), provider("openai", good)],
            retry=RetryPolicy(max_attempts=2, initial_delay=0.01),
            limiter=False,
            subscribers=[events.append],
        )
        result = run(agent)
    assert result.final_text
    (fb,) = [e for e in events if isinstance(e, FallbackStarted)]
    assert (fb.from_model, fb.to_model) == ("anthropic:demo", "openai:demo")
    assert agent.attempts["action"].tolist() == ["retry", "fallback", "none"]


def test_cost_budget_trips_on_a_priced_model(server: MockServer) -> None:
    server.set_faults([])
    from nbagent import tool

    @tool
    def calculator(expression: str) -> str:
        """Arithmetic."""
        return "395"

    priced = AnthropicProvider("claude-sonnet-4-20250514", api_key="k", base_url=server.url)
    agent = Agent(
        priced, tools=[calculator], retry=FAST, limiter=False, budget=Budget(max_cost_usd=1e-7)
    )
    with pytest.raises(E.BudgetExceeded) as info:
        run(agent, "What is 17 * 23 + 4?")
    assert info.value.limit == "max_cost_usd" and info.value.actual > 1e-7


def test_a_far_reset_blocks_the_shared_limiter_without_hanging_later_runs() -> None:
    with MockServer(faults=["429:retry_after=3000"]) as s:
        first = Agent(provider("anthropic", s), retry=FAST)
        with pytest.raises(E.QuotaExceeded, match="Resets in 50 min"):
            run(first)
        # the next agent on the same provider and key is told at once, not left waiting 50 min
        second = Agent(provider("anthropic", s), retry=FAST)
        with pytest.raises(E.QuotaExceeded):
            run(second)
        assert len(s.requests) == 1
        assert second.attempts["action"].tolist() == ["fail"]
