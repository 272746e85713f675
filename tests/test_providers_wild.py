"""Servers in the wild: what OpenAI-compatible servers and the Responses API really send.

Snowflake Cortex ends a stream with [DONE] but no finish_reason; the Responses API names an
unknown model with HTTP 400; DeepSeek and OpenRouter stream raw reasoning over the Responses API;
llama.cpp's server (llama-cpp-python) reads `max_tokens` only, answers HTTP 500 to
`"content": null`, and cuts the stream of a prompt over its context. The fixtures are assembled
in the recorded shape of each (their first lines say so); the llama.cpp cases also run end to end
against a small local server that behaves as that one does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from provider_support import (
    SENTINEL_KEY,
    build_responses_body,
    fixture_text,
    json_lines_sse,
    raw_http,
    respond,
    run,
    sse_event,
    txtar_section,
)

from nbagent import Agent, RetryPolicy, ScriptedModel, tool
from nbagent._core._messages import Message, OpaqueBlock, TextBlock, ThinkingBlock, ToolUseBlock
from nbagent._loop._request import SUMMARY_SYSTEM
from nbagent.errors import (
    Action,
    ContextOverflow,
    ModelNotFound,
    ServerError,
    StreamInterrupted,
    classify,
)
from nbagent.events import Event, FallbackStarted, RetryScheduled, ThinkingDelta
from nbagent.mock import MockServer
from nbagent.providers import (
    AnthropicProvider,
    Completed,
    ModelRequest,
    OpenAIProvider,
    ResponsesProvider,
    StreamPart,
)
from nbagent.providers._http_errors import error_from_response

CORTEX = "assembled__snowflake-cortex-chat-stream-no-finish-reason.txt"
NOT_FOUND = "assembled__model-not-found-bodies.jsonl"
REASONING = "assembled__deepseek-responses-stream-reasoning-text.txt"
LLAMA = "assembled__llamacpp-server.txt"


def chat(base_url: str | None = None, name: str = "openai") -> Any:
    def factory(client: httpx.AsyncClient) -> OpenAIProvider:
        return OpenAIProvider(
            "claude-3-5-sonnet", api_key=SENTINEL_KEY, base_url=base_url, client=client, name=name
        )

    return factory


# -- 1. [DONE] after content, and no finish_reason -------------------------------------------------


def test_a_stream_ended_by_done_without_a_finish_reason_is_a_complete_answer() -> None:
    served = run(
        chat("https://example.snowflakecomputing.com/api/v2/cortex/v1"),
        respond(fixture_text(CORTEX)),
    )
    assert served.error is None
    done = served.completed
    assert done.message.text == "Snowflake Cortex streams this answer."
    assert done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (14, 7)
    assert "no finish_reason" in done.note and "stop" in done.note


def test_the_same_stream_cut_before_done_stays_interrupted() -> None:
    cut = fixture_text(CORTEX).replace("data: [DONE]\n\n", "")
    err = run(chat(), respond(cut)).error
    assert isinstance(err, StreamInterrupted) and "[DONE]" in err.message


def test_the_attempt_log_says_the_finish_reason_was_assumed() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(respond(fixture_text(CORTEX))))
    provider = OpenAIProvider(
        "claude-3-5-sonnet",
        api_key=SENTINEL_KEY,
        base_url="https://example.snowflakecomputing.com/api/v2/cortex/v1",
        client=client,
    )
    agent = Agent(provider, limiter=False)
    result = asyncio.run(agent.run("Hi", show=False))
    assert result.final_text == "Snowflake Cortex streams this answer."
    frame = agent.attempts
    assert list(frame["outcome"]) == ["ok"]  # one attempt: no retry of a complete answer
    assert "no finish_reason; read as stop" in frame["message"].iloc[0]


# -- 2. "not found", whatever the status ------------------------------------------------------------


def not_found_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture_text(NOT_FOUND).splitlines() if line.strip()]


@pytest.mark.parametrize("row", not_found_rows(), ids=lambda r: f"{r['provider']}-{r['status']}")
def test_every_providers_unknown_model_is_model_not_found(row: dict[str, Any]) -> None:
    err = error_from_response(row["provider"], row["status"], json.dumps(row["body"]), {})
    assert isinstance(err, ModelNotFound), (type(err).__name__, err)
    assert classify(err) is Action.FAIL  # final for this model; a fallback chain moves on


def test_a_fallback_chain_moves_on_from_the_responses_api_s_400_model_not_found() -> None:
    row = not_found_rows()[0]
    assert (row["provider"], row["status"]) == ("openai-responses", 400)
    answer = respond(
        json.dumps(row["body"]), status=400, headers={"content-type": "application/json"}
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    first = ResponsesProvider("gpt-9-preview", api_key=SENTINEL_KEY, client=client)
    events: list[Event] = []
    agent = Agent([first, ScriptedModel(["From the next model."])], subscribers=[events.append])
    result = asyncio.run(agent.run("Hi", show=False))
    assert result.final_text == "From the next model."
    (fallback,) = [e for e in events if isinstance(e, FallbackStarted)]
    assert fallback.error == "ModelNotFound"


# -- 3. raw reasoning over the Responses API --------------------------------------------------------


def test_raw_reasoning_is_thinking_kept_in_the_message_and_sent_back_with_its_content() -> None:
    def factory(client: httpx.AsyncClient) -> ResponsesProvider:
        return ResponsesProvider(
            "deepseek/deepseek-r1",
            api_key=SENTINEL_KEY,
            base_url="https://openrouter.ai/api/v1",
            client=client,
        )

    served = run(factory, respond(json_lines_sse(REASONING)))
    assert served.error is None
    streamed = "".join(
        getattr(p, "text", "") for p in served.parts if type(p).__name__ == "ThinkingPart"
    )
    full = "The user wants the weather in Paris; I should call get_weather."
    assert streamed == full  # shown as thinking while it streams
    blocks = served.completed.message.blocks
    assert [type(b) for b in blocks] == [ThinkingBlock, OpaqueBlock, ToolUseBlock]
    assert isinstance(blocks[0], ThinkingBlock) and blocks[0].thinking == full
    # the next request carries the reasoning item with its content, before the call it led to
    follow = ModelRequest((Message.user("Weather in Paris?"), served.completed.message))
    body = build_responses_body("deepseek/deepseek-r1", follow)
    reasoning, call = body["input"][1], body["input"][2]
    assert reasoning["type"] == "reasoning"
    assert reasoning["content"] == [{"type": "reasoning_text", "text": full}]
    assert "encrypted_content" not in reasoning
    assert call["type"] == "function_call" and call["call_id"] == "call_k2m9"


def test_raw_reasoning_that_came_only_as_deltas_is_still_kept() -> None:
    lines = []
    for line in fixture_text(REASONING).splitlines():
        event = json.loads(line)
        if event["type"] == "response.output_item.done" and event["item"]["type"] == "reasoning":
            continue  # a server that never finishes the item
        if event["type"] == "response.completed":
            event["response"]["output"] = []  # nor lists it at the end
        lines.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    served = run(
        lambda c: ResponsesProvider("deepseek-r1", api_key=SENTINEL_KEY, client=c),
        respond("".join(lines)),
    )
    opaque = [b for b in served.completed.message.blocks if isinstance(b, OpaqueBlock)]
    assert opaque and opaque[0].data["content"][0]["text"].endswith("call get_weather.")


def test_the_agent_shows_raw_reasoning_as_thinking_deltas() -> None:
    answer = json_lines_sse(REASONING)
    text = (
        'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r2",'
        '"status":"completed","output":[{"type":"message","role":"assistant","content":'
        '[{"type":"output_text","text":"Sunny."}]}],"usage":{"input_tokens":9,"output_tokens":2}}}\n\n'
    )
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return respond(answer if len(bodies) == 1 else text)(request)

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: sunny"

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = ResponsesProvider("deepseek-r1", api_key=SENTINEL_KEY, client=client)
    events: list[Event] = []
    agent = Agent(provider, tools=[get_weather], subscribers=[events.append], limiter=False)
    assert asyncio.run(agent.run("Weather in Paris?", show=False)).final_text == "Sunny."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)).startswith("The user")
    sent_back = [i for i in bodies[1]["input"] if i.get("type") == "reasoning"]
    assert sent_back and sent_back[0]["content"][0]["type"] == "reasoning_text"
    saved = agent.history[1]
    assert any(isinstance(b, ThinkingBlock) for b in saved.blocks)


# -- 4-6. llama.cpp's server (llama-cpp-python) ---------------------------------------------------


class LlamaServer:
    """Behaves as llama-cpp-python's server does where nbagent used to trip: reads `max_tokens`
    (and not `max_completion_tokens`), answers HTTP 500 to an assistant turn with
    `"content": null`, and (for the context test) would cut the stream of a long prompt."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        stream = txtar_section(LLAMA, "stream")
        status, headers, error = raw_http(txtar_section(LLAMA, "content-null"))
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.bodies.append(body)
                if any(
                    m.get("role") == "assistant" and m.get("content", "") is None
                    for m in body["messages"]
                ):
                    self._send(status, headers["content-type"], error)
                elif not any(m.get("role") == "tool" for m in body["messages"]) and body.get(
                    "tools"
                ):
                    self._send(200, "text/event-stream", server.tool_call().encode())
                else:
                    self._send(200, "text/event-stream", stream.encode())

            def _send(self, code: int, ctype: str, data: bytes) -> None:
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def tool_call() -> str:
        call = {
            "index": 0,
            "id": "call_0",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        }
        return (
            sse_event(
                {
                    "id": "c1",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": None, "tool_calls": [call]},
                            "finish_reason": None,
                        }
                    ],
                }
            )
            + sse_event(
                {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
            )
            + "data: [DONE]\n\n"
        )


@pytest.fixture
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def test_a_local_server_gets_the_cap_in_max_tokens(llama: LlamaServer) -> None:
    agent = Agent("openai:qwen2.5-0.5b", base_url=llama.url, api_key="sk-local", max_tokens=12)
    result = asyncio.run(agent.run("What is a token bucket?", show=False))
    assert result.final_text.startswith("A token bucket holds")
    (body,) = llama.bodies
    assert body["max_tokens"] == 12 and "max_completion_tokens" not in body


def test_openai_s_own_api_keeps_max_completion_tokens_and_a_summary_cap_reaches_a_local_server() -> (
    None
):
    text = txtar_section(LLAMA, "stream")
    own = run(chat(), respond(text), ModelRequest((Message.user("q"),), max_tokens=12))
    assert own.body["max_completion_tokens"] == 12 and "max_tokens" not in own.body
    # a summary request is capped at 2,048 tokens: that cap too must be in the field read
    local = run(
        chat("http://127.0.0.1:8080/v1"),
        respond(text),
        ModelRequest((Message.user("q"),), max_tokens=2048),
    )
    assert local.body["max_tokens"] == 2048 and "max_completion_tokens" not in local.body


def test_a_tool_only_turn_is_sent_with_empty_content_and_the_run_goes_on(
    llama: LlamaServer,
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    agent = Agent("openai:qwen2.5-0.5b", base_url=llama.url, api_key="sk-local", tools=[add])
    result = asyncio.run(agent.run("2 + 3?", show=False))
    assert result.final_text.startswith("A token bucket")
    assert len(llama.bodies) == 2  # no 500, so no retry
    assistant = next(m for m in llama.bodies[1]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "add"
    assert list(agent.attempts.query("phase == 'request'")["outcome"]) == ["ok", "ok"]


def test_the_recorded_500_for_content_null_is_what_the_server_would_say(llama: LlamaServer) -> None:
    status, _, body = raw_http(txtar_section(LLAMA, "content-null"))
    err = error_from_response("openai", status, body, {})
    assert isinstance(err, ServerError)  # which is why it was retried: it must not be sent
    sent = httpx.post(
        llama.url + "/chat/completions",
        json={"messages": [{"role": "assistant", "content": None, "tool_calls": []}]},
    )
    assert sent.status_code == 500


def test_a_request_compaction_cannot_fit_fails_before_sending(llama: LlamaServer) -> None:
    earlier = [Message.user("Hello"), Message("assistant", (TextBlock("Hi!"),))]
    agent = Agent(
        "openai:qwen2.5-0.5b",
        base_url=llama.url,
        api_key="sk-local",
        context_window=200,
        history=earlier,
    )
    with pytest.raises(ContextOverflow) as info:
        asyncio.run(agent.run("word " * 2000, show=False))
    err = info.value
    # compaction summarised the earlier turns (summary requests), but the request itself was
    # never sent: that server would only have cut its stream, with no word of the context
    assert all(b["messages"][0]["content"] == SUMMARY_SYSTEM for b in llama.bodies)
    assert not any("word word word" in json.dumps(b) for b in llama.bodies)
    assert err.limit == 200 and err.tokens is not None and err.tokens > 200
    assert f"about {err.tokens:,} tokens (estimated)" in str(err)
    assert "200-token context window" in str(err)
    assert agent.history == earlier  # unchanged


def test_without_earlier_turns_nothing_at_all_is_sent(llama: LlamaServer) -> None:
    agent = Agent("openai:qwen2.5-0.5b", base_url=llama.url, api_key="sk-local", context_window=200)
    with pytest.raises(ContextOverflow, match="compaction has nothing more to shed"):
        asyncio.run(agent.run("word " * 2000, show=False))
    assert llama.bodies == [] and agent.history == []


# -- 7. The end marker with no finish reason: a usage report or not ------------------------------
#
# llama-cpp-python's server (interrupt_requests, on by default) stops a running stream when
# another request arrives: it sends `data: [DONE]` without the chunk that names a finish_reason,
# and it never sends usage (tests/test_llama_cpp_python.py reads its captured bytes). A server
# that leaves finish_reason out but reports usage (Snowflake Cortex, section 1) has finished;
# one that reports neither was cut, whether the body then ends cleanly or breaks off.

FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1)


def mock_agent(server: MockServer, fmt: str, events: list[Event]) -> Agent:
    if fmt == "anthropic":
        provider: Any = AnthropicProvider("demo", api_key="test-key", base_url=server.url)
    else:
        provider = OpenAIProvider("demo", api_key="test-key", base_url=server.openai_base_url)
    return Agent(provider, retry=FAST, limiter=False, subscribers=[events.append])


def answer(agent: Agent, prompt: str) -> str:
    async def main() -> str:
        try:
            return (await agent.run(prompt, show=False)).final_text
        finally:
            await agent.aclose()

    return asyncio.run(main())


PROMPT = "Explain how a token bucket paces requests."


def faulted(fmt: str, fault: str) -> tuple[str, str, Agent, list[Event], list[str]]:
    """The mock's whole answer to PROMPT; then the answer of an agent whose first request
    meets `fault`, the agent, its events and the faults the server applied in turn."""
    with MockServer() as server:
        whole = answer(mock_agent(server, fmt, []), PROMPT)
        server.set_faults([fault])
        events: list[Event] = []
        agent = mock_agent(server, fmt, events)
        final = answer(agent, PROMPT)
        wire = [r.fault for r in server.requests]
    return whole, final, agent, events, wire


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_stream_cut_after_its_end_marker_with_no_finish_reason_is_retried(fmt: str) -> None:
    whole, final, agent, events, wire = faulted(fmt, "cut_after_done")
    assert wire[-2:] == ["cut_after_done", "ok"]
    assert final == whole  # the whole answer, not the cut one
    (retry,) = [e for e in events if isinstance(e, RetryScheduled)]
    assert retry.error == "StreamInterrupted"
    end = "data: [DONE]" if fmt == "openai" else "message_stop"
    assert f"ended with {end} but with neither a" in retry.message and "cut" in retry.message
    assert "trust_end_marker=True" in retry.message  # the one setting that would accept it
    assert retry.discarded_text and whole.startswith(retry.discarded_text)
    assert len(retry.discarded_text) < len(whole)
    frame = agent.attempts
    assert frame["outcome"].tolist() == ["error", "ok"]
    assert frame["error_kind"].iloc[0] == "StreamInterrupted"
    assert frame["discarded_chars"].iloc[0] == len(retry.discarded_text)
    assert [m.role for m in agent.history] == ["user", "assistant"]
    assert agent.history[1].text == whole


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_clean_end_after_the_end_marker_with_no_finish_reason_is_the_answer(fmt: str) -> None:
    whole, final, agent, events, wire = faulted(fmt, "no_finish_reason")
    assert wire[-1] == "no_finish_reason"
    assert final == whole
    assert not [e for e in events if isinstance(e, RetryScheduled)]
    frame = agent.attempts
    assert frame["outcome"].tolist() == ["ok"]
    reason = "no finish_reason; read as stop" if fmt == "openai" else "no stop_reason"
    assert reason in frame["message"].iloc[0]


class ChunkedThenCut:
    """Serves one SSE text with chunked transfer encoding, then closes the connection before
    the chunk that ends the body: as a server that sent its end marker and then was cut."""

    def __init__(self, text: str) -> None:
        data = text.encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> ChunkedThenCut:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def stream_from(url: str) -> tuple[list[StreamPart], BaseException | None]:
    async def main() -> tuple[list[StreamPart], BaseException | None]:
        provider = OpenAIProvider("qwen2.5-0.5b", api_key="sk-local", base_url=url)
        parts: list[StreamPart] = []
        try:
            async for part in provider.stream(ModelRequest((Message.user("hi"),))):
                parts.append(part)
        except Exception as exc:
            return parts, exc
        finally:
            await provider.aclose()
        return parts, None

    return asyncio.run(main())


@pytest.mark.e2e
def test_with_a_finish_reason_seen_a_break_after_done_does_not_undo_the_answer() -> None:
    stream = txtar_section(LLAMA, "stream")  # finish_reason "length", then [DONE]
    assert '"finish_reason": "length"' in stream and stream.rstrip().endswith("data: [DONE]")
    with ChunkedThenCut(stream) as server:
        parts, error = stream_from(server.url)
    assert error is None
    done = parts[-1]
    assert isinstance(done, Completed)
    assert done.message.text == "A token bucket holds up to a burst of requests and refills"
    assert done.stop_reason == "max_tokens" and done.note == ""


@pytest.mark.e2e
def test_the_same_break_without_the_finish_chunk_is_stream_interrupted() -> None:
    # what llama-cpp-python sends when interrupt_requests cuts the stream: the deltas so far,
    # [DONE] in place of the finish chunk, then the connection closes mid-body
    chunks = txtar_section(LLAMA, "stream").split("\n\n")
    cut = "\n\n".join(c for c in chunks if '"finish_reason": "length"' not in c)
    assert 'finish_reason": "' not in cut and "data: [DONE]" in cut
    with ChunkedThenCut(cut) as server:
        parts, error = stream_from(server.url)
    assert isinstance(error, StreamInterrupted)
    assert "after data: [DONE] with no finish_reason" in error.message
    assert "peer closed connection" in error.message
    assert not any(isinstance(p, Completed) for p in parts)
