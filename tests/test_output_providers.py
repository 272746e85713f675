"""Structured outputs on each provider's wire: the documented request shapes, the modes `auto`
picks, the dialects' schema transforms, and what each provider's refusals and length stops
become (recorded streams where there are some)."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    fixture_text,
    respond,
    run,
    sse_event,
    vcr_body_string,
)
from pydantic import BaseModel, Field

from nbagent._core._attempts import AttemptFailure, Sent
from nbagent._core._messages import Message
from nbagent._loop._output_schema import ANSWER_TOOL, OutputSchema
from nbagent._loop._output_step import StructuredOutput
from nbagent.errors import ConfigError, ContentFiltered, OutputTruncated
from nbagent.providers import (
    AnthropicProvider,
    AzureChatProvider,
    GeminiProvider,
    ModelRequest,
    OpenAIProvider,
    ResponsesProvider,
    ToolSpec,
)
from nbagent.providers._base import OutputFormat
from nbagent.providers._output_schemas import (
    anthropic_schema,
    gemini_schema,
    openai_strict_schema,
)
from nbagent.providers._output_wire import output_modes, wire_format
from nbagent.providers._scripted import ScriptedModel


class Item(BaseModel):
    name: str = Field(min_length=2)
    price: float = Field(ge=0)


class Order(BaseModel):
    """An order, read from a message."""

    status: Literal["open", "shipped"]
    items: list[Item]
    note: str | None = None


SCHEMA = OutputSchema.of(Order)


def providers() -> dict[str, Any]:
    key = {"api_key": SENTINEL_KEY}
    return {
        "anthropic": AnthropicProvider("claude-sonnet-4-5", **key),
        "openai": OpenAIProvider("gpt-4o", **key),
        "responses": ResponsesProvider("gpt-4o", **key),
        "gemini": GeminiProvider("gemini-2.5-flash", **key),
    }


def body_for(fmt_name: str, mode: Literal["native", "tool"], *, other_tools: bool = False) -> Any:
    provider = providers()[fmt_name]
    name = ANSWER_TOOL if mode == "tool" else SCHEMA.name
    fmt = wire_format(
        provider, mode, name=name, schema=SCHEMA.json_schema, description=SCHEMA.description
    )
    tools: tuple[ToolSpec, ...] = ()
    if other_tools:
        tools += (ToolSpec("calculator", "adds", {"type": "object", "properties": {}}),)
    if mode == "tool":
        tools += (ToolSpec(ANSWER_TOOL, "the answer", SCHEMA.json_schema),)
    request = ModelRequest((Message.user("hi"),), tools=tools, output=fmt)
    return provider.build_body(request)


def documented() -> list[dict[str, Any]]:
    text = fixture_text("docs__structured-output-requests.jsonl")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def shape(doc: Any, got: Any) -> None:
    """`got` has every key `doc` has, with values of the same shape (schemas compared by kind)."""
    if isinstance(doc, dict):
        assert isinstance(got, dict), (doc, got)
        for key, value in doc.items():
            assert key in got, f"{key!r} missing from {sorted(got)}"
            if key in ("schema", "responseJsonSchema"):
                assert isinstance(got[key], dict) and got[key]["type"] == "object"
            else:
                shape(value, got[key])
    elif isinstance(doc, list):
        assert isinstance(got, list) and len(got) == len(doc)
        for a, b in zip(doc, got, strict=True):
            shape(a, b)
    elif isinstance(doc, str) and doc in ("Review",):
        assert got == "Order"
    else:
        assert got == doc


@pytest.mark.parametrize("case", documented(), ids=lambda c: f"{c['format']}-{c['mode']}")
def test_each_format_puts_the_answer_where_its_provider_documents_it(case: dict[str, Any]) -> None:
    body = body_for(case["format"], case["mode"])
    shape(case["body"], body)


def test_openai_strict_schema_and_the_name_rules() -> None:
    body = body_for("openai", "native")
    spec = body["response_format"]["json_schema"]
    assert spec["strict"] is True and spec["name"] == "Order"
    assert spec["description"] == "An order, read from a message."
    item = spec["schema"]["properties"]["items"]["items"]
    assert item["additionalProperties"] is False and item["required"] == ["name", "price"]
    # strict mode wants every property required: the optional note too (it may be null)
    assert spec["schema"]["required"] == ["status", "items", "note"]


def test_tool_mode_forces_the_tool_by_name_or_any_tool_beside_others() -> None:
    assert body_for("anthropic", "tool", other_tools=True)["tool_choice"] == {"type": "any"}
    assert body_for("openai", "tool", other_tools=True)["tool_choice"] == "required"
    assert body_for("responses", "tool", other_tools=True)["tool_choice"] == "required"
    gemini = body_for("gemini", "tool", other_tools=True)["toolConfig"]["functionCallingConfig"]
    assert gemini == {"mode": "ANY"}


def test_a_forced_tool_gives_way_to_extended_thinking_and_to_the_users_choice() -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", api_key=SENTINEL_KEY)
    fmt = OutputFormat("tool", ANSWER_TOOL, SCHEMA.json_schema)
    tools = (ToolSpec(ANSWER_TOOL, "the answer", SCHEMA.json_schema),)
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    req = ModelRequest((Message.user("hi"),), tools=tools, output=fmt, options=thinking)
    assert "tool_choice" not in provider.build_body(req)  # the API refuses the two together
    mine = {"tool_choice": {"type": "auto"}}
    req = ModelRequest((Message.user("hi"),), tools=tools, output=fmt, options=mine)
    assert provider.build_body(req)["tool_choice"] == {"type": "auto"}


def test_openai_compatible_servers_get_the_schema_as_it_is_not_strict() -> None:
    local = OpenAIProvider("llama-3.1-8b", api_key=None, base_url="http://127.0.0.1:8080/v1")
    fmt = wire_format(local, "native", name="Order", schema=SCHEMA.json_schema)
    assert fmt.strict is False and fmt.schema == SCHEMA.json_schema
    body = local.build_body(ModelRequest((Message.user("hi"),), output=fmt))
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA.json_schema


@pytest.mark.parametrize(
    ("provider", "tools", "auto"),
    [
        (AnthropicProvider("claude-sonnet-4-5", api_key="k"), False, "native"),
        (AnthropicProvider("claude-opus-4-1-20250805", api_key="k"), False, "native"),
        (AnthropicProvider("claude-haiku-4-5", api_key="k"), True, "native"),
        (AnthropicProvider("claude-sonnet-4-20250514", api_key="k"), False, "tool"),
        (AnthropicProvider("claude-3-5-haiku-latest", api_key="k"), False, "tool"),
        (OpenAIProvider("gpt-4o", api_key="k"), True, "native"),
        (OpenAIProvider("gpt-4o-2024-05-13", api_key="k"), False, "tool"),
        (OpenAIProvider("gpt-3.5-turbo", api_key="k"), False, "tool"),
        (OpenAIProvider("o1-mini", api_key="k"), False, "tool"),
        (OpenAIProvider("gpt-5-mini", api_key="k"), False, "native"),
        (
            OpenAIProvider("qwen3", api_key=None, base_url="http://localhost:8000/v1"),
            False,
            "native",
        ),
        (ResponsesProvider("o4-mini", api_key="k"), False, "native"),
        (
            AzureChatProvider(
                "my-gpt-4o-deployment", api_key="k", base_url="https://x.openai.azure.com"
            ),
            False,
            "native",
        ),
        (GeminiProvider("gemini-2.5-flash", api_key="k"), False, "native"),
        (GeminiProvider("gemini-2.5-flash", api_key="k"), True, "tool"),  # JSON mode + functions
        (GeminiProvider("gemini-3-pro-preview", api_key="k"), True, "native"),
        (ScriptedModel([]), True, "native"),
    ],
    ids=lambda v: getattr(v, "model", str(v)),
)
def test_auto_picks_native_where_the_provider_and_model_have_it(
    provider: Any, tools: bool, auto: str
) -> None:
    modes = output_modes(provider, tools=tools)
    assert modes[0] == auto
    assert set(modes) == {"native", "tool", "prompted"}  # any may still be asked for


def test_a_provider_of_ones_own_has_no_native_mode() -> None:
    class Mine:
        name, model = "mine", "m1"

    assert output_modes(Mine(), tools=False) == ("tool", "prompted")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no native structured output"):
        wire_format(Mine(), "native", name="x", schema={"type": "object"})  # type: ignore[arg-type]


# -- the dialects -------------------------------------------------------------------------------


def nodes(schema: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        out.append(schema)
        for value in schema.values():
            out += nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            out += nodes(value)
    return out


def test_openai_strict_moves_what_strict_mode_refuses_into_descriptions() -> None:
    strict = openai_strict_schema(SCHEMA.json_schema)
    name = strict["properties"]["items"]["items"]["properties"]["name"]
    assert "minLength" not in name and "minLength: 2" in name["description"]
    price = strict["properties"]["items"]["items"]["properties"]["price"]
    assert price["minimum"] == 0  # strict mode takes numeric bounds
    for node in nodes(strict):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        assert "default" not in node and "title" not in node


def test_openai_strict_refuses_free_keys_naming_the_field() -> None:
    class Tally(BaseModel):
        counts: dict[str, int]

    with pytest.raises(ConfigError, match=r"field `counts` has `additionalProperties`"):
        openai_strict_schema(OutputSchema.of(Tally).json_schema)


def test_anthropics_transform_keeps_what_it_takes_and_describes_the_rest() -> None:
    out = anthropic_schema(SCHEMA.json_schema)
    item = out["properties"]["items"]["items"]
    assert item["additionalProperties"] is False
    assert "minimum" not in item["properties"]["price"]
    assert "{minimum: 0}" in item["properties"]["price"]["description"]
    assert out["properties"]["status"]["enum"] == ["open", "shipped"]
    assert out["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_anthropics_transform_refuses_a_field_with_no_type() -> None:
    with pytest.raises(ConfigError, match=r"field `x` has no `type`"):
        anthropic_schema({"type": "object", "properties": {"x": {}}})


def test_gemini_keeps_its_documented_keywords_and_describes_the_rest() -> None:
    out = gemini_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]{3}$", "const": "ABC"},
                "n": {"type": "integer", "minimum": 1, "maximum": 9},
            },
            "required": ["code"],
        }
    )
    assert "$schema" not in out
    assert out["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 9}
    code = out["properties"]["code"]
    assert code["enum"] == ["ABC"] and "pattern" not in code
    assert "pattern: ^[A-Z]{3}$" in code["description"]


def test_a_schema_no_mode_can_take_fails_before_anything_is_sent() -> None:
    class Tally(BaseModel):
        counts: dict[str, int]

    scripted = ScriptedModel([])
    with pytest.raises(ConfigError, match="additionalProperties"):
        StructuredOutput(
            OutputSchema.of(Tally),
            mode="native",
            validators=(),
            retries=2,
            providers=[OpenAIProvider("gpt-4o", api_key="k")],
            tools=[],
        )
    assert scripted.requests == []


# -- refusals and length stops, read from each format ------------------------------------------


def openai_make(client: httpx.AsyncClient) -> OpenAIProvider:
    return OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=client)


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse_event({"id": "c1", "model": "gpt-4o", "choices": [choice]})


def test_openai_refusal_field_is_a_refusal_with_its_text() -> None:
    body = (
        openai_chunk({"role": "assistant", "content": None, "refusal": ""})
        + openai_chunk({"refusal": "I'm sorry, I cannot "})
        + openai_chunk({"refusal": "help with that."})
        + openai_chunk({}, "stop")
        + "data: [DONE]\n\n"
    )
    err = run(openai_make, respond(body)).error
    assert isinstance(err, ContentFiltered)
    assert "I'm sorry, I cannot help with that." in str(err)


def test_an_empty_refusal_and_an_empty_finish_reason_are_not_refusals() -> None:
    # some OpenAI-compatible servers send `refusal: ""` on every chunk and `finish_reason: ""`
    body = (
        openai_chunk({"role": "assistant", "content": "", "refusal": ""}, "")
        + openai_chunk({"content": '{"status": "open", "items": []}', "refusal": ""}, "")
        + openai_chunk({"refusal": ""}, "stop")
        + "data: [DONE]\n\n"
    )
    served = run(openai_make, respond(body))
    assert served.error is None
    assert json.loads(served.completed.message.text) == {"status": "open", "items": []}


def test_responses_refusal_part_is_a_refusal_with_its_text() -> None:
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't assist with that."}],
    }
    body = sse_event(
        {"type": "response.output_item.done", "output_index": 0, "item": item}
    ) + sse_event({"type": "response.completed", "response": {"id": "resp_1", "output": [item]}})

    def make(client: httpx.AsyncClient) -> ResponsesProvider:
        return ResponsesProvider("gpt-4o", api_key=SENTINEL_KEY, client=client)

    err = run(make, respond(body)).error
    assert isinstance(err, ContentFiltered) and "I can't assist with that." in str(err)


def test_anthropic_refusal_keeps_what_the_model_said() -> None:
    start = sse_event(
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3}}},
        "message_start",
    )
    text = sse_event(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    ) + sse_event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "I won't write that."},
        },
        "content_block_delta",
    )
    end = sse_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "refusal"},
            "usage": {"output_tokens": 5},
        },
        "message_delta",
    ) + sse_event({"type": "message_stop"}, "message_stop")

    def make(client: httpx.AsyncClient) -> AnthropicProvider:
        return AnthropicProvider("claude-sonnet-4-5", api_key=SENTINEL_KEY, client=client)

    err = run(make, respond(start + text + end)).error
    assert isinstance(err, ContentFiltered) and "I won't write that." in str(err)


def check_truncated(completed: Any, provider: Any, max_tokens: int) -> OutputTruncated:
    structured = StructuredOutput(
        SCHEMA, mode="native", validators=(), retries=2, providers=[provider], tools=[]
    )
    with pytest.raises(AttemptFailure) as caught:
        structured.check(completed, 0, max_tokens=max_tokens, sent=Sent(completed.usage))
    err = caught.value.error
    assert isinstance(err, OutputTruncated)
    return err


def test_openais_recorded_length_stop_on_a_structured_answer_is_a_truncation() -> None:
    # openai-python's own test of a structured answer cut after one token: `{"` then length
    served = run(openai_make, respond(fixture_text("openai-python__chat-stream-length-usage.txt")))
    err = check_truncated(served.completed, OpenAIProvider("gpt-4o", api_key="k"), 1)
    assert err.raw == '{"' and err.output_tokens == 1 and "max_tokens=1" in str(err)
    assert err.usage is not None and err.usage.input_tokens == 79


@pytest.mark.parametrize(
    ("cls", "model", "fixture", "limit", "used"),
    [
        (GeminiProvider, "gemini-2.5-flash", "mirascope__gemini-stream-max-tokens.txt", 50, 48),
        (ResponsesProvider, "gpt-4o", "mirascope__openai-responses-stream-incomplete.txt", 50, 50),
    ],
    ids=["gemini MAX_TOKENS", "responses max_output_tokens"],
)
def test_recorded_length_stops_of_gemini_and_responses_are_truncations(
    cls: Any, model: str, fixture: str, limit: int, used: int
) -> None:
    def make(client: httpx.AsyncClient) -> Any:
        return cls(model, api_key=SENTINEL_KEY, client=client)

    served = run(make, respond(vcr_body_string(fixture)))
    err = check_truncated(served.completed, cls(model, api_key="k"), limit)
    assert err.output_tokens == used and f"{used} tokens" in str(err)
