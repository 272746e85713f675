"""The demo model answers in the shape a request asks for, whoever sends it.

A tool choice that forces some tool without naming one (Anthropic's `any`, Chat's and
Responses' `required`, Gemini's mode `ANY` with or without `allowedFunctionNames`) or names one
gets a call of an offered tool with arguments valid for its schema (nested objects, arrays,
enums, required fields, `$ref`/`$defs`, recursion closed a few levels down); JSON mode gets a
JSON object, and the JSON Schema written in a prompt is read and answered. The requests are the
official SDKs', sent to a `MockServer` over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import anthropic
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from nbagent import Agent
from nbagent.demo._structured import sample
from nbagent.mock import MockServer

pytestmark = pytest.mark.e2e

KEY = "sk-test-structured-0123456789"
PROMPT = "Order two large blue mugs for Ada Lovelace in London, as a gift."
ARITHMETIC = "What is 17 * 23?"  # a prompt the demo would answer with its calculator


class Line(BaseModel):
    sku: str
    quantity: int = Field(ge=1, le=9)
    size: Literal["S", "M", "L"]


class Address(BaseModel):
    city: str
    postcode: str = Field(min_length=5, max_length=8)


class Order(BaseModel):
    """An order: nested objects, an array of them, enums, an optional field ($defs, $ref)."""

    customer: str
    ship_to: Address
    lines: list[Line] = Field(min_length=1)
    gift: bool
    note: str | None = None


class Node(BaseModel):
    """A self-referencing model: its answer must close the recursion."""

    label: str
    children: list[Node] = []


class Strict(BaseModel):
    """Recursion with every field required, as OpenAI's strict schemas have it."""

    label: str
    children: list[Strict]
    parent: Strict | None


CALCULATOR = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
}
ORDER = Order.model_json_schema()
NODE = Node.model_json_schema()


def depth(value: Any) -> int:
    """How many objects deep `value` nests."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((depth(v) for v in value), default=0)
    return 0


def items(value: Any) -> Iterator[Any]:
    """Every item of every array in `value`."""
    children = value.values() if isinstance(value, dict) else value
    for child in children if isinstance(value, (dict, list)) else ():
        if isinstance(value, list):
            yield child
        yield from items(child)


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as s:
        yield s


@pytest.fixture
def claude(server: MockServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(server: MockServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0) as client:
        yield client


def anthropic_call(
    client: anthropic.Anthropic, tools: dict[str, Any], choice: dict[str, Any], prompt: str
) -> tuple[str, Any]:
    message = client.messages.create(
        model="demo",
        max_tokens=2048,
        messages=[{"role": "user", "content": prompt}],
        tools=[{"name": n, "description": n, "input_schema": s} for n, s in tools.items()],
        tool_choice=choice,  # type: ignore[arg-type]
    )
    assert message.stop_reason == "tool_use"
    (call,) = [b for b in message.content if b.type == "tool_use"]
    return call.name, call.input


def chat_call(
    client: openai.OpenAI, tools: dict[str, Any], choice: Any, prompt: str
) -> tuple[str, Any]:
    completion = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": prompt}],
        tools=[
            {"type": "function", "function": {"name": n, "parameters": s}} for n, s in tools.items()
        ],
        tool_choice=choice,
    )
    choice0 = completion.choices[0]
    assert choice0.finish_reason == "tool_calls"
    (call,) = choice0.message.tool_calls or []
    assert call.type == "function"
    return call.function.name, json.loads(call.function.arguments)


def responses_call(
    client: openai.OpenAI, tools: dict[str, Any], choice: Any, prompt: str
) -> tuple[str, Any]:
    response = client.responses.create(
        model="demo",
        input=prompt,
        tools=[
            {"type": "function", "name": n, "parameters": s, "strict": False}
            for n, s in tools.items()
        ],
        tool_choice=choice,
    )
    (call,) = [item for item in response.output if item.type == "function_call"]
    return call.name, json.loads(call.arguments)


def gemini_call(
    server: MockServer, tools: dict[str, Any], allowed: list[str] | None, prompt: str
) -> tuple[str, Any]:
    from google import genai
    from google.genai import types

    options = types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1)
    )
    client = genai.Client(api_key=KEY, http_options=options)
    try:
        declarations = [
            types.FunctionDeclaration(name=n, description=n, parameters_json_schema=s)
            for n, s in tools.items()
        ]
        calling = types.FunctionCallingConfig(mode="ANY", allowed_function_names=allowed)
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=declarations)],
            tool_config=types.ToolConfig(function_calling_config=calling),
        )
        answer = client.models.generate_content(model="demo", contents=prompt, config=config)
    finally:
        client.close()
    (call,) = answer.function_calls or []
    assert call.name is not None
    return call.name, call.args


# -- a choice of any tool, in every wire format --------------------------------------------------


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
@pytest.mark.parametrize("schema", [ORDER, NODE], ids=["order", "recursive"])
def test_a_choice_of_any_tool_calls_an_offered_tool_with_valid_arguments(
    server: MockServer,
    claude: anthropic.Anthropic,
    gpt: openai.OpenAI,
    fmt: str,
    schema: dict[str, Any],
) -> None:
    tools = {"record": schema, "calculator": CALCULATOR}
    if fmt == "anthropic":
        name, args = anthropic_call(claude, tools, {"type": "any"}, PROMPT)
    elif fmt == "openai":
        name, args = chat_call(gpt, tools, "required", PROMPT)
    elif fmt == "responses":
        name, args = responses_call(gpt, tools, "required", PROMPT)
    else:
        name, args = gemini_call(server, tools, None, PROMPT)
    assert name in tools
    jsonschema.validate(args, tools[name])
    if name == "record" and schema is NODE:
        assert 2 <= depth(args) <= 6  # it nests, and it closes


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
def test_a_choice_of_any_tool_picks_the_output_tool_beside_the_users_tools(
    server: MockServer, claude: anthropic.Anthropic, gpt: openai.OpenAI, fmt: str
) -> None:
    # pydantic-ai's default structured output: the user's tools and `final_result`, any forced
    tools = {"calculator": CALCULATOR, "final_result": ORDER}
    if fmt == "anthropic":
        name, args = anthropic_call(claude, tools, {"type": "any"}, PROMPT)
    elif fmt == "openai":
        name, args = chat_call(gpt, tools, "required", PROMPT)
    elif fmt == "responses":
        name, args = responses_call(gpt, tools, "required", PROMPT)
    else:
        name, args = gemini_call(server, tools, list(tools), PROMPT)
    assert name == "final_result"
    order = Order.model_validate(args)
    assert order.gift and order.lines


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses", "gemini"])
def test_a_named_tool_is_called_even_when_the_prompt_wants_another(
    server: MockServer, claude: anthropic.Anthropic, gpt: openai.OpenAI, fmt: str
) -> None:
    tools = {"calculator": CALCULATOR, "record": ORDER}
    if fmt == "anthropic":
        name, args = anthropic_call(claude, tools, {"type": "tool", "name": "record"}, ARITHMETIC)
    elif fmt == "openai":
        choice = {"type": "function", "function": {"name": "record"}}
        name, args = chat_call(gpt, tools, choice, ARITHMETIC)
    elif fmt == "responses":
        name, args = responses_call(gpt, tools, {"type": "function", "name": "record"}, ARITHMETIC)
    else:
        name, args = gemini_call(server, tools, ["record"], ARITHMETIC)
    assert name == "record"
    Order.model_validate(args)


def test_gemini_calls_only_the_allowed_functions(server: MockServer) -> None:
    tools = {"calculator": CALCULATOR, "lookup": NODE, "record": ORDER}
    name, args = gemini_call(server, tools, ["lookup", "record"], ARITHMETIC)
    assert name in ("lookup", "record")  # never the calculator the prompt would want
    jsonschema.validate(args, tools[name])
    body = server.requests[-1].body
    assert len(body["tools"][0]["functionDeclarations"]) == 3  # all three were offered


def test_without_a_forced_choice_the_demo_still_uses_the_tool_the_prompt_needs(
    claude: anthropic.Anthropic,
) -> None:
    tools = {"record": ORDER, "calculator": CALCULATOR}
    name, args = anthropic_call(claude, tools, {"type": "auto"}, ARITHMETIC)
    assert (name, args) == ("calculator", {"expression": "17 * 23"})


# -- JSON mode ------------------------------------------------------------------------------------


def test_json_object_mode_without_a_schema_answers_a_json_object(gpt: openai.OpenAI) -> None:
    completion = gpt.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Name the capital of France, in JSON."}],
        response_format={"type": "json_object"},
    )
    assert isinstance(json.loads(completion.choices[0].message.content or ""), dict)


@pytest.mark.parametrize("where", ["system", "user"])
def test_a_schema_in_the_prompt_is_answered_in_json_object_mode(
    gpt: openai.OpenAI, where: str
) -> None:
    ask = f"Answer in JSON that matches this JSON schema:\n{json.dumps(ORDER, indent=2)}"
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    messages.insert(0 if where == "system" else 1, {"role": where, "content": ask})
    completion = gpt.chat.completions.create(
        model="demo", messages=messages, response_format={"type": "json_object"}
    )
    Order.model_validate_json(completion.choices[0].message.content or "")


def test_a_fence_asked_for_is_written_around_the_json(claude: anthropic.Anthropic) -> None:
    system = f"Extract the order. Its schema:\n{json.dumps(ORDER)}"
    message = claude.messages.create(
        model="demo",
        max_tokens=2048,
        system=system,
        messages=[{"role": "user", "content": f"{PROMPT}\n\nReply within a ```json codeblock."}],
    )
    text = "".join(b.text for b in message.content if b.type == "text")
    assert text.startswith("```json\n") and text.endswith("\n```")
    order = Order.model_validate_json(text.removeprefix("```json\n").removesuffix("\n```"))
    assert "codeblock" not in order.customer  # the instruction is not the content


def test_a_plain_prompt_that_mentions_a_schema_is_still_answered_in_prose(
    claude: anthropic.Anthropic,
) -> None:
    message = claude.messages.create(
        model="demo",
        max_tokens=512,
        messages=[{"role": "user", "content": "What is a JSON schema {for}? Explain briefly."}],
    )
    text = "".join(b.text for b in message.content if b.type == "text")
    assert "offline demo model" in text


# -- recursion ------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [Node, Strict])
def test_a_recursive_schema_closes_a_few_levels_down(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    value = sample(schema, "Sketch the family tree of the Tudors.")
    jsonschema.validate(value, schema)
    model.model_validate(value)
    assert 2 <= depth(value) <= 6
    assert None not in list(items(value))  # closed with [], not [null, null]


@pytest.mark.parametrize("mode", ["auto", "tool", "prompted"])
def test_a_self_referencing_output_is_answered_by_the_demo_model(mode: str) -> None:
    agent = Agent("demo", output=Node, output_mode=mode)
    result = agent.run_sync("Sketch the family tree of the Tudors.")
    assert isinstance(result.output, Node)
    assert result.output.children and result.output.children[0].children  # it nests
    assert len(agent.attempts) == 1  # the first answer was valid: no reask
