"""ResponsesProvider against recorded OpenAI Responses streams and errors (MockTransport)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    build_responses_body,
    govcr_body,
    json_lines_sse,
    respond,
    run,
    sse_event,
    txtar_section,
    vcr_body_string,
    vcr_parsed_body,
)

from nbagent._core._messages import (
    ImageBlock,
    Message,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from nbagent.errors import (
    Action,
    BadRequest,
    ContentFiltered,
    QuotaExceeded,
    RateLimited,
    StreamInterrupted,
    classify,
)
from nbagent.providers import ModelRequest, TextPart, ThinkingPart, ToolCallPart, ToolSpec
from nbagent.providers._openai_responses import ResponsesProvider

TEXT = "aibridge__openai-responses-stream-text.txt"
PARALLEL = "fantasy__openai-responses-stream-parallel-function-calls.txt"
REASONING = "ai__openai-responses-stream-reasoning.txt"
FAILED = "ai__openai-responses-stream-error-failed.txt"
INCOMPLETE = "mirascope__openai-responses-stream-incomplete.txt"
HTTP_400 = "pydantic-ai__openai-responses-400.txt"


def make(model: str = "gpt-5.1-codex-max", **kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> ResponsesProvider:
        return ResponsesProvider(model, api_key=SENTINEL_KEY, client=client, **kw)

    return factory


def events(*items: dict[str, Any]) -> str:
    return "".join(sse_event(i, i["type"]) for i in items)


def created() -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": "resp_1", "model": "o4-mini"}}


# -- recorded streams --------------------------------------------------------------------------


def test_text_stream_fixture() -> None:
    served = run(make(), respond(txtar_section(TEXT, "streaming")))
    done = served.completed
    text = "Why did the scarecrow win an award?\n\nBecause he was outstanding in his field!"
    assert done.message.blocks == (TextBlock(text),)
    assert "".join(p.text for p in served.parts if isinstance(p, TextPart)) == text
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (11, 18)
    assert done.model == "gpt-4o-mini-2024-07-18"
    assert done.usage.cost_usd is not None and done.usage.cost_usd > 0


def test_parallel_function_calls_fixture() -> None:
    served = run(make(), respond(govcr_body(PARALLEL, 0)))
    done = served.completed
    add, mul = done.message.blocks
    assert add == ToolUseBlock("call_ZckkKeJQwcJPC27VXT61xFLf", "add", {"a": 2, "b": 3})
    assert mul == ToolUseBlock("call_M9h2AZgoLEv6q5gkex1QMtm2", "multiply", {"a": 2, "b": 3})
    assert done.stop_reason == "tool_use"
    calls = [p for p in served.parts if isinstance(p, ToolCallPart)]
    by_index: dict[int, str] = {}
    for c in calls:
        by_index[c.index] = by_index.get(c.index, "") + c.arguments
    assert by_index == {0: '{"a":2,"b":3}', 1: '{"a":2,"b":3}'}
    assert [c.name for c in calls if c.name] == ["add", "multiply"]


def reasoning_done() -> dict[str, Any]:
    for line in json_lines_sse(REASONING).split("\n\n"):
        if '"response.output_item.done"' in line and '"reasoning"' in line:
            item: dict[str, Any] = json.loads(line.split("data: ", 1)[1])["item"]
            return item
    raise AssertionError("no finished reasoning item in the recording")


def test_reasoning_fixture_keeps_the_encrypted_item_as_it_came() -> None:
    served = run(make(), respond(json_lines_sse(REASONING)))
    done = served.completed
    thinking, item, call = done.message.blocks
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking.startswith("**Calculating step-by-step using calculator**")
    streamed = "".join(p.text for p in served.parts if isinstance(p, ThinkingPart))
    assert streamed == thinking.thinking
    # the item as output_item.done delivered it (the added and completed blobs differ)
    assert item == OpaqueBlock("openai-responses", reasoning_done())
    assert call == ToolUseBlock(
        "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"}
    )


def test_reasoning_item_round_trips_byte_exact_into_the_next_request() -> None:
    done = run(make(), respond(json_lines_sse(REASONING))).completed
    (call,) = done.message.tool_uses
    history = (
        Message.user("12 + 7, times 3, times 10?"),
        done.message,
        Message("user", (ToolResultBlock(call.id, (TextBlock("19"),)),)),
    )
    body = build_responses_body("gpt-5.1-codex-max", ModelRequest(history))
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    user, reasoning, function_call, output = body["input"]
    assert json.dumps(reasoning) == json.dumps(reasoning_done())  # byte for byte
    assert function_call == {
        "type": "function_call",
        "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
        "name": "calculator",
        "arguments": '{"a": 12, "b": 7, "op": "add"}',
    }
    assert output == {
        "type": "function_call_output",
        "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
        "output": "19",
    }
    # another service's reasoning items are never sent (they would not decrypt there)
    body = build_responses_body("o4-mini", ModelRequest(history), provider="azure")
    assert [i.get("type") for i in body["input"]] == [
        None,
        "function_call",
        "function_call_output",
    ]


def test_nested_error_event_then_failed_fixture_is_quota_exceeded() -> None:
    err = run(make(), respond(json_lines_sse(FAILED))).error
    assert isinstance(err, QuotaExceeded)
    assert err.code == "insufficient_quota"
    assert classify(err) is Action.FAIL


@pytest.mark.parametrize(
    ("payload", "cls", "action"),
    [
        # the documented flat shape
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None},
            RateLimited,
            Action.RETRY,
        ),
        (
            {"type": "error", "code": "server_error", "message": "oops"},
            StreamInterrupted,
            Action.RETRY,
        ),
        (
            {"type": "error", "code": "insufficient_quota", "message": "pay up"},
            QuotaExceeded,
            Action.FAIL,
        ),
        # response.failed on its own
        (
            {
                "type": "response.failed",
                "response": {
                    "error": {"code": "server_error", "message": "The server had an error"}
                },
            },
            StreamInterrupted,
            Action.RETRY,
        ),
        (
            {
                "type": "response.failed",
                "response": {"error": {"code": "rate_limit_exceeded", "message": "later"}},
            },
            RateLimited,
            Action.RETRY,
        ),
    ],
)
def test_error_events_classify_by_code(
    payload: dict[str, Any], cls: type[Exception], action: Action
) -> None:
    err = run(make(), respond(events(created(), payload))).error
    assert type(err) is cls
    assert classify(err) is action


def test_incomplete_max_output_tokens_fixture_takes_the_length_path() -> None:
    done = run(make("gpt-4o"), respond(vcr_body_string(INCOMPLETE))).completed
    assert done.stop_reason == "max_tokens"
    assert done.message.text.startswith("Sure! Here is a list of all 50 U.S. states:")
    assert done.message.text.endswith("9. Florida")
    assert (done.usage.input_tokens, done.usage.output_tokens) == (14, 50)


def test_incomplete_content_filter_is_content_filtered() -> None:
    text = vcr_body_string(INCOMPLETE).replace(
        '"reason":"max_output_tokens"', '"reason":"content_filter"'
    )
    err = run(make("gpt-4o"), respond(text)).error
    assert isinstance(err, ContentFiltered)
    assert classify(err) is Action.FAIL


def test_400_before_any_event_fixture() -> None:
    body = json.dumps(vcr_parsed_body(HTTP_400))
    err = run(
        make("gpt-4o"), respond(body, status=400, headers={"content-type": "application/json"})
    ).error
    assert isinstance(err, BadRequest)
    assert err.code == "decimal_below_min_value"
    assert "temperature" in err.message
    assert classify(err) is Action.FAIL


def test_a_stream_without_its_end_broke() -> None:
    cut = txtar_section(TEXT, "streaming").split("event: response.completed")[0]
    err = run(make(), respond(cut)).error
    assert isinstance(err, StreamInterrupted) and "response.completed" in err.message


def test_cached_and_reasoning_tokens() -> None:
    usage = {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 256},
    }
    item = {"type": "message", "content": [{"type": "output_text", "text": "ok"}]}
    body = events(
        created(),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"model": "o4-mini", "usage": usage}},
    )
    got = run(make(), respond(body)).completed.usage
    assert (got.input_tokens, got.cache_read_tokens, got.output_tokens) == (1200, 1024, 300)


def test_a_refusal_is_content_filtered() -> None:
    item = {"type": "message", "content": [{"type": "refusal", "refusal": "I can't help."}]}
    body = events(
        created(),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {}},
    )
    err = run(make(), respond(body)).error
    assert isinstance(err, ContentFiltered) and err.message == "I can't help."


# -- the request -------------------------------------------------------------------------------


def test_request_url_headers_and_body() -> None:
    req = ModelRequest(
        (
            Message("user", (TextBlock("Look:"), ImageBlock("aGk=", "image/jpeg"))),
            Message(
                "assistant",
                (TextBlock("Calling."), ToolUseBlock("call_1", "calc", {}, raw_input="{bad")),
            ),
            Message("user", (ToolResultBlock("call_1", (TextBlock("not JSON"),), True),)),
        ),
        system="Be brief.",
        tools=(ToolSpec("calc", "Evaluate.", {"type": "object"}),),
        max_tokens=99,
        options={"reasoning": {"effort": "low"}, "store": True},
    )
    served = run(make("gpt-4o"), respond(txtar_section(TEXT, "streaming")), req)
    (sent,) = served.requests
    assert str(sent.url) == "https://api.openai.com/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    body = served.body
    assert body["store"] is False and body["stream"] is True  # stateless, whatever the options
    assert "include" not in body  # gpt-4o refuses encrypted reasoning
    assert body["instructions"] == "Be brief."
    assert body["max_output_tokens"] == 99
    assert body["reasoning"] == {"effort": "low"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "calc",
            "description": "Evaluate.",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look:"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,aGk="},
            ],
        },
        {"role": "assistant", "content": "Calling."},
        {"type": "function_call", "call_id": "call_1", "name": "calc", "arguments": "{bad"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Error: not JSON"},
    ]
