"""Secrets: with a sentinel API key, nothing nbagent produces contains it.

The key reaches the providers the way a user's does (the environment variable of each provider),
and a hostile server reflects it everywhere it can: error messages, request ids, retry headers,
mid-stream error events, malformed events, HTML error pages. Then every output is searched for
it: events, the attempt DataFrame and its CSV, widget state, the HTML export, saved sessions,
DEBUG logs (httpx's and httpcore's included), exception messages, reprs and tracebacks, and
the CLI's output and files.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from provider_support import KEY_ENVS
from reliability_support import TABLE_ERRORS, no_leaks

from nbagent import Agent, RetryPolicy, VirtualClock
from nbagent.events import Event
from nbagent.notebook._export import export_html, render_static_html, render_text
from nbagent.notebook._state import TimelineState
from nbagent.providers._models import resolve_model

SENTINEL = "sk-ant-SENTINEL0a1b2c3d4e5f60718293a4b5c6d7e8f9"
FRAGMENT = "SENTINEL0a1b2c3d4e5f"  # a leak of part of the key counts too


def assert_clean(what: str, text: str) -> None:
    assert SENTINEL not in text and FRAGMENT not in text, f"the API key leaked into {what}"


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Every logger at DEBUG (httpx and httpcore too) into one buffer."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    loggers = [logging.getLogger(n) for n in ("httpx", "httpcore", "nbagent", "asyncio")]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    try:
        yield buf
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for lg, level in zip(loggers, old, strict=True):
            lg.setLevel(level)


def _key_of(request: httpx.Request) -> str:
    for name in ("x-api-key", "x-goog-api-key", "api-key"):
        if request.headers.get(name):
            return request.headers[name]
    return request.headers.get("authorization", "").removeprefix("Bearer ")


def _anthropic_ok(text: str) -> bytes:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"model": "claude-x", "usage": {"input_tokens": 5}},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


def _openai_ok(text: str) -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
    ]
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def _gemini_ok(text: str) -> bytes:
    chunk = {
        "candidates": [
            {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
    }
    return f"data: {json.dumps(chunk)}\r\n\r\n".encode()


def _responses_ok(text: str) -> bytes:
    item = {"type": "message", "content": [{"type": "output_text", "text": text}]}
    events = [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"usage": {"input_tokens": 5}}},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


OK_BODIES = {
    "anthropic": _anthropic_ok,
    "openai": _openai_ok,
    "gemini": _gemini_ok,
    "responses": _responses_ok,
}


def _midstream_error(fmt: str, key: str) -> dict[str, Any]:
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": "overloaded_error", "message": key}}
    if fmt == "gemini":
        return {"error": {"code": 503, "message": f"overloaded {key}", "status": key}}
    if fmt == "responses":
        return {"type": "error", "code": key, "message": f"overloaded {key}", "param": key}
    return {"error": {"message": f"overloaded {key}", "code": 529, "type": key}}


def _gemini_daily_quota(key: str) -> dict[str, Any]:
    violation = {"quotaId": f"PerDay-{key}", "quotaDimensions": {"model": key}, "quotaValue": key}
    return {
        "error": {
            "code": 429,
            "message": f"quota for {key}",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"},
            ],
        }
    }


class Reflector:
    """A server that puts the caller's key into everything it answers, one trick per request."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.n = 0
        self.seen_keys: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        key = _key_of(request)
        self.seen_keys.add(key)
        trick = self.n % 9
        self.n += 1
        sse = {"content-type": "text/event-stream", "request-id": f"req_{key}"}
        err = {
            "content-type": "application/json",
            "request-id": f"req_{key}",
            "x-request-id": f"req_{key}",
            "retry-after": "0",
            "x-should-retry": "true",
            "x-ratelimit-reset-requests": key,
            "anthropic-ratelimit-requests-reset": key,
        }
        if trick == 0:
            body = {
                "type": "error",
                "error": {"type": "authentication_error", "message": f"invalid x-api-key: {key}"},
            }
            return httpx.Response(401, headers=err, json=body)
        if trick == 1:
            body = {
                "error": {
                    "message": f"Rate limited for key {key}",
                    "type": "rate_limit_error",
                    "code": key,
                    "request_id": key,
                    "metadata": {"raw": key},
                }
            }
            return httpx.Response(429, headers=err, json=body)
        if trick == 2:
            page = f"<html><head><title>502 for {key}</title></head><body>{key}</body></html>"
            return httpx.Response(502, headers={"content-type": "text/html"}, text=page)
        if trick == 3:
            data = _midstream_error(self.fmt, key)
            text = f"event: error\ndata: {json.dumps(data)}\n\n"
            return httpx.Response(200, headers=sse, text=text)
        if trick == 4:
            return httpx.Response(200, headers=sse, text=f"data: {{not json {key}\n\n")
        if trick == 5:
            return httpx.Response(200, headers={"content-type": "text/plain"}, text=f"hi {key}")
        if trick == 6:
            body = {
                "error": {
                    "message": f"prompt is too long: 300000 tokens > 200000 maximum ({key})",
                    "type": "invalid_request_error",
                }
            }
            return httpx.Response(400, headers=err, json=body)
        if trick == 7:
            body = {"error": {"message": f"model {key} not found", "type": "not_found_error"}}
            if self.fmt == "gemini":  # a daily quota whose quota id and model echo the key
                return httpx.Response(429, headers=err, json=_gemini_daily_quota(key))
            return httpx.Response(404, headers=err, json=body)
        return httpx.Response(200, headers=sse, content=OK_BODIES[self.fmt]("a clean answer"))


def _all_exception_text(exc: BaseException) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts += [str(e), repr(e), repr(getattr(e, "__dict__", {}))]
        e = e.__cause__ or e.__context__
    parts.append("".join(traceback.format_exception(exc)))
    return "\n".join(parts)


@pytest.mark.parametrize(
    ("model", "env"),
    [
        ("anthropic:claude-x", "ANTHROPIC_API_KEY"),
        ("openai:gpt-x", "OPENAI_API_KEY"),
        ("openrouter:meta/llama-x", "OPENROUTER_API_KEY"),
        ("gemini:gemini-x", "GEMINI_API_KEY"),
        ("gemini:gemini-x", "GOOGLE_API_KEY"),
        ("openai-responses:o4-mini", "OPENAI_API_KEY"),
        ("azure:my-deployment", "AZURE_OPENAI_API_KEY"),
        ("azure-responses:my-deployment", "AZURE_OPENAI_API_KEY"),
    ],
)
def test_a_reflected_key_never_comes_out(
    model: str,
    env: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    debug_log: io.StringIO,
) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(env, SENTINEL)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")
    prefix = model.partition(":")[0]
    fmt = {
        "anthropic": "anthropic",
        "gemini": "gemini",
        "openai-responses": "responses",
        "azure-responses": "responses",
    }.get(prefix, "openai")
    reflector = Reflector(fmt)
    events: list[Event] = []
    state = TimelineState()
    errors: list[BaseException] = []

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(reflector)) as client:
            provider = resolve_model(model, client=client)
            assert_clean("the provider's repr", repr(provider) + str(provider))
            agent = Agent(
                provider,
                clock=VirtualClock(),
                retry=RetryPolicy(max_attempts=3, seed=3),
                subscribers=[events.append, state],
                limiter=False,
            )
            assert_clean("the agent's repr", repr(agent))
            for i in range(12):
                try:
                    await agent.run(f"question {i}", show=False)
                except TABLE_ERRORS as exc:
                    errors.append(exc)
            frame = agent.attempts
            assert_clean("the attempt DataFrame", frame.to_string() + repr(frame.to_dict()))
            csv = tmp_path / "attempts.csv"
            frame.to_csv(csv, index=False)
            assert_clean("the attempt CSV", csv.read_text())
            session = tmp_path / "session.json"
            agent.save(session)
            assert_clean("the saved session", session.read_text())
            await agent.aclose()

    with no_leaks():
        asyncio.run(main())

    assert reflector.seen_keys == {SENTINEL}  # the key did go out, to the server only
    assert errors, "the reflector should have made some runs fail"
    assert_clean("events", "\n".join(repr(e) for e in events))
    snapshot = state.snapshot()
    assert_clean("the widget state", json.dumps(snapshot, default=str))
    page = export_html(state, tmp_path / "report.html")
    assert_clean("the HTML export", page + (tmp_path / "report.html").read_text())
    assert_clean("the static HTML and text", render_static_html(snapshot) + render_text(snapshot))
    for exc in errors:
        assert_clean(f"a {type(exc).__name__}", _all_exception_text(exc))
    log = debug_log.getvalue()
    assert "httpcore" in log or "httpx" in log  # DEBUG logging was on while the agent ran
    assert_clean("the DEBUG log", log)


def test_the_widget_state_holds_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live widget (anywidget) syncs only what the events carry."""
    from nbagent.notebook._widget import TimelineWidget

    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    reflector = Reflector("anthropic")
    widget = TimelineWidget()

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(reflector)) as client:
            agent = Agent(
                resolve_model("anthropic:claude-x", client=client),
                clock=VirtualClock(),
                retry=RetryPolicy(max_attempts=2, seed=1),
                subscribers=[widget],
                limiter=False,
            )
            for i in range(9):
                with contextlib.suppress(TABLE_ERRORS):
                    await agent.run(f"q{i}", show=False)

    asyncio.run(main())
    widget.flush()
    assert_clean("the widget's synced state", json.dumps(widget.get_state(), default=str))
    assert_clean("the widget's HTML export", widget.export_html())
    widget.close()


def test_config_errors_and_reprs_never_echo_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent.errors import ConfigError

    # (a stray newline or space at either end is stripped; inside the key it is an error)
    bad_keys = [SENTINEL + " extra", SENTINEL[:10] + "\n" + SENTINEL[10:], SENTINEL + "\x00"]
    for key in bad_keys:
        with pytest.raises(ConfigError) as info:
            Agent("anthropic:claude-x", api_key=key)
        assert_clean("a ConfigError about a bad key", _all_exception_text(info.value))
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    agent = Agent("openai:gpt-x")
    assert_clean("repr(agent) and its providers", repr(agent) + repr(agent._providers))
    assert_clean("agent.models", repr(agent.models))


@pytest.fixture
def mock_server() -> Iterator[Any]:
    from nbagent.mock import serve

    with serve() as server:
        yield server


@pytest.mark.e2e
def test_cli_demo_with_a_real_provider_string_prints_and_writes_no_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    debug_log: io.StringIO,
    mock_server: Any,
) -> None:
    from nbagent._cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_server.url)
    # a 401 and a 500 first: the error lines the CLI prints must not hold the key either
    mock_server.set_faults(["401", "500", "ok"])
    out = tmp_path / "out"
    with no_leaks():
        code = main(["demo", "--out", str(out), "--model", "anthropic:claude-mock"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "AuthFailed" in captured.out  # the first step hit the 401
    assert_clean("the CLI's stdout", captured.out)
    assert_clean("the CLI's stderr", captured.err)
    files = sorted(p for p in out.iterdir() if p.suffix in (".csv", ".html", ".json"))
    assert {p.name for p in files} == {"attempts.csv", "report.html", "session.json"}
    for f in files:
        assert_clean(f"the CLI's {f.name}", f.read_text(encoding="utf-8"))
    assert_clean("the DEBUG log of the CLI run", debug_log.getvalue())
    # the key did reach the server (as a header), so the check above means something
    assert mock_server.requests


def test_cli_reports_a_missing_key_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nbagent._cli import main

    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    code = main(["demo", "--out", str(tmp_path / "o"), "--model", "anthropic:claude-x"])
    captured = capsys.readouterr()
    assert code == 2
    assert "ANTHROPIC_API_KEY" in captured.err and "Traceback" not in captured.err


def test_a_watched_sdk_client_keeps_the_key_out_of_everything_it_shows(tmp_path: Path) -> None:
    """nbagent.watch: the frame, the events, the widget state, the durable log and the reprs."""
    anthropic = pytest.importorskip("anthropic")
    httpx2 = pytest.importorskip("httpx2")
    import nbagent
    from nbagent.analysis import read_attempts
    from nbagent.notebook import TimelineState
    from nbagent.recording import read_recording

    calls = {"n": 0}

    def reflect(request: Any) -> Any:
        calls["n"] += 1
        key = request.headers.get("x-api-key", "")
        if calls["n"] == 1:  # an error body that repeats the key, retried by the SDK
            body = {"type": "error", "error": {"type": "overloaded_error", "message": key}}
            return httpx2.Response(529, json=body, headers={"request-id": f"req-{key}"})
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 0},
            },
        }
        events = f"event: message_start\ndata: {json.dumps(start)}\n\n" + (
            "event: error\ndata: "
            + json.dumps({"type": "error", "error": {"type": "api_error", "message": key}})
            + "\n\n"
        )
        return httpx2.Response(
            200, content=events.encode(), headers={"content-type": "text/event-stream"}
        )

    base = anthropic.Anthropic(
        api_key=SENTINEL,
        base_url="http://127.0.0.1:9",
        max_retries=1,
        http_client=httpx2.Client(transport=httpx2.MockTransport(reflect)),
    )
    path = tmp_path / "watch.sqlite"
    rec = tmp_path / "watch.nbrec"
    w = nbagent.watching(base, log=path, show=False, record=rec)
    state = TimelineState()
    seen: list[Any] = []
    w.events.subscribe(state)
    w.events.subscribe(seen.append)
    with no_leaks():
        try:
            with w.client.messages.stream(
                model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            ) as s:
                for _ in s.text_stream:
                    pass
        except anthropic.APIError:
            pass  # the SDK's own exception is the SDK's business, unchanged
        w.close()
        assert calls["n"] == 2  # the key did reach the server, twice
        assert_clean("the watcher's attempts", w.attempts.to_csv())
        assert_clean("the watcher's events", " ".join(repr(e) for e in seen))
        assert_clean("the widget state of a watched client", json.dumps(state.snapshot()))
        assert_clean("the watcher's durable log", read_attempts(path).to_csv())
        assert_clean("the watcher's durable log file", path.read_bytes().decode("latin-1"))
        assert_clean("the watcher's recording", rec.read_bytes().decode("latin-1"))
        assert_clean("the watcher's repr", repr(w) + repr(w._calls) + repr(w.observers))
    assert list(w.attempts["error_kind"]) == ["Overloaded", "StreamInterrupted"]
    assert len(read_recording(rec)) == 2  # both exchanges were recorded, keys masked


@pytest.mark.parametrize(
    ("model", "env"),
    [
        ("anthropic:claude-x", "ANTHROPIC_API_KEY"),
        ("openai:gpt-x", "OPENAI_API_KEY"),
        ("gemini:gemini-x", "GEMINI_API_KEY"),
        ("openai-responses:o4-mini", "OPENAI_API_KEY"),
        ("azure:my-deployment", "AZURE_OPENAI_API_KEY"),
    ],
)
def test_a_recording_never_holds_the_key_even_when_the_server_reflects_it(
    model: str, env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from nbagent.recording import Recorder, read_recording

    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(env, SENTINEL)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")
    prefix = model.partition(":")[0]
    fmt = {"anthropic": "anthropic", "gemini": "gemini", "openai-responses": "responses"}.get(
        prefix, "openai"
    )
    reflector = Reflector(fmt)
    path = tmp_path / "session.nbrec"

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(reflector)) as client:
            provider = resolve_model(model, client=client)
            agent = Agent(
                provider,
                clock=VirtualClock(),
                retry=RetryPolicy(max_attempts=3, seed=3),
                limiter=False,
                record=Recorder(path, record_bodies=True),
            )
            for i in range(12):
                with contextlib.suppress(*TABLE_ERRORS):
                    await agent.run(f"question {i}", show=False)
            await agent.aclose()
            agent.recorder.close()  # type: ignore[union-attr]

    with no_leaks():
        asyncio.run(main())
    assert reflector.seen_keys == {SENTINEL}
    assert len(read_recording(path)) >= 12  # every exchange is there, reflected key and all
    assert_clean("the recording", path.read_text())


def test_the_mock_servers_recording_drops_keys_in_headers_and_in_the_query(
    tmp_path: Path,
) -> None:
    from nbagent.mock import serve

    path = tmp_path / "mock.nbrec"
    with serve(record=path) as server, httpx.Client() as client:
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        client.post(f"{server.gemini_url('gemini-x')}&key={SENTINEL}", json=body)
        client.post(
            server.anthropic_url, headers={"x-api-key": SENTINEL, "cookie": SENTINEL}, json={}
        )
    text = path.read_text()
    assert text.count('"kind": "request"') == 2
    assert_clean("the mock server's recording", text)


def test_a_watched_request_masks_its_keys_but_not_its_cookie_in_what_it_records() -> None:
    from nbagent._watch._reading import request_secrets

    headers = {
        "authorization": f"Bearer {SENTINEL}",
        "openai-api-key": SENTINEL + "2",
        "cookie": "lang=1",  # masking "lang=1" would mangle every text that holds it
    }
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions", headers=headers)
    assert sorted(request_secrets(request)) == [SENTINEL, SENTINEL + "2"]
