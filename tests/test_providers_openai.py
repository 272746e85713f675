"""OpenAIProvider (OpenAI, OpenRouter, Ollama, llama.cpp, vLLM) against recorded streams."""

from __future__ import annotations

import json
from typing import Any

import httpx
from provider_support import (
    SENTINEL_KEY,
    SSE,
    Chunks,
    fixture_text,
    raw_http,
    respond,
    run,
    sse_event,
    txtar_section,
    vcr,
    vcr_body_string,
)

from nbagent._core._messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from nbagent.errors import (
    Action,
    ContentFiltered,
    ContextOverflow,
    InvalidResponse,
    RateLimited,
    StreamInterrupted,
    TransportError,
    classify,
)
from nbagent.providers import (
    Completed,
    ModelRequest,
    OpenAIProvider,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)
from nbagent.providers._openai_chat import messages_to_openai

TEXT = "openai-python__chat-stream-text.txt"
TOOLS = "openai-python__chat-stream-parallel-tool-calls.txt"
LENGTH = "openai-python__chat-stream-length-usage.txt"
MIDSTREAM = "aibridge__openai-chat-midstream-error.txt"
CONTEXT = "aibridge__openai-400-context-length-exceeded.txt"
OR_MIDSTREAM = "pydantic-ai__openrouter-midstream-error.txt"
OR_429 = "pydantic-ai__openrouter-429-provider-error.txt"


def make(name: str = "openai", **kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> OpenAIProvider:
        return OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, client=client, name=name, **kw)

    return factory


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return sse_event({"id": "c1", "model": "gpt-4o", "choices": [choice], **extra})


def usage_chunk(prompt: int = 3, completion: int = 4) -> str:
    return sse_event(
        {
            "id": "c1",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        }
    )


DONE = "data: [DONE]\n\n"


# -- recorded streams --------------------------------------------------------------------------


def test_text_stream_fixture() -> None:
    headers = {
        **SSE,
        "x-request-id": "req_o1",
        "x-ratelimit-remaining-requests": "99",
        "openai-organization": "org-secret",
    }
    served = run(make(), respond(fixture_text(TEXT), headers=headers))
    done = served.completed
    assert done.response_id == "chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL"  # the chunks' id
    expected = (
        "I'm unable to provide real-time weather updates. To get the current weather in "
        "San Francisco, I recommend checking a reliable weather website or a weather app."
    )
    assert done.message == Message("assistant", (TextBlock(expected),))
    assert "".join(p.text for p in served.parts if isinstance(p, TextPart)) == expected
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (14, 30)
    assert done.request_id == "req_o1"
    assert done.headers == {"x-request-id": "req_o1", "x-ratelimit-remaining-requests": "99"}
    assert done.model == "gpt-4o-2024-08-06"
    assert done.usage.cost_usd is not None and done.usage.cost_usd > 0


def test_parallel_tool_calls_fixture() -> None:
    served = run(make(), respond(fixture_text(TOOLS)))
    done = served.completed
    assert done.stop_reason == "tool_use"
    assert done.message.blocks == (
        ToolUseBlock(
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        ToolUseBlock(
            "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            "get_stock_price",
            {"ticker": "AAPL", "exchange": "NASDAQ"},
        ),
    )
    parts = [p for p in served.parts if isinstance(p, ToolCallPart)]
    # one read: each call's start and its argument fragments reach the agent as one part
    assert parts[0] == ToolCallPart(
        0,
        "call_JMW1whyEaYG438VE1OIflxA2",
        "GetWeatherArgs",
        '{"city": "Edinburgh", "country": "GB", "units": "c"}',
    )
    assert {p.index for p in parts} == {0, 1}
    second = "".join(p.arguments for p in parts if p.index == 1)
    assert json.loads(second) == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert (done.usage.input_tokens, done.usage.output_tokens) == (149, 60)


def test_length_and_usage_fixture() -> None:
    done = run(make(), respond(fixture_text(LENGTH))).completed
    assert done.stop_reason == "max_tokens"
    assert done.message.text == '{"'
    assert (done.usage.input_tokens, done.usage.output_tokens) == (79, 1)


def test_midstream_error_fixture_is_stream_interrupted() -> None:
    body = txtar_section(MIDSTREAM, "streaming")
    served = run(make(), respond(body))
    err = served.error
    assert isinstance(err, StreamInterrupted)
    assert err.message == "The server had an error while processing your request. Sorry about that!"
    assert err.code == "server_error"
    assert classify(err) is Action.RETRY
    assert "".join(p.text for p in served.parts if isinstance(p, TextPart)) == 'The question "'
    assert not any(isinstance(p, Completed) for p in served.parts)


def test_openrouter_midstream_error_fixture() -> None:
    interaction = vcr(OR_MIDSTREAM)
    assert interaction["response"]["status"]["code"] == 200
    served = run(make("openrouter"), respond(vcr_body_string(OR_MIDSTREAM)))
    err = served.error
    assert isinstance(err, StreamInterrupted)  # code 400 mid-stream: the stream broke
    assert err.message == "Token limit reached"
    assert err.status_code == 400
    assert err.provider == "openrouter"
    # the `: OPENROUTER PROCESSING` comments were skipped, the reasoning streamed
    thinking = "".join(p.text for p in served.parts if isinstance(p, ThinkingPart))
    assert thinking == "We need to respond to a greeting. The user"


def test_openrouter_midstream_429_is_rate_limited() -> None:
    body = (
        ": OPENROUTER PROCESSING\n\n"
        + chunk({"content": "Hi"})
        + sse_event(
            {
                "id": "gen-1",
                "error": {"code": 429, "message": "Rate limit exceeded upstream"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            }
        )
        + DONE
    )
    err = run(make("openrouter"), respond(body)).error
    assert isinstance(err, RateLimited)
    assert err.message == "Rate limit exceeded upstream"
    assert classify(err) is Action.RETRY


def test_openrouter_midstream_502_is_stream_interrupted() -> None:
    body = chunk({"content": "Hi"}) + sse_event(
        {"error": {"code": 502, "message": "Upstream died"}, "choices": []}
    )
    err = run(make("openrouter"), respond(body)).error
    assert isinstance(err, StreamInterrupted)
    assert err.status_code == 502


def test_400_context_length_exceeded_fixture() -> None:
    status, headers, body = raw_http(txtar_section(CONTEXT, "streaming"))
    err = run(make(), respond(body, status=status, headers=headers)).error
    assert isinstance(err, ContextOverflow)
    assert err.code == "context_length_exceeded"
    assert err.message.startswith("Input tokens exceed the configured limit of 272000 tokens.")
    assert (err.tokens, err.limit) == (3148588, 272000)
    assert classify(err) is Action.COMPACT


def test_openrouter_429_provider_error_fixture() -> None:
    response = vcr(OR_429)["response"]
    status = response["status"]["code"]
    headers = {k: v[0] for k, v in response["headers"].items()}
    body = json.dumps(response["parsed_body"])
    err = run(make("openrouter"), respond(body, status=status, headers=headers)).error
    assert isinstance(err, RateLimited)
    assert err.status_code == 429
    assert err.message.startswith("Provider returned error (Google): google/gemini-2.0-flash-exp")
    assert "temporarily rate-limited upstream" in err.message
    assert classify(err) is Action.RETRY


# -- stream shapes --------------------------------------------------------------------------


def test_missing_done_is_stream_interrupted() -> None:
    body = chunk({"content": "Hi"}) + chunk(finish="stop") + usage_chunk()
    err = run(make(), respond(body)).error
    assert isinstance(err, StreamInterrupted)
    assert "[DONE]" in err.message


def test_missing_finish_reason_with_nothing_before_done_is_stream_interrupted() -> None:
    # (with content before [DONE], a missing finish_reason reads as "stop": test_providers_wild)
    body = chunk({"role": "assistant"}) + usage_chunk() + DONE
    err = run(make(), respond(body)).error
    assert isinstance(err, StreamInterrupted)
    assert "finish_reason" in err.message


def test_content_filter_is_content_filtered() -> None:
    body = chunk({"content": "Hi"}) + chunk(finish="content_filter") + DONE
    err = run(make(), respond(body)).error
    assert isinstance(err, ContentFiltered)
    assert classify(err) is Action.FAIL


def test_refusal_is_content_filtered() -> None:
    body = chunk({"refusal": "I can't help with that."}) + chunk(finish="stop") + DONE
    err = run(make(), respond(body)).error
    assert isinstance(err, ContentFiltered)
    assert err.message == "I can't help with that."


def test_invalid_tool_arguments_become_raw_input() -> None:
    body = (
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": ""}}
                ]
            }
        )
        + chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{'single': quotes}"}}]})
        + chunk(finish="tool_calls")
        + DONE
    )
    (call,) = run(make(), respond(body)).completed.message.blocks
    assert call == ToolUseBlock("call_1", "f", {}, raw_input="{'single': quotes}")
    body = (
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_2", "function": {"name": "g", "arguments": "[1]"}}
                ]
            }
        )
        + chunk(finish="tool_calls")
        + DONE
    )
    (call,) = run(make(), respond(body)).completed.message.blocks
    assert call == ToolUseBlock("call_2", "g", {}, raw_input="[1]")


def test_reasoning_content_becomes_thinking_and_stop_after_tools_is_tool_use() -> None:
    body = (
        chunk({"reasoning_content": "hmm"})
        + chunk({"content": "Let me look."})
        + chunk(
            {"tool_calls": [{"id": "c9", "function": {"name": "ls", "arguments": {"path": "."}}}]}
        )
        + chunk(finish="stop")
        + DONE
    )
    done = run(make("ollama"), respond(body)).completed
    assert done.message.blocks == (
        ThinkingBlock("hmm"),
        TextBlock("Let me look."),
        ToolUseBlock("c9", "ls", {"path": "."}),
    )
    assert done.stop_reason == "tool_use"
    assert done.usage.cost_usd == 0.0  # ollama runs locally


def test_cached_prompt_tokens() -> None:
    body = (
        chunk({"content": "x"})
        + chunk(finish="stop")
        + sse_event(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 64},
                },
            }
        )
        + DONE
    )
    usage = run(make(), respond(body)).completed.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (100, 2, 64)


def test_connection_reset_mid_stream_is_stream_interrupted() -> None:
    chunks = Chunks([chunk({"content": "Hi"}).encode(), httpx.RemoteProtocolError("peer closed")])
    err = run(make(), respond(stream=chunks)).error
    assert isinstance(err, StreamInterrupted)


def test_idle_stream_is_transport_error() -> None:
    chunks = Chunks([chunk({"content": "Hi"}).encode(), 5.0, DONE.encode()])
    err = run(make(idle_timeout=0.15), respond(stream=chunks)).error
    assert isinstance(err, TransportError)
    assert "0.15 s" in err.message


def test_oversized_event_is_invalid_response() -> None:
    body = chunk({"content": "x" * 3000}) + chunk(finish="stop") + DONE
    err = run(make(max_event_bytes=2048), respond(body)).error
    assert isinstance(err, InvalidResponse)


# -- the request -------------------------------------------------------------------------------


def conversation() -> tuple[Message, ...]:
    return (
        Message("user", (TextBlock("What is in this image?"), ImageBlock("aGk=", "image/png"))),
        Message(
            "assistant",
            (
                ThinkingBlock("hidden"),
                TextBlock("Checking."),
                ToolUseBlock("call_1", "describe", {"detail": "high"}),
                ToolUseBlock("call_2", "describe", {}, raw_input="{oops"),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock("call_1", (TextBlock("a cat"), ImageBlock("Y2F0", "image/png"))),
                ToolResultBlock("call_2", (TextBlock("arguments are not JSON"),), is_error=True),
            ),
        ),
        Message.user("Thanks"),
    )


def test_request_body_and_headers_on_the_wire() -> None:
    req = ModelRequest(
        conversation(),
        system="Be brief.",
        tools=(ToolSpec("describe", "Describe.", {"type": "object"}),),
        max_tokens=99,
        options={"temperature": 0.5},
    )
    served = run(make(), respond(fixture_text(TEXT)), req)
    (sent,) = served.requests
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    body = served.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    assert body["temperature"] == 0.5
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "describe",
                "description": "Describe.",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "describe", "arguments": '{"detail": "high"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "describe", "arguments": "{oops"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: arguments are not JSON"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,Y2F0"}}],
        },
        {"role": "user", "content": "Thanks"},
    ]


def test_other_servers_get_max_tokens_and_no_auth_without_a_key() -> None:
    def factory(client: httpx.AsyncClient) -> OpenAIProvider:
        return OpenAIProvider(
            "llama3.2",
            api_key=None,
            base_url="http://localhost:11434/v1",
            client=client,
            name="ollama",
        )

    served = run(factory, respond(fixture_text(TEXT)))
    (sent,) = served.requests
    assert str(sent.url) == "http://localhost:11434/v1/chat/completions"
    assert "authorization" not in sent.headers
    assert served.body["max_tokens"] == 4096


def test_extra_headers_are_sent() -> None:
    served = run(
        make("openrouter", extra_headers={"HTTP-Referer": "https://example.org", "X-Title": "nb"}),
        respond(fixture_text(TEXT)),
    )
    assert served.requests[0].headers["x-title"] == "nb"


def test_round_trip_of_streamed_tool_calls() -> None:
    done = run(make(), respond(fixture_text(TOOLS))).completed
    results = Message(
        "user",
        tuple(ToolResultBlock(b.id, (TextBlock("ok"),)) for b in done.message.tool_uses),
    )
    msgs = messages_to_openai((Message.user("q"), done.message, results), None)
    calls = msgs[1]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Edinburgh", "country": "GB", "units": "c"},
        {"ticker": "AAPL", "exchange": "NASDAQ"},
    ]
    assert msgs[1]["content"] == ""  # never null: llama.cpp's server rejects that
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool"]


def test_repr_hides_the_key() -> None:
    p = OpenAIProvider("gpt-4o", api_key=SENTINEL_KEY, name="openrouter")
    assert SENTINEL_KEY not in repr(p)
    assert "api_key='***'" in repr(p)
    assert (p.name, p.model) == ("openrouter", "gpt-4o")
