"""Retry amplification through a real framework: pydantic-ai's own request retries over a
watched SDK client, against the mock failing with 529 / 503 (the issue's outage). Every count is
held against the mock's own request count.

pydantic-ai 2 supports Python 3.11 and later, so the dev extra installs it there and
`conftest.py` leaves this module out on 3.10 (it is not collected, rather than skipped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
import tenacity

import nbagent
from nbagent import RetryAmplification, VirtualClock
from nbagent.mock import MockServer

KEY = "sk-test-amplify-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


# -- a real framework: pydantic-ai's own request retries over the SDK's ----------------------


def _pydantic_ai_agent(model: Any, tries: int) -> Any:
    from pydantic_ai import Agent, RetryModelRequest
    from pydantic_ai.capabilities import AbstractCapability

    class RetryOnError(AbstractCapability[None]):
        """pydantic-ai's documented way to try a failed model request again."""

        async def on_model_request_error(
            self, ctx: Any, *, request_context: Any, error: Exception
        ) -> Any:
            if request_context.attempt < tries:
                raise RetryModelRequest()
            raise error

    return Agent(model, capabilities=[RetryOnError()])


@pytest.mark.slow  # the SDK's own backoff, twice in each of three tries: about 5 s
def test_pydantic_ai_over_a_watched_async_anthropic_multiplies_the_sdk_s_retries(
    server: MockServer,
) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    server.set_faults(["529"] * 9)
    watched = nbagent.watch(
        anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=2)
    )
    model = AnthropicModel("demo", provider=AnthropicProvider(anthropic_client=watched))
    agent = _pydantic_ai_agent(model, tries=3)
    from pydantic_ai.exceptions import ModelAPIError

    sdk_retried = "the SDK's 3 in each of 2 tries"
    with pytest.warns(RetryAmplification, match=sdk_retried), pytest.raises(ModelAPIError):
        asyncio.run(agent.run("What is 2 + 2?"))
    w = nbagent.watching(watched)
    amp = w.amplification
    assert len(amp) == 1
    assert amp["logical_calls"].iloc[0] == 3
    assert amp["requests"].iloc[0] == 9 == len(server.requests)  # 3 tries x 3 SDK attempts
    assert list(w.attempts["layer_attempt"]) == [1] * 3 + [2] * 3 + [3] * 3


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param("529", marks=pytest.mark.slow, id="529"),  # the issue's: the SDK's backoff
        pytest.param("429:retry_after=0.01", id="429-asking-10ms"),
    ],
)
def test_tenacity_around_agent_run_is_one_intended_call_whatever_task_each_run_is_in(
    server: MockServer, fault: str
) -> None:
    # each agent.run sends its request from a context of its own: nothing but the request
    # itself tells that the next run is the failed one's retry
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    server.set_faults([fault] * 9)
    watched = nbagent.watch(
        anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=2)
    )
    agent = Agent(AnthropicModel("demo", provider=AnthropicProvider(anthropic_client=watched)))

    async def main() -> None:
        async for attempt in tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(3),
            retry=tenacity.retry_if_exception_type(ModelHTTPError),
            reraise=True,
        ):
            with attempt:
                await agent.run("What is 2 + 2?")

    with pytest.warns(RetryAmplification) as caught, pytest.raises(ModelHTTPError):
        asyncio.run(main())
    w = nbagent.watching(watched)
    assert len(server.requests) == 9 == len(w.attempts)
    assert w.attempts["call"].nunique() == 1
    assert list(w.attempts["layer_attempt"]) == [1] * 3 + [2] * 3 + [3] * 3
    amp = w.amplification
    assert len(amp) == 1
    assert (amp["logical_calls"].iloc[0], amp["requests"].iloc[0]) == (3, 9)
    assert (amp["factor"].iloc[0], amp["allowed"].iloc[0]) == (9.0, 3)
    # warned once, when the second run had made 6: both layers' shares, and the count goes on
    assert [str(c.message) for c in caught if c.category is RetryAmplification] == [
        "1 call has become 6 requests so far: the SDK's 3 in each of 2 tries by an outer layer "
        "(each further try adds up to 3; the watcher's amplification frame keeps counting). "
        "Let one layer retry: set max_retries=0 on the client, or the outer layer's retries "
        "to 0, or use nbagent.guard(client)."
    ]


def test_pydantic_ai_over_watched_async_openai_and_then_over_a_guarded_one(
    server: MockServer,
) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def agent_over(client: Any, tries: int) -> Any:
        model = OpenAIChatModel("demo", provider=OpenAIProvider(openai_client=client))
        return _pydantic_ai_agent(model, tries=tries)

    server.set_faults(["503"] * 6)
    watched = nbagent.watch(
        openai.AsyncOpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=1)
    )
    from pydantic_ai.exceptions import ModelAPIError

    with pytest.warns(RetryAmplification), pytest.raises(ModelAPIError, match="503"):
        asyncio.run(agent_over(watched, tries=3).run("What is 2 + 2?"))
    amp = nbagent.watching(watched).amplification
    assert (amp["logical_calls"].iloc[0], amp["requests"].iloc[0]) == (3, 6)
    assert len(server.requests) == 6

    # one layer: the framework's retries off, nbagent.guard's on (paced, in virtual time)
    server.clear_requests()
    server.set_faults(["503", "503", "ok"])
    guarded = nbagent.guard(
        openai.AsyncOpenAI(api_key=KEY, base_url=server.openai_base_url),
        retry=nbagent.RetryPolicy(seed=2),
        clock=VirtualClock(),
    )
    result = asyncio.run(agent_over(guarded, tries=1).run("What is 2 + 2?"))
    assert result.output
    w = nbagent.watching(guarded)
    assert list(w.attempts["action"]) == ["retry", "retry", "none"]
    assert (w.amplification["logical_calls"].iloc[0], w.amplification["requests"].iloc[0]) == (
        1,
        3,
    )
    assert len(server.requests) == 3
