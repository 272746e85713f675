"""Every attempt that got an HTTP status records it, the 200 of a success included.

A 529, a 429 and then the answer, over real HTTP against the mock server, must read
"529, 429, 200" wherever attempts are kept: `agent.attempts`, a watcher's `w.attempts`, the
durable log of each, and the tracing spans (`http.response.status_code`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbagent
from nbagent import Agent, RetryPolicy
from nbagent.analysis import read_attempts
from nbagent.mock import MockServer
from nbagent.providers import AnthropicProvider, GeminiProvider, OpenAIProvider, ResponsesProvider

pytestmark = pytest.mark.e2e

FAULTS = ["529", "429:retry_after=0.05", "ok"]
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1)


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer(faults=FAULTS) as s:
        yield s


def provider(fmt: str, server: MockServer) -> Any:
    if fmt == "anthropic":
        return AnthropicProvider("demo", api_key="test-key", base_url=server.url)
    if fmt == "responses":
        return ResponsesProvider("demo", api_key="test-key", base_url=server.openai_base_url)
    if fmt == "gemini":
        return GeminiProvider("demo", api_key="test-key", base_url=server.url)
    return OpenAIProvider("demo", api_key="test-key", base_url=server.openai_base_url)


def run(agent: Agent) -> str:
    async def main() -> str:
        try:
            return (await agent.run("What is 2 + 2?", show=False)).final_text
        finally:
            await agent.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
def test_the_attempt_log_has_the_status_of_every_attempt_the_200_included(
    server: MockServer, fmt: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.sqlite"
    agent = Agent(provider(fmt, server), retry=FAST, limiter=False, log=log)
    assert run(agent)
    overloaded = 503 if fmt == "gemini" else 529  # Gemini says overload with 503 UNAVAILABLE
    frame = agent.attempts
    assert frame["outcome"].tolist() == ["error", "error", "ok"]
    assert frame["status_code"].tolist() == [overloaded, 429, 200]
    # the durable log reads back the same statuses
    assert read_attempts(log)["status_code"].tolist() == [overloaded, 429, 200]


def test_the_spans_carry_the_status_of_every_attempt_the_200_included(
    server: MockServer,
) -> None:
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(provider("openai", server), retry=FAST, limiter=False)
    with nbagent.instrument(tracer):
        assert run(agent)
    chats = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("chat ")),
        key=lambda s: s.start_time or 0,
    )
    statuses = [(s.attributes or {}).get("http.response.status_code") for s in chats]
    assert statuses == [529, 429, 200]


def test_a_watched_sdk_call_reads_529_429_200_in_its_frame_and_its_log(
    server: MockServer, tmp_path: Path
) -> None:
    anthropic = pytest.importorskip("anthropic")
    log = tmp_path / "watched.sqlite"
    client = anthropic.Anthropic(api_key="sk-test-status", base_url=server.url, max_retries=3)
    w = nbagent.watching(client, show=False, log=log)
    reply = w.client.messages.create(
        model="demo", max_tokens=100, messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    w.client.close()
    w.close()
    assert reply.content
    frame = w.attempts
    assert frame["outcome"].tolist() == ["error", "error", "ok"]
    assert frame["status_code"].tolist() == [529, 429, 200]
    assert read_attempts(log)["status_code"].tolist() == [529, 429, 200]
