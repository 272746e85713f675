"""AnthropicProvider against recorded Anthropic streams and errors, served through MockTransport."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    SSE,
    Chunks,
    fixture_text,
    raw_http,
    request,
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
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from nbagent.errors import (
    Action,
    ConfigError,
    ContentFiltered,
    ContextOverflow,
    InvalidResponse,
    Overloaded,
    StreamInterrupted,
    TransportError,
    classify,
)
from nbagent.providers import (
    AnthropicProvider,
    Completed,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolSpec,
)

TEXT = "anthropic-sdk-python__stream-text.txt"
TOOL = "anthropic-sdk-python__stream-tool-use.txt"
THINKING = "pydantic-ai__anthropic-stream-thinking.txt"
MIDSTREAM = "aibridge__anthropic-midstream-error.txt"
TOO_LONG = "aibridge__anthropic-400-prompt-too-long.txt"


def build_anthropic_body(model: str, request: ModelRequest) -> dict[str, Any]:
    """The body `AnthropicProvider` sends for `request`."""
    return AnthropicProvider(model, api_key=None).build_body(request)


def make(**kw: Any) -> Any:
    def factory(client: httpx.AsyncClient) -> AnthropicProvider:
        return AnthropicProvider("claude-sonnet-4-0", api_key=SENTINEL_KEY, client=client, **kw)

    return factory


def start(input_tokens: int = 5) -> str:
    return sse_event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-sonnet-4-20250514",
                "content": [],
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        },
        "message_start",
    )


def text_block(text: str, index: int = 0) -> str:
    return (
        sse_event(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )
        + sse_event(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
            "content_block_delta",
        )
        + sse_event({"type": "content_block_stop", "index": index}, "content_block_stop")
    )


def finish(stop_reason: str = "end_turn", output_tokens: int = 7) -> str:
    return sse_event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason},
            "usage": {"output_tokens": output_tokens},
        },
        "message_delta",
    ) + sse_event({"type": "message_stop"}, "message_stop")


# -- recorded streams --------------------------------------------------------------------------


def test_text_stream_fixture() -> None:
    served = run(make(), respond(fixture_text(TEXT), headers={**SSE, "request-id": "req_abc"}))
    assert served.error is None
    deltas = [p.text for p in served.parts if isinstance(p, TextPart)]
    # the recording arrives in one read: its three deltas reach the agent as one part
    assert deltas == ["Hello there!"]
    done = served.completed
    assert done.message == Message("assistant", (TextBlock("Hello there!"),))
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (11, 6)  # cumulative, not summed
    assert done.usage.requests == 1
    assert done.request_id == "req_abc"
    assert done.headers == {"request-id": "req_abc"}  # rate-limit headers only, for pacing
    assert done.model == "claude-3-opus-latest"
    assert done.response_id == "msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK"  # message_start's id
    assert done.usage.cost_usd is not None and done.usage.cost_usd > 0
    assert sum(isinstance(p, Completed) for p in served.parts) == 1


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> Any:
        for piece in self.pieces:
            yield piece


def test_deltas_that_arrive_in_separate_reads_stay_separate_parts() -> None:
    events = fixture_text(TEXT).split("\n\n")
    pieces = [(e + "\n\n").encode() for e in events if e.strip()]
    served = run(make(), respond(stream=_Pieces(pieces)))
    assert served.error is None
    assert [p.text for p in served.parts if isinstance(p, TextPart)] == ["Hello", " there", "!"]
    assert served.completed.message.text == "Hello there!"


def test_a_crlf_split_across_reads_still_ends_its_line() -> None:
    raw = fixture_text(TEXT).replace("\n", "\r\n").encode()
    pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]  # splits land inside CRLFs too
    served = run(make(), respond(stream=_Pieces(pieces)))
    assert served.error is None
    assert served.completed.message.text == "Hello there!"


def test_tool_use_stream_fixture() -> None:
    served = run(make(), respond(fixture_text(TOOL)))
    done = served.completed
    assert done.stop_reason == "tool_use"
    text, call = done.message.blocks
    assert text == TextBlock("I'll check the current weather in Paris for you.")
    assert call == ToolUseBlock(
        "toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"}
    )
    calls = [p for p in served.parts if isinstance(p, ToolCallPart)]
    assert calls[0] == ToolCallPart(
        0, "toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", '{"location": "Paris"}'
    )
    assert "".join(p.arguments for p in calls) == '{"location": "Paris"}'
    assert all(p.index == 0 for p in calls)
    assert (done.usage.input_tokens, done.usage.output_tokens) == (377, 65)


def test_thinking_stream_fixture_vcr() -> None:
    interaction = vcr(THINKING)
    assert interaction["request"]["parsed_body"]["thinking"]["type"] == "enabled"
    served = run(make(), respond(vcr_body_string(THINKING)))
    done = served.completed
    thinking, text = done.message.blocks
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking.startswith("This is a straightforward question about pedestrian")
    assert thinking.thinking.endswith("help prevent accidents.")
    assert thinking.signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK")
    assert thinking.signature.endswith("fQYAQ==")
    assert isinstance(text, TextBlock)
    assert text.text.startswith("Here are the basic steps for safely crossing the street:")
    assert text.text.endswith("Always prioritize safety over speed when crossing streets.")
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (43, 282)
    sigs = [p.signature for p in served.parts if isinstance(p, ThinkingPart) and p.signature]
    assert "".join(sigs) == thinking.signature
    streamed = "".join(p.text for p in served.parts if isinstance(p, ThinkingPart))
    assert streamed == thinking.thinking


def test_midstream_api_error_fixture_is_stream_interrupted() -> None:
    body = txtar_section(MIDSTREAM, "streaming")
    served = run(make(), respond(body, headers={**SSE, "request-id": "req_mid"}))
    err = served.error
    assert isinstance(err, StreamInterrupted)
    assert err.message == "Overloaded"
    assert err.code == "api_error"
    assert err.request_id == "req_mid"
    assert classify(err) is Action.RETRY
    assert not any(isinstance(p, Completed) for p in served.parts)


def test_midstream_overloaded_error_is_overloaded() -> None:
    body = (
        start()
        + sse_event({"type": "ping"}, "ping")
        + sse_event(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )
    )
    err = run(make(), respond(body)).error
    assert isinstance(err, Overloaded)
    assert err.message == "Overloaded"
    assert classify(err) is Action.RETRY


def test_400_prompt_too_long_fixture() -> None:
    status, headers, body = raw_http(txtar_section(TOO_LONG, "streaming"))
    assert status == 400
    err = run(make(), respond(body, status=status, headers=headers)).error
    assert isinstance(err, ContextOverflow)
    assert err.message == "prompt is too long: 205429 tokens > 200000 maximum"
    assert (err.tokens, err.limit) == (205429, 200000)
    assert err.status_code == 400
    assert err.code == "invalid_request_error"
    assert err.request_id == "req_011CV5Jab6gR3ZNs9Sj6apiD"
    assert classify(err) is Action.COMPACT
    assert "prompt is too long: 205429 tokens > 200000 maximum" in str(err)


# -- stream shapes --------------------------------------------------------------------------


def test_stream_without_message_stop_is_interrupted() -> None:
    text = fixture_text(TEXT)
    cut = text[: text.index("event: message_delta")]
    err = run(make(), respond(cut)).error
    assert isinstance(err, StreamInterrupted)
    assert "message_stop" in err.message


def test_refusal_stop_reason_is_content_filtered() -> None:
    body = start() + text_block("I can") + finish("refusal")
    err = run(make(), respond(body)).error
    assert isinstance(err, ContentFiltered)
    assert classify(err) is Action.FAIL


def test_ping_comments_and_unknown_events_are_skipped() -> None:
    body = (
        ": keep-alive comment\n\n"
        + start()
        + sse_event({"type": "ping"}, "ping")
        + sse_event({"type": "brand_new_event", "x": 1}, "brand_new_event")
        + text_block("ok")
        + ": another comment\n\n"
        + finish()
    )
    served = run(make(), respond(body))
    assert served.error is None
    assert served.completed.message.text == "ok"
    assert served.completed.usage.output_tokens == 7


def test_crlf_line_endings() -> None:
    body = (start() + text_block("crlf") + finish()).replace("\n", "\r\n")
    assert run(make(), respond(body)).completed.message.text == "crlf"


def test_events_split_across_tiny_chunks() -> None:
    body = (start() + text_block("chunky") + finish()).encode()
    chunks = [body[i : i + 3] for i in range(0, len(body), 3)]
    served = run(make(), respond(stream=Chunks(chunks)))
    assert served.completed.message.text == "chunky"


def test_tool_arguments_that_are_not_json_become_raw_input() -> None:
    body = (
        start()
        + sse_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {}},
            }
        )
        + sse_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"expr": 1+'},
            }
        )
        + sse_event({"type": "content_block_stop", "index": 0})
        + finish("tool_use")
    )
    served = run(make(), respond(body))
    (call,) = served.completed.message.blocks
    assert call == ToolUseBlock("toolu_1", "calc", {}, raw_input='{"expr": 1+')


def test_tool_call_with_no_arguments_is_empty_input() -> None:
    body = (
        start()
        + sse_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
            }
        )
        + sse_event({"type": "content_block_stop", "index": 0})
        + finish("tool_use")
    )
    (call,) = run(make(), respond(body)).completed.message.blocks
    assert call == ToolUseBlock("toolu_2", "now", {}, None)


def test_data_that_is_not_json_is_stream_interrupted() -> None:
    body = start() + "event: content_block_delta\ndata: {not json\n\n"
    err = run(make(), respond(body)).error
    assert isinstance(err, StreamInterrupted)
    assert "not JSON" in err.message


def test_cache_tokens_count_as_input() -> None:
    body = (
        sse_event(
            {
                "type": "message_start",
                "message": {
                    "model": "claude-sonnet-4-0",
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 100,
                        "cache_creation_input_tokens": 20,
                        "output_tokens": 1,
                    },
                },
            }
        )
        + text_block("x")
        + finish()
    )
    usage = run(make(), respond(body)).completed.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (130, 100, 20)


# -- transport and caps -----------------------------------------------------------------------


def test_connection_reset_mid_stream_is_stream_interrupted() -> None:
    chunks = Chunks([start().encode(), httpx.ReadError("Connection reset by peer")])
    err = run(make(), respond(stream=chunks, headers={**SSE, "request-id": "req_r"})).error
    assert isinstance(err, StreamInterrupted)
    assert "Connection reset by peer" in err.message
    assert err.request_id == "req_r"
    assert classify(err) is Action.RETRY


def test_os_error_mid_stream_is_stream_interrupted() -> None:
    chunks = Chunks([start().encode(), ConnectionResetError(104, "reset")])
    assert isinstance(run(make(), respond(stream=chunks)).error, StreamInterrupted)


def test_idle_stream_is_transport_error_naming_the_seconds() -> None:
    chunks = Chunks([start().encode(), 5.0, finish().encode()])
    err = run(make(idle_timeout=0.1), respond(stream=chunks)).error
    assert isinstance(err, TransportError)
    assert "0.1 s" in err.message
    assert "idle" in err.message
    assert classify(err) is Action.RETRY


def test_oversized_event_is_invalid_response() -> None:
    big = sse_event(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "x" * 5000},
        }
    )
    body = start() + text_block("a") + big + finish()
    err = run(make(max_event_bytes=1000), respond(body)).error
    assert isinstance(err, InvalidResponse)
    assert "max_event_bytes" in err.message
    assert classify(err) is Action.FAIL
    # the same stream within the cap is fine
    assert run(make(max_event_bytes=10_000), respond(body)).error is None


def test_oversized_event_in_small_chunks_is_invalid_response() -> None:
    data = ("data: " + "y" * 4000).encode()
    chunks = Chunks([start().encode()] + [data[i : i + 100] for i in range(0, len(data), 100)])
    err = run(make(max_event_bytes=1000), respond(stream=chunks)).error
    assert isinstance(err, InvalidResponse)


def test_oversized_error_body_is_invalid_response() -> None:
    body = json.dumps({"error": {"type": "api_error", "message": "z" * 5000}})
    err = run(make(max_body_bytes=1000), respond(body, status=500, headers={})).error
    assert isinstance(err, InvalidResponse)
    assert "max_body_bytes" in err.message


def test_oversized_error_body_streamed_without_length_is_invalid_response() -> None:
    chunks = Chunks([b"x" * 600, b"x" * 600, b"x" * 600])
    err = run(make(max_body_bytes=1000), respond(status=502, headers={}, stream=chunks)).error
    assert isinstance(err, InvalidResponse)


def test_2xx_json_that_is_not_a_stream_is_invalid_response() -> None:
    headers = {"content-type": "application/json"}
    err = run(make(), respond('{"id": "msg_1", "type": "message"}', headers=headers)).error
    assert isinstance(err, InvalidResponse)
    html = {"content-type": "text/html"}
    err = run(make(), respond("<html>captive portal</html>", headers=html)).error
    assert isinstance(err, InvalidResponse)


def test_2xx_json_error_object_is_classified() -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    err = run(make(), respond(body, headers={"content-type": "application/json"})).error
    assert isinstance(err, Overloaded)


def test_connect_failure_with_owned_client_is_transport_error() -> None:
    async def main() -> BaseException | None:
        provider = AnthropicProvider(
            "m", api_key=SENTINEL_KEY, base_url="http://127.0.0.1:9", connect_timeout=2.0
        )
        try:
            async for _ in provider.stream(request()):
                pass
        except Exception as exc:
            return exc
        finally:
            await provider.aclose()
        return None

    err = asyncio.run(main())
    assert isinstance(err, TransportError)
    assert SENTINEL_KEY not in str(err)
    assert classify(err) is Action.RETRY


def test_consumer_stopping_early_closes_cleanly() -> None:
    async def main() -> None:
        handler = respond(fixture_text(TEXT))
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            provider = AnthropicProvider("m", api_key=SENTINEL_KEY, client=client)
            gen = provider.stream(request())
            first = await gen.__anext__()
            assert isinstance(first, TextPart)
            await gen.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())


# -- the request -------------------------------------------------------------------------------


def conversation() -> tuple[Message, ...]:
    return (
        Message("user", (TextBlock("Look:"), ImageBlock("aGVsbG8=", "image/jpeg"))),
        Message(
            "assistant",
            (
                ThinkingBlock("let me think", "sig-123"),
                ThinkingBlock("unsigned, from elsewhere"),
                TextBlock("Calling."),
                ToolUseBlock("toolu_1", "calc", {"expr": "2+2"}),
                ToolUseBlock("toolu_2", "calc", {}, raw_input="{bad"),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock("toolu_1", (TextBlock("4"),)),
                ToolResultBlock("toolu_2", (TextBlock("arguments are not JSON"),), is_error=True),
            ),
        ),
    )


def test_request_body_and_headers_on_the_wire() -> None:
    req = ModelRequest(
        conversation(),
        system="Be brief.",
        tools=(ToolSpec("calc", "Evaluate.", {"type": "object", "properties": {}}),),
        max_tokens=321,
        options={"temperature": 0.2, "thinking": {"type": "enabled", "budget_tokens": 1024}},
        cache=False,  # the cache breakpoints have a test of their own
    )
    served = run(make(), respond(fixture_text(TEXT)), req)
    (sent,) = served.requests
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == SENTINEL_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = served.body
    assert body["model"] == "claude-sonnet-4-0"
    assert body["stream"] is True
    assert body["max_tokens"] == 321
    assert body["system"] == "Be brief."
    assert body["temperature"] == 0.2
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["tools"] == [
        {
            "name": "calc",
            "description": "Evaluate.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    user, assistant, results = body["messages"]
    assert user["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "aGVsbG8="},
    }
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "let me think", "signature": "sig-123"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"expr": "2+2"}},
        {"type": "tool_use", "id": "toolu_2", "name": "calc", "input": {}},
    ]
    assert results["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "4"}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": [{"type": "text", "text": "arguments are not JSON"}],
            "is_error": True,
        },
    ]


def test_round_trip_of_a_streamed_message() -> None:
    """What the provider parsed goes back on the wire as Anthropic wrote it."""
    done = run(make(), respond(vcr_body_string(THINKING))).completed
    body = build_anthropic_body("m", ModelRequest((Message.user("q"), done.message), cache=False))
    thinking, text = body["messages"][1]["content"]
    assert thinking["type"] == "thinking"
    assert thinking["signature"] == done.message.blocks[0].signature  # type: ignore[union-attr]
    assert text == {"type": "text", "text": done.message.text}
    done = run(make(), respond(fixture_text(TOOL))).completed
    body = build_anthropic_body("m", ModelRequest((Message.user("q"), done.message), cache=False))
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
        "name": "get_weather",
        "input": {"location": "Paris"},
    }


def test_reserved_options_do_not_override_the_request() -> None:
    req = ModelRequest((Message.user("hi"),), options={"model": "other", "stream": False})
    body = build_anthropic_body("mine", req)
    assert body["model"] == "mine" and body["stream"] is True


def test_base_url_forms() -> None:
    p = AnthropicProvider("m", api_key="k-1234", base_url="http://127.0.0.1:8000/")
    assert p.url == "http://127.0.0.1:8000/v1/messages"
    p = AnthropicProvider("m", api_key="k-1234", base_url="https://proxy.example/anthropic/v1")
    assert p.url == "https://proxy.example/anthropic/v1/messages"
    with pytest.raises(ConfigError):
        AnthropicProvider("m", api_key="k-1234", base_url="ftp://x")
    with pytest.raises(ConfigError):
        AnthropicProvider("m", api_key="k-1234\n")
    with pytest.raises(ConfigError):
        AnthropicProvider("m", api_key="k-1234", idle_timeout=0)


def test_options_that_are_not_json_are_config_errors() -> None:
    req = ModelRequest((Message.user("hi"),), options={"temperature": object()})
    served = run(make(), respond(fixture_text(TEXT)), req)
    assert isinstance(served.error, ConfigError)
    assert served.requests == []


def test_repr_hides_the_key() -> None:
    p = AnthropicProvider("claude-x", api_key=SENTINEL_KEY)
    assert SENTINEL_KEY not in repr(p)
    assert SENTINEL_KEY not in str(p)
    assert "api_key='***'" in repr(p)
    assert (p.name, p.model) == ("anthropic", "claude-x")


# -- newer stop reasons, redacted thinking, prompt caching -------------------------------------


def test_context_window_stop_is_context_overflow_not_the_length_path() -> None:
    body = (
        start(input_tokens=199_000)
        + text_block("partial")
        + finish("model_context_window_exceeded")
    )
    err = run(make(), respond(body)).error
    assert isinstance(err, ContextOverflow)
    assert err.code == "model_context_window_exceeded"
    assert err.tokens == 199_000 + 7
    assert classify(err) is Action.COMPACT


def test_pause_turn_keeps_the_server_tool_blocks_to_send_back() -> None:
    """A paused turn is continued by sending its content back: the server tool's call and
    result (kinds nbagent does not model) must go back exactly as they came."""
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.org", "title": "x"}],
    }
    body = (
        start()
        + text_block("Searching…")
        + sse_event(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {},
                },
            }
        )
        + sse_event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": "backoff"}'},
            }
        )
        + sse_event({"type": "content_block_stop", "index": 1})
        + sse_event({"type": "content_block_start", "index": 2, "content_block": result})
        + sse_event({"type": "content_block_stop", "index": 2})
        + finish("pause_turn")
    )
    served = run(make(), respond(body))
    done = served.completed
    assert done.stop_reason == "pause_turn"
    assert done.message.text == "Searching…"
    assert not any(isinstance(p, ToolCallPart) for p in served.parts)  # not a call for nbagent
    assert done.message.tool_uses == []
    sent = build_anthropic_body("m", ModelRequest((Message.user("q"), done.message), cache=False))
    assert sent["messages"][1]["content"][1:] == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "backoff"},
        },
        result,
    ]


REDACTED = "EmmwCkYIBxgCKkBVqZXMTFpA6Ei3xsdjIZ5c1PvgmIRSNoY2ZQvFhcUp3a4N5Q=="


def redacted_stream() -> str:
    return (
        start()
        + sse_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": REDACTED},
            },
            "content_block_start",
        )
        + sse_event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        + sse_event(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_9", "name": "calc", "input": {}},
            },
            "content_block_start",
        )
        + sse_event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"e": "1+1"}'},
            },
            "content_block_delta",
        )
        + sse_event({"type": "content_block_stop", "index": 1}, "content_block_stop")
        + finish("tool_use")
    )


def test_redacted_thinking_is_kept_and_goes_back_byte_exact() -> None:
    done = run(make(), respond(redacted_stream())).completed
    redacted, call = done.message.blocks
    assert redacted == RedactedThinkingBlock(REDACTED)
    results = Message("user", (ToolResultBlock("toolu_9", (TextBlock("2"),)),))
    body = build_anthropic_body(
        "m", ModelRequest((Message.user("q"), done.message, results), cache=False)
    )
    assert body["messages"][1]["content"][0] == {"type": "redacted_thinking", "data": REDACTED}
    assert json.dumps(body["messages"][1]["content"][0]["data"]) == json.dumps(REDACTED)
    # another provider's state never goes to Anthropic
    other = Message(
        "assistant", (OpaqueBlock("gemini", {"thoughtSignature": "x"}), TextBlock("hi"))
    )
    body = build_anthropic_body("m", ModelRequest((Message.user("q"), other), cache=False))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "hi"}]


def test_cache_breakpoints_on_system_tools_and_the_stable_prefix() -> None:
    history = (
        Message.user("first question"),
        Message(
            "assistant",
            (ThinkingBlock("hmm", "sig"), ToolUseBlock("toolu_1", "calc", {"e": "1"})),
        ),
        Message("user", (ToolResultBlock("toolu_1", (TextBlock("1"),)),)),
        Message("assistant", (ThinkingBlock("so", "sig2"), ToolUseBlock("toolu_2", "calc", {}))),
        Message("user", (ToolResultBlock("toolu_2", (TextBlock("2"),)), TextBlock("and?"))),
    )
    tools = (
        ToolSpec("calc", "Evaluate.", {"type": "object"}),
        ToolSpec("read", "Read.", {"type": "object"}),
    )
    req = ModelRequest(history, system="Be brief.", tools=tools)
    served = run(make(), respond(fixture_text(TEXT)), req)
    body = served.body
    mark = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": mark}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == mark
    marked = [
        (i, j)
        for i, m in enumerate(body["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    # the last block of the last message, and where the previous request ended (message 2)
    assert marked == [(2, 0), (4, 1)]
    assert sum("cache_control" in str(x) for x in (body["system"], body["tools"])) == 2
    total = len(marked) + 2
    assert total <= 4  # the API's limit
    # thinking blocks never carry a breakpoint; cache=False sends none at all
    off = build_anthropic_body("m", ModelRequest(history, system="s", tools=tools, cache=False))
    assert "cache_control" not in json.dumps(off)


def test_cache_reads_and_writes_are_priced_below_plain_input() -> None:
    def usage_stream(read: int, write: int) -> str:
        return (
            sse_event(
                {
                    "type": "message_start",
                    "message": {
                        "model": "claude-sonnet-4-20250514",
                        "usage": {
                            "input_tokens": 100,
                            "cache_read_input_tokens": read,
                            "cache_creation_input_tokens": write,
                            "output_tokens": 1,
                        },
                    },
                }
            )
            + text_block("x")
            + finish(output_tokens=10)
        )

    plain = run(make(), respond(usage_stream(0, 0))).completed.usage
    cached = run(make(), respond(usage_stream(10_000, 0))).completed.usage
    written = run(make(), respond(usage_stream(0, 10_000))).completed.usage
    uncached = run(
        make(), respond(usage_stream(0, 0).replace('"input_tokens": 100', '"input_tokens": 10100'))
    ).completed.usage
    assert cached.cache_read_tokens == 10_000 and written.cache_write_tokens == 10_000
    assert cached.input_tokens == written.input_tokens == uncached.input_tokens == 10_100
    assert plain.cost_usd is not None and cached.cost_usd is not None
    assert written.cost_usd is not None and uncached.cost_usd is not None
    # reading 10k tokens from the cache costs a tenth of sending them; writing costs more
    assert plain.cost_usd < cached.cost_usd < uncached.cost_usd < written.cost_usd
