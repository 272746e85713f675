"""Typed use of nbagent, checked by `mypy --strict` (tests/test_typing.py), never run.

What a user's type checker must see: a plain-text agent's output is `str`, a structured one's
the schema's type (as pydantic-ai's `AgentRunResult[T]`), whichever way the run is called.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from typing_extensions import assert_type

import nbagent
from nbagent import Agent, RunHandle, RunResult


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)


class Pet(BaseModel):
    species: str


def plain() -> None:
    agent = Agent("demo")
    assert_type(agent, Agent[str])
    result = agent.run_sync("hi")
    assert_type(result, RunResult[str])
    assert_type(result.output, str)


def structured() -> None:
    agent = Agent("demo", output=Review, max_tokens=512)
    assert_type(agent, Agent[Review])
    assert_type(agent.run_sync("Loved it.").output, Review)
    assert_type(agent.run_sync("Loved it.", output=Pet).output, Pet)  # one run, another shape
    assert_type(Agent("demo", output=list[Review]).run_sync("x").output, list[Review])
    assert_type(Agent("demo", output={"type": "object"}).run_sync("x").output, dict[str, Any])


async def awaited() -> None:
    agent = Agent("demo", output=Review)
    assert_type((await agent.run("x")).output, Review)
    handle = agent.start("x")
    assert_type(handle, RunHandle[Review])
    assert_type((await handle).output, Review)
    async with Agent("demo") as plain_agent:
        assert_type((await plain_agent.run("x")).output, str)


def bare_names(agent: Agent, result: RunResult) -> None:
    # the bare names are the plain-text ones (the type parameter's default)
    assert_type(agent, Agent[str])
    assert_type(result.output, str)


def batch() -> None:
    # map's overloads, as they were: the results frame either way
    nbagent.map(["a"], model="demo", output=Review, show=False)
    nbagent.map(["a"], model="demo", show=False)
