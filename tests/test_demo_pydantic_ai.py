"""pydantic-ai's default structured output against the mock: one `final_result` tool, and a tool
choice that forces some tool without naming one (`{type: "any"}` on Anthropic, `"required"` on
OpenAI Chat). The demo model calls it with arguments valid for the output type, after the
user's own tools when the prompt needs them.

pydantic-ai 2 supports Python 3.11 and later, so the dev extra installs it there and
`conftest.py` leaves this module out on 3.10 (it is not collected, rather than skipped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any, Literal

import anthropic
import openai
import pytest
from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from nbagent.demo._arithmetic import evaluate
from nbagent.mock import MockServer

pytestmark = pytest.mark.e2e

KEY = "sk-test-pydantic-ai-0123456789"
FORCED = {"anthropic": {"type": "any"}, "openai": "required"}


class Review(BaseModel):
    """A product review, read."""

    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)
    summary: str = Field(max_length=60)
    keywords: list[str] = Field(min_length=1, max_length=3)


class Answer(BaseModel):
    """A computed answer."""

    expression: str
    value: int


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


def run(fmt: str, server: MockServer, make: Callable[[Any], Agent[None, Any]], prompt: str) -> Any:
    """`make(model).run(prompt)`'s output, the model over an SDK client closed afterwards."""

    async def main() -> Any:
        if fmt == "anthropic":
            async with anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url) as claude:
                provider = AnthropicProvider(anthropic_client=claude)
                return (await make(AnthropicModel("demo", provider=provider)).run(prompt)).output
        url = server.openai_base_url
        async with openai.AsyncOpenAI(api_key=KEY, base_url=url) as gpt:
            model = OpenAIChatModel("demo", provider=OpenAIProvider(openai_client=gpt))
            return (await make(model).run(prompt)).output

    return asyncio.run(main())


def tool_names(fmt: str, body: dict[str, Any]) -> list[str]:
    if fmt == "anthropic":
        return [t["name"] for t in body["tools"]]
    return [t["function"]["name"] for t in body["tools"]]


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_the_default_output_tool_is_called_with_a_valid_answer(
    server: MockServer, fmt: str
) -> None:
    server.clear_requests()
    prompt = "I love this kettle: it boils fast and looks great."
    review = run(fmt, server, lambda model: Agent(model, output_type=Review), prompt)
    assert isinstance(review, Review)
    assert review.sentiment == "positive" and review.stars >= 4  # the demo read the words
    (request,) = server.requests  # answered the first time: no output retry
    assert request.body["tool_choice"] == FORCED[fmt]
    assert tool_names(fmt, request.body) == ["final_result"]


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_the_users_tool_runs_first_then_the_output_tool_answers(
    server: MockServer, fmt: str
) -> None:
    server.clear_requests()
    calls: list[str] = []

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        calls.append(expression)
        return str(evaluate(expression))

    def make(model: Any) -> Agent[None, Any]:
        return Agent(model, output_type=Answer, tools=[calculator])

    answer = run(fmt, server, make, "What is 17 * 23?")
    assert calls == ["17 * 23"]
    assert answer == Answer(expression="17 * 23", value=391)  # the tool's result, quoted
    assert len(server.requests) == 2
    for request in server.requests:
        assert request.body["tool_choice"] == FORCED[fmt]
        assert sorted(tool_names(fmt, request.body)) == ["calculator", "final_result"]
