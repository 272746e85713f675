"""The mock provider over real sockets: wire formats, lifecycle, records, load."""

from __future__ import annotations

import inspect
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from mock_support import sse_events

from nbagent.mock import MockServer, RateLimit, default_responder, serve, shared_server

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"  # copies, sources inside
CALC = {
    "name": "calculator",
    "description": "Evaluate arithmetic.",
    "input_schema": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
}


# --- helpers: a small SSE decoder and stream reassembly ----------------------------------------


def anthropic_assemble(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"text": "", "thinking": "", "signature": "", "tools": [], "events": []}
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in sse_events(raw):
        payload = json.loads(data)
        assert payload["type"] == name, (name, payload)
        out["events"].append(name)
        if name == "message_start":
            out["input_tokens"] = payload["message"]["usage"]["input_tokens"]
        elif name == "content_block_start":
            blocks[payload["index"]] = dict(payload["content_block"], partial="")
        elif name == "content_block_delta":
            delta, block = payload["delta"], blocks[payload["index"]]
            if delta["type"] == "text_delta":
                out["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                out["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                out["signature"] += delta["signature"]
            elif delta["type"] == "input_json_delta":
                block["partial"] += delta["partial_json"]
        elif name == "content_block_stop":
            block = blocks[payload["index"]]
            if block["type"] == "tool_use":
                out["tools"].append((block["id"], block["name"], block["partial"]))
        elif name == "message_delta":
            out["stop_reason"] = payload["delta"]["stop_reason"]
            out["output_tokens"] = payload["usage"]["output_tokens"]
        elif name == "error":
            out["error"] = payload["error"]
    return out


def openai_assemble(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"text": "", "tools": {}, "done": False, "usage": None, "finish": None}
    for _, data in sse_events(raw):
        if data == "[DONE]":
            out["done"] = True
            continue
        chunk = json.loads(data)
        if "error" in chunk:
            out["error"] = chunk["error"]
            continue
        assert chunk["object"] == "chat.completion.chunk"
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            out["text"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = out["tools"].setdefault(call["index"], {"id": None, "name": "", "args": ""})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function", {})
                slot["name"] += function.get("name") or ""
                slot["args"] += function.get("arguments") or ""
            if choice["finish_reason"]:
                out["finish"] = choice["finish_reason"]
    return out


def anthropic_body(prompt: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "demo",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
    }
    body.update(extra)
    return body


def openai_body(prompt: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "demo",
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    body.update(extra)
    return body


@pytest.fixture
def server() -> Iterator[MockServer]:
    with serve() as s:
        yield s


@pytest.fixture
def client(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


# --- wire formats -------------------------------------------------------------------------------


def test_health_and_unknown_paths(client: httpx.Client) -> None:
    r = client.get("/health")
    assert (r.status_code, r.text) == (200, "ok")
    r = client.post("/v1/nope", json={}, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 404
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "not_found_error"
    r = client.post("/v1/nope", json={})
    assert r.status_code == 404 and set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_bad_json_is_400_in_each_format(client: httpx.Client) -> None:
    r = client.post(
        "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.headers["request-id"] == r.json()["request_id"]
    r = client.post(
        "/v1/chat/completions", content=b"[1,", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert r.headers["x-request-id"].startswith("req_")
    r = client.post("/v1/messages", json={"model": "demo", "messages": []})
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]


_USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("fmt", "body", "said", "param"),
    [
        ("anthropic", {"max_tokens": 0, "messages": [_USER]}, "max_tokens: Input", None),
        ("anthropic", {"max_tokens": 9, "messages": [{"role": "system"}]}, "messages.0.role", None),
        (
            "anthropic",
            {"max_tokens": 9, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
            "messages.0.content.0.type: Field required",
            None,
        ),
        ("anthropic", {"max_tokens": 9, "messages": [_USER], "tools": [{}]}, "tools.0.name", None),
        ("openai", {"messages": [{"role": "robot"}]}, "'messages.[0].role'", "messages.[0].role"),
        ("openai", {"messages": [_USER], "tools": [{"function": {}}]}, "function.name", "tools"),
        ("responses", {"input": [{"role": "robot"}]}, "'robot'", "input[0].role"),
        ("gemini", {"contents": [{"role": "robot", "parts": []}]}, "(got 'robot')", None),
    ],
)
def test_a_request_its_format_refuses_says_which_field_in_its_words(
    client: httpx.Client, fmt: str, body: dict[str, Any], said: str, param: str | None
) -> None:
    path = {
        "anthropic": "/v1/messages",
        "openai": "/v1/chat/completions",
        "responses": "/v1/responses",
        "gemini": "/v1beta/models/demo:generateContent",
    }[fmt]
    r = client.post(path, json={"model": "demo", **body})
    error = r.json()["error"]
    assert r.status_code == 400 and said in error["message"] and error.get("param") == param


def test_anthropic_stream_text(client: httpx.Client) -> None:
    r = client.post("/v1/messages", json=anthropic_body("Tell me about rivers."))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["request-id"].startswith("req_")
    out = anthropic_assemble(r.content)
    assert out["events"][:2] == ["message_start", "ping"]
    assert out["events"][-2:] == ["message_delta", "message_stop"]
    assert out["events"].count("content_block_delta") > 10  # many small deltas
    assert "rivers" in out["text"] and out["text"].count(".") >= 3
    assert out["stop_reason"] == "end_turn"
    assert out["output_tokens"] == -(-len(out["text"]) // 4)
    assert out["input_tokens"] >= len("Tell me about rivers.") // 4


def test_anthropic_stream_matches_recorded_fixture_shapes(client: httpx.Client) -> None:
    fixture = FIXTURES / "anthropic-sdk-python__stream-tool-use.txt"
    recorded = fixture.read_text().split("\n", 1)[1]
    reference: dict[str, set[str]] = {}
    for name, data in sse_events(recorded):
        assert name is not None
        reference.setdefault(name, set()).update(json.loads(data))
    r = client.post("/v1/messages", json=anthropic_body("What is 2 * 21?", tools=[CALC]))
    for name, data in sse_events(r.content):
        assert name in reference
        assert set(json.loads(data)) <= reference[name], name


def test_anthropic_tool_use_stream(client: httpx.Client) -> None:
    r = client.post("/v1/messages", json=anthropic_body("What is 17 * 23 + 4?", tools=[CALC]))
    out = anthropic_assemble(r.content)
    assert out["stop_reason"] == "tool_use"
    [(tool_id, name, args)] = out["tools"]
    assert tool_id.startswith("toolu_") and name == "calculator"
    assert json.loads(args) == {"expression": "17 * 23 + 4"}
    raw = sse_events(r.content)
    fragments = [
        json.loads(d)["delta"]["partial_json"]
        for n, d in raw
        if n == "content_block_delta" and "partial_json" in d
    ]
    assert fragments[0] == "" and len(fragments) > 2


def test_anthropic_thinking_when_requested(client: httpx.Client) -> None:
    body = anthropic_body(
        "How do I cross the street?", thinking={"type": "enabled", "budget_tokens": 1024}
    )
    out = anthropic_assemble(client.post("/v1/messages", json=body).content)
    assert out["thinking"] and out["signature"] and out["text"]
    plain = anthropic_assemble(client.post("/v1/messages", json=anthropic_body("Hi there")).content)
    assert plain["thinking"] == ""


def test_anthropic_non_streaming_message(client: httpx.Client) -> None:
    r = client.post(
        "/v1/messages", json=anthropic_body("What is 6 * 7?", tools=[CALC], stream=False)
    )
    message = r.json()
    assert r.status_code == 200 and message["type"] == "message" and message["role"] == "assistant"
    assert message["stop_reason"] == "tool_use"
    assert message["content"][-1]["input"] == {"expression": "6 * 7"}
    assert set(message["usage"]) == {"input_tokens", "output_tokens"}


def test_openai_stream_text_and_usage(client: httpx.Client) -> None:
    r = client.post("/v1/chat/completions", json=openai_body("Explain tides briefly."))
    assert r.status_code == 200 and r.headers["x-request-id"].startswith("req_")
    events = sse_events(r.content)
    assert events[-1] == (None, "[DONE]")
    usage_chunk = json.loads(events[-2][1])
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] > 0
    first = json.loads(events[0][1])["choices"][0]["delta"]
    assert first["role"] == "assistant"
    out = openai_assemble(r.content)
    assert out["finish"] == "stop" and out["done"] and "tides" in out["text"]
    assert out["usage"]["completion_tokens"] == -(-len(out["text"]) // 4)


def test_openai_stream_without_include_usage(client: httpx.Client) -> None:
    body = openai_body("Hello")
    del body["stream_options"]
    out = openai_assemble(client.post("/v1/chat/completions", json=body).content)
    assert out["usage"] is None and out["done"]


def test_openai_tool_call_stream_and_whole(client: httpx.Client) -> None:
    tools = [
        {"type": "function", "function": {"name": "calculator", "parameters": CALC["input_schema"]}}
    ]
    out = openai_assemble(
        client.post("/v1/chat/completions", json=openai_body("What is 3 + 4?", tools=tools)).content
    )
    assert out["finish"] == "tool_calls"
    call = out["tools"][0]
    assert call["id"].startswith("call_") and call["name"] == "calculator"
    assert json.loads(call["args"]) == {"expression": "3 + 4"}
    r = client.post(
        "/v1/chat/completions", json=openai_body("What is 3 + 4?", tools=tools, stream=False)
    )
    completion = r.json()
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["finish_reason"] == "tool_calls"
    assert completion["choices"][0]["message"]["tool_calls"][0]["id"] == call["id"]
    assert completion["usage"]["prompt_tokens"] > 0


# --- records ------------------------------------------------------------------------------------


def test_serve_takes_exactly_the_servers_arguments() -> None:
    # serve() hands its arguments to MockServer by name: a parameter added to one only fails here
    def params(fn: object) -> list[tuple[str, object, object, object]]:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
        return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()]

    assert params(serve) == params(MockServer)


def test_requests_are_recorded_with_keys_redacted(server: MockServer, client: httpx.Client) -> None:
    client.post(
        "/v1/messages",
        json=anthropic_body("hi"),
        headers={"x-api-key": "sk-ant-secret", "anthropic-version": "2023-06-01"},
    )
    client.post(
        "/v1/chat/completions", json=openai_body("hi"), headers={"Authorization": "Bearer sk-x"}
    )
    first, second = server.requests
    assert first.path == "/v1/messages" and first.format == "anthropic" and first.status == 200
    assert first.body["messages"][0]["content"] == "hi" and first.fault == "ok" and first.stream
    assert first.headers["x-api-key"] == "[redacted]"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert second.headers["authorization"] == "[redacted]" and second.format == "openai"
    assert "sk-" not in repr(server.requests)
    server.clear_requests()
    assert server.requests == []


def test_a_gemini_key_is_in_no_request_record_nor_recording(tmp_path: Path) -> None:
    key = "AIzaSy-gemini-secret-key"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    path = tmp_path / "gemini.nbrec"
    with serve(record=path) as server, httpx.Client(base_url=server.url) as c:
        r = c.post(
            f"/v1beta/models/demo:generateContent?key={key}",
            json=body,
            headers={"x-goog-api-key": key},
        )
        assert r.status_code == 200
        (record,) = server.requests
    assert record.format == "gemini" and record.headers["x-goog-api-key"] == "[redacted]"
    assert record.path == "/v1beta/models/demo:generateContent?key=[redacted]"
    assert key not in repr(record)
    assert key not in path.read_text()


def test_context_window_overflow_messages(client: httpx.Client) -> None:
    with serve(context_window=50) as small, httpx.Client(base_url=small.url) as c:
        long_prompt = "word " * 100  # 500 chars -> 125 tokens
        r = c.post("/v1/messages", json=anthropic_body(long_prompt))
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert r.json()["error"]["type"] == "invalid_request_error"
        tokens = small.requests[-1]
        assert message == f"prompt is too long: {tokens_of(message)} tokens > 50 maximum"
        assert tokens.fault == "context_window"
        r = c.post("/v1/chat/completions", json=openai_body(long_prompt))
        error = r.json()["error"]
        assert r.status_code == 400 and error["code"] == "context_length_exceeded"
        assert error["message"].startswith("This model's maximum context length is 50 tokens. ")
        assert "Please reduce the length of the messages." in error["message"]
        assert c.post("/v1/messages", json=anthropic_body("short")).status_code == 200


def tokens_of(message: str) -> int:
    return int(message.split("prompt is too long: ")[1].split(" ")[0])


def test_rate_limit_headers_on_success(client: httpx.Client) -> None:
    with (
        serve(rate_limit=RateLimit(requests_per_s=10, burst=3)) as limited,
        httpx.Client(base_url=limited.url) as c,
    ):
        r = c.post("/v1/messages", json=anthropic_body("hi"))
        assert r.headers["anthropic-ratelimit-requests-limit"] == "3"
        assert r.headers["anthropic-ratelimit-requests-remaining"] == "2"
        assert r.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
        r = c.post("/v1/chat/completions", json=openai_body("hi"))
        assert r.headers["x-ratelimit-remaining-requests"] == "1"
        assert r.headers["x-ratelimit-reset-requests"].endswith("ms")


# --- lifecycle, concurrency, throughput ---------------------------------------------------------


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_binds_loopback_and_stop_closes_port() -> None:
    server = MockServer()
    server.start()
    assert server.start() is server  # idempotent
    port = server.port
    assert server.host == "127.0.0.1" and server.url == f"http://127.0.0.1:{port}"
    assert _port_open(port)
    with httpx.Client() as c:
        assert c.get(server.url + "/health").text == "ok"  # keeps a keep-alive connection open
        server.stop()
        server.stop()  # idempotent
    assert not _port_open(port)
    assert not server.running
    # This server's threads end (the shared demo server may be running): joined, not slept on.
    mine = [t for t in threading.enumerate() if t.name.endswith(f"-{port}")]
    for t in mine:
        t.join(10)
    assert not [t for t in mine if t.is_alive()]
    with pytest.raises(RuntimeError):
        _ = server.url


def test_stop_interrupts_a_stalled_stream() -> None:
    server = MockServer(faults=["stall=600"]).start()
    errors: list[BaseException] = []
    stalled = threading.Event()

    def read() -> None:
        try:
            with (
                httpx.Client(timeout=10) as c,
                c.stream("POST", server.url + "/v1/messages", json=anthropic_body("hello")) as r,
            ):
                for _ in r.iter_raw():
                    stalled.set()  # text arrived; the stall comes next
        except httpx.HTTPError as err:
            errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    assert stalled.wait(30)
    server.stop()
    reader.join()
    # Cut by the stop, not by the client's own 10 s read timeout (a ReadTimeout).
    assert errors and isinstance(errors[0], httpx.RemoteProtocolError)


def test_64_concurrent_streams() -> None:
    # Each request waits in the server until all 64 are there: only a server that serves them
    # at the same time gets past it (a serial one would break the barrier after 30 s).
    barrier = threading.Barrier(64, timeout=30)
    answer = default_responder()

    def responder(conv: Any) -> Any:
        barrier.wait()
        return answer(conv)

    with (
        serve(demo_delay_s=0.02, responder=responder) as s,
        httpx.Client(base_url=s.url, timeout=60, limits=httpx.Limits(max_connections=100)) as c,
    ):

        def one(i: int) -> str:
            r = c.post("/v1/messages", json=anthropic_body(f"[demo:deltas=10] request {i}"))
            out = anthropic_assemble(r.content)
            assert out["events"][-1] == "message_stop"
            return str(out["text"])

        with ThreadPoolExecutor(max_workers=64) as pool:
            texts = list(pool.map(one, range(64)))
    assert not barrier.broken
    assert len(texts) == 64 and all(len(t.split()) == 10 for t in texts)


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_20000_deltas_stream_completely(client: httpx.Client, fmt: str) -> None:
    if fmt == "anthropic":
        r = client.post("/v1/messages", json=anthropic_body("[demo:deltas=20000]"))
        out = anthropic_assemble(r.content)
        deltas = sum(1 for n, d in sse_events(r.content) if n == "content_block_delta")
        assert out["events"][-1] == "message_stop"
    else:
        r = client.post("/v1/chat/completions", json=openai_body("[demo:deltas=20000]"))
        out = openai_assemble(r.content)
        deltas = sum(1 for _, d in sse_events(r.content) if '"content":' in d) - 1  # role chunk
        assert out["done"]
    assert deltas == 20000
    assert len(out["text"].split()) == 20000


def test_streamed_bytes_arrive_incrementally() -> None:
    # Ten minutes between deltas: the first bytes can only arrive if each is sent as it is made.
    payload = anthropic_body("[demo:deltas=10]")
    with (
        serve(demo_delay_s=600) as s,
        httpx.Client(base_url=s.url, timeout=10) as c,
        c.stream("POST", "/v1/messages", json=payload) as r,
    ):
        first = next(r.iter_raw())
    assert b"message_start" in first and b"message_stop" not in first


def test_shared_server_is_a_singleton() -> None:
    first = shared_server()
    assert shared_server() is first and first.running
    with httpx.Client() as c:
        assert c.get(first.url + "/health").status_code == 200


def test_cli_prints_url_and_serves_until_interrupted() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbagent.mock", "--port", "0", "--faults", "500", "ok"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url) as c:
            assert (
                c.post("/v1/messages", json=anthropic_body("hi", stream=False)).status_code == 500
            )
            assert (
                c.post("/v1/messages", json=anthropic_body("hi", stream=False)).status_code == 200
            )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_cli_rejects_bad_fault() -> None:
    from nbagent.mock import main

    assert main(["--faults", "teapot"]) == 2


def test_a_bug_in_the_mock_is_a_visible_500(
    server: MockServer,
    client: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(conversation: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(server, "responder", broken)
    r = client.post("/v1/messages", json=anthropic_body("hi"))
    assert r.status_code == 500
    assert r.json()["error"]["message"] == "nbagent mock server internal error: RuntimeError: boom"
    assert "boom" in caplog.text
