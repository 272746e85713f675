"""Fault grammar, the fault plan, every fault kind on the wire, and the rate limiter."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from mock_support import sse_events

from nbagent.mock import Fault, MockServer, RateLimit, parse_faults, serve
from nbagent.mock._faults import FaultPlan, parse_fault
from nbagent.mock._ratelimit import format_duration, format_seconds

ANTHROPIC = "/v1/messages"
OPENAI = "/v1/chat/completions"


def body(path: str, prompt: str = "Tell me something.", stream: bool = True) -> dict[str, Any]:
    if path == ANTHROPIC:
        return {
            "model": "demo-model",
            "max_tokens": 512,
            "messages": [{"role": "user", "content": prompt}],
            "stream": stream,
        }
    return {
        "model": "demo-model",
        "messages": [{"role": "user", "content": prompt}],
        "stream": stream,
        "stream_options": {"include_usage": True},
    }


def read_until_break(
    client: httpx.Client, path: str, payload: dict[str, Any]
) -> tuple[int, bytes, bool]:
    """Stream a response; return (status, bytes received, whether the connection broke)."""
    received = b""
    with client.stream("POST", path, json=payload) as r:
        try:
            for chunk in r.iter_raw():
                received += chunk
        except httpx.RemoteProtocolError:
            return r.status_code, received, True
    return r.status_code, received, False


@pytest.fixture
def server() -> Iterator[MockServer]:
    with serve() as s:
        yield s


@pytest.fixture
def client(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


# --- grammar ------------------------------------------------------------------------------------


def test_parse_faults_grammar() -> None:
    faults = parse_faults(
        [
            "ok",
            "429:retry_after=2",
            "500",
            "drop_after_tokens=20",
            "stall=0.5:should_retry=false",
            "slow=0.1",
            "quota",
            "OVERFLOW",
            "503:should_retry=true",
            "close",
            "cut_after_done",
            "no_finish_reason:should_retry=false",
        ]
    )
    assert faults[0] == Fault("ok")
    assert faults[1] == Fault("429", retry_after_s=2.0)
    assert faults[3].tokens == 20 and faults[3].kind == "drop_after_tokens"
    assert faults[4] == Fault("stall", seconds=0.5, should_retry=False)
    assert faults[7].kind == "overflow" and faults[7].status == 400
    assert faults[8].should_retry is True and faults[8].status == 503
    assert faults[10] == Fault("cut_after_done") and faults[10].status is None
    assert str(faults[11]) == "no_finish_reason:should_retry=false"
    assert parse_fault("429").retry_after_s == 1.0  # the default
    assert [str(f) for f in faults[:5]] == [
        "ok",
        "429:retry_after=2",
        "500",
        "drop_after_tokens=20",
        "stall=0.5:should_retry=false",
    ]
    assert parse_faults([Fault("500")]) == [Fault("500")]


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("teapot", "unknown kind 'teapot'"),
        ("418", "unknown kind '418'"),
        ("drop_after_tokens", "needs a value"),
        ("drop_after_tokens=x", "whole number"),
        ("drop_after_tokens=-1", "must not be negative"),
        ("stall=soon", "number of seconds"),
        ("slow=-1", "between 0 and"),
        ("500=3", "takes no '=value'"),
        ("500:retry_after=2", "unknown parameter 'retry_after'"),
        ("429:retry_after", "not key=value"),
        ("429:should_retry=maybe", "true or false"),
    ],
)
def test_parse_faults_rejects_bad_entries(entry: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="Fault") as info:
        parse_faults(["ok", entry])
    message = str(info.value)
    assert repr(entry) in message and fragment in message
    assert message.count(". ") == 0 and message.endswith(".")  # one sentence


def test_parse_faults_rejects_a_bare_string() -> None:
    with pytest.raises(ValueError, match="list"):
        parse_faults("500")


def test_plan_script_then_ok() -> None:
    plan = FaultPlan(["500", "429"])
    assert [plan.next().kind for _ in range(4)] == ["500", "429", "ok", "ok"]
    plan.set_script(["close"])
    assert plan.remaining == 1 and plan.next().kind == "close"


def test_plan_random_rates_are_seeded() -> None:
    rates = {"500": 0.2, "429": 0.2, "stall=0.1": 0.1}
    first = [str(FaultPlan(seed=7, fault_rates=rates).next()) for _ in range(1)]
    a, b = FaultPlan(seed=7, fault_rates=rates), FaultPlan(seed=7, fault_rates=rates)
    seq_a = [str(a.next()) for _ in range(200)]
    assert seq_a == [str(b.next()) for _ in range(200)]
    assert first[0] == seq_a[0]
    counts = {k: seq_a.count(k) for k in ("500", "429:retry_after=1", "stall=0.1", "ok")}
    assert 15 < counts["500"] < 65 and 15 < counts["429:retry_after=1"] < 65
    assert counts["ok"] > 60 and sum(counts.values()) == 200
    with pytest.raises(ValueError, match="at most 1"):
        FaultPlan(fault_rates={"500": 0.7, "429": 0.6})
    with pytest.raises(ValueError, match="probability"):
        FaultPlan(fault_rates={"500": 1.5})


# --- status faults on the wire ------------------------------------------------------------------

STATUS_CASES = [
    ("500", 500, "api_error", "server_error"),
    ("502", 502, "api_error", "server_error"),
    ("503", 503, "api_error", "server_error"),
    ("504", 504, "timeout_error", "server_error"),
    ("529", 529, "overloaded_error", "server_error"),
    ("401", 401, "authentication_error", "invalid_request_error"),
    ("404", 404, "not_found_error", "invalid_request_error"),
    ("400", 400, "invalid_request_error", "invalid_request_error"),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("fault", "status", "a_type", "o_type"), STATUS_CASES)
def test_status_faults_in_both_formats(
    server: MockServer, client: httpx.Client, fault: str, status: int, a_type: str, o_type: str
) -> None:
    server.set_faults([fault, fault])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC))
    assert r.status_code == status
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == a_type
    assert error["request_id"] == r.headers["request-id"]
    r = client.post(OPENAI, json=body(OPENAI))
    assert r.status_code == status
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.json()["error"]["type"] == o_type
    if fault == "404":
        assert (
            r.json()["error"]["code"] == "model_not_found"
            and "demo-model" in r.json()["error"]["message"]
        )
    if fault == "401":
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert [rec.fault for rec in server.requests] == [fault, fault]
    assert [rec.status for rec in server.requests] == [status, status]
    assert client.post(ANTHROPIC, json=body(ANTHROPIC)).status_code == 200  # script over


@pytest.mark.e2e
def test_429_headers_in_each_style(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["429:retry_after=2", "429:retry_after=0.25"])
    before = time.time()
    r = client.post(ANTHROPIC, json=body(ANTHROPIC))
    after = time.time()
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error"
    assert r.headers["retry-after"] == "2" and r.headers["retry-after-ms"] == "2000"
    assert r.headers["anthropic-ratelimit-requests-remaining"] == "0"
    reset = datetime.strptime(r.headers["anthropic-ratelimit-requests-reset"], "%Y-%m-%dT%H:%M:%SZ")
    # The reset is the server's clock when it answered plus 2 s, rounded up to the second:
    # between two readings taken around the request, however long the request took.
    at = reset.replace(tzinfo=timezone.utc).timestamp()
    assert before + 2 <= at <= math.ceil(after + 2)
    r = client.post(OPENAI, json=body(OPENAI))
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded"
    assert r.headers["retry-after"] == "0.25" and r.headers["retry-after-ms"] == "250"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-ratelimit-reset-requests"] == "250ms"


@pytest.mark.e2e
def test_quota_in_each_format(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["quota", "quota"])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC))
    assert r.status_code == 429 and "retry-after" not in r.headers
    assert r.json()["error"]["details"]["error_code"] == "enforced_spend_limit_reached"
    r = client.post(OPENAI, json=body(OPENAI))
    assert r.status_code == 429 and "retry-after" not in r.headers
    assert r.json()["error"]["code"] == "insufficient_quota"


@pytest.mark.e2e
def test_overflow_in_each_format(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["overflow", "overflow"])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC))
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    said, note = message.split(" (")
    tokens, maximum = said.removeprefix("prompt is too long: ").split(" tokens > ")
    assert maximum == "200000 maximum" and int(tokens) > 200000
    # the prompt is a few tokens: the error says its numbers are made up
    assert note == "simulated: an injected fault, not the prompt's size)"
    r = client.post(OPENAI, json=body(OPENAI))
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 128000 tokens.")
    assert error["message"].endswith(" (simulated: an injected fault, not the prompt's size)")


@pytest.mark.e2e
def test_should_retry_header(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["500:should_retry=false", "ok:should_retry=true"])
    assert client.post(ANTHROPIC, json=body(ANTHROPIC)).headers["x-should-retry"] == "false"
    r = client.post(ANTHROPIC, json=body(ANTHROPIC))
    assert r.status_code == 200 and r.headers["x-should-retry"] == "true"
    assert "x-should-retry" not in client.post(ANTHROPIC, json=body(ANTHROPIC)).headers


# --- connection and stream faults ---------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
def test_close_before_any_bytes(server: MockServer, client: httpx.Client, path: str) -> None:
    server.set_faults(["close"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(path, json=body(path))
    assert server.requests[-1].fault == "close"
    assert client.post(path, json=body(path)).status_code == 200


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
def test_drop_after_tokens(server: MockServer, client: httpx.Client, path: str) -> None:
    server.set_faults(["drop_after_tokens=5"])
    status, raw, broke = read_until_break(client, path, body(path, "[demo:deltas=50]"))
    assert status == 200 and broke
    events = sse_events(raw)
    if path == ANTHROPIC:
        assert sum(1 for _, d in events if '"text_delta"' in d) == 5
        assert "message_stop" not in {n for n, _ in events}
    else:
        assert sum(1 for _, d in events if '"content":"' in d and '"role"' not in d) == 5
        assert (None, "[DONE]") not in events
    assert server.requests[-1].fault == "drop_after_tokens=5"


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize(
    ("fault", "deltas", "usage"),
    [
        ("cut_after_done", 3, False),  # a few deltas, the end marker (llama-cpp-python's cut)
        ("no_finish_reason", 7, True),  # the whole answer, usage, the end marker (Cortex)
    ],
)
def test_the_end_marker_without_a_finish_reason(
    server: MockServer, client: httpx.Client, path: str, fault: str, deltas: int, usage: bool
) -> None:
    server.set_faults([fault])
    status, raw, broke = read_until_break(client, path, body(path, "[demo:deltas=7]"))
    assert status == 200 and not broke  # the body ends cleanly either way
    events = sse_events(raw)
    if path == ANTHROPIC:
        assert sum(1 for _, d in events if '"text_delta"' in d) == deltas
        assert events[-1][0] == "message_stop"
        deltas_sent = [json.loads(d) for n, d in events if n == "message_delta"]
        assert all(d["delta"]["stop_reason"] is None for d in deltas_sent)  # no reason anywhere
        assert bool(deltas_sent) is usage and all(
            "output_tokens" in d["usage"] for d in deltas_sent
        )
    else:
        assert sum(1 for _, d in events if '"content":"' in d and '"role"' not in d) == deltas
        assert events[-1] == (None, "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks if c["choices"])
        assert any(isinstance(c.get("usage"), dict) for c in chunks) is usage
    assert server.requests[-1].fault == fault


@pytest.mark.e2e
def test_drop_after_more_tokens_than_the_reply_has(
    server: MockServer, client: httpx.Client
) -> None:
    server.set_faults(["drop_after_tokens=1000"])
    _, raw, broke = read_until_break(client, ANTHROPIC, body(ANTHROPIC, "[demo:deltas=7]"))
    assert broke and b"text_delta" in raw and b"message_delta" not in raw


@pytest.mark.e2e
def test_non_streaming_drop_is_an_incomplete_body(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["drop_after_tokens=3"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(ANTHROPIC, json=body(ANTHROPIC, stream=False))


@pytest.mark.e2e
def test_overloaded_midstream_anthropic(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["overloaded_midstream"])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC, "[demo:deltas=20]"))
    events = sse_events(r.content)
    assert r.status_code == 200
    assert events[-1][0] == "error"
    assert json.loads(events[-1][1])["error"]["type"] == "overloaded_error"
    assert sum(1 for _, d in events if '"text_delta"' in d) == 3
    assert "message_stop" not in {n for n, _ in events}


@pytest.mark.e2e
def test_overloaded_midstream_openai(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["overloaded_midstream"])
    r = client.post(OPENAI, json=body(OPENAI, "[demo:deltas=20]"))
    events = sse_events(r.content)
    last = json.loads(events[-1][1])
    assert set(last) == {"error"} and last["error"]["type"] == "server_error"
    assert (None, "[DONE]") not in events


@pytest.mark.e2e
def test_overloaded_midstream_without_stream_is_529(
    server: MockServer, client: httpx.Client
) -> None:
    server.set_faults(["overloaded_midstream"])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC, stream=False))
    assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
def test_malformed_data_line(server: MockServer, client: httpx.Client, path: str) -> None:
    server.set_faults(["malformed"])
    r = client.post(path, json=body(path, "[demo:deltas=20]"))
    events = sse_events(r.content)
    assert r.status_code == 200
    _, data = events[-1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(data)
    for _, good in events[:-1]:
        json.loads(good)
    assert len(events) > 3


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
def test_stall_pauses_then_completes(server: MockServer, client: httpx.Client, path: str) -> None:
    text = b'"text_delta"' if path == ANTHROPIC else b'"delta":{"content":"'
    end = b'{"type":"message_stop"}' if path == ANTHROPIC else b"data: [DONE]"
    # A stall far longer than the client's read timeout: the stream stops after some text.
    server.set_faults(["stall=600"])
    received = b""
    with (
        pytest.raises(httpx.ReadTimeout),
        client.stream("POST", path, json=body(path, "[demo:deltas=10]"), timeout=0.5) as r,
    ):
        for chunk in r.iter_raw():
            received += chunk
    assert received.count(text) == 3 and end not in received  # paused after some text
    # A short stall: the same stream pauses, then completes.
    server.set_faults(["stall=0.3"])
    with client.stream("POST", path, json=body(path, "[demo:deltas=10]")) as r:
        received = r.read()
    assert received.rstrip().endswith(end)
    assert received.count(text) == 10


@pytest.mark.e2e
def test_slow_delays_headers(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["slow=0.3"])
    r = client.post(ANTHROPIC, json=body(ANTHROPIC, stream=False))
    assert r.status_code == 200
    # Far slower than the client waits: no headers arrive at all.
    server.set_faults(["slow=600"])
    with pytest.raises(httpx.ReadTimeout):
        client.post(ANTHROPIC, json=body(ANTHROPIC), timeout=0.2)

    assert format_duration(1.5) == "1.5s"
    assert format_duration(360.0) == "6m0s"
    assert format_duration(3723.0) == "1h2m3s"
    assert format_seconds(0.1) == "0.1" and format_seconds(2.0) == "2"
    assert format_seconds(0.0001) == "0.001"


class ManualClock:
    """The limiter's clock, moved by the test: the rate is checked, not the machine's speed."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.mark.e2e
@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI])
def test_rate_limit_is_honest_over_http(path: str) -> None:
    clock = ManualClock()
    with (
        serve(rate_limit=RateLimit(requests_per_s=20, burst=1, now=clock)) as s,
        httpx.Client(base_url=s.url) as c,
    ):
        assert c.post(path, json=body(path, stream=False)).status_code == 200
        clock.advance(0.02)
        refused = c.post(path, json=body(path, stream=False))
        assert refused.status_code == 429
        assert refused.headers["retry-after-ms"] == "30"  # 50 ms per request, 20 ms gone
        assert refused.headers["retry-after"] == "0.03"
        if path == ANTHROPIC:
            assert refused.json()["error"]["type"] == "rate_limit_error"
            assert refused.headers["anthropic-ratelimit-requests-remaining"] == "0"
            assert refused.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
        else:
            assert refused.json()["error"]["code"] == "rate_limit_exceeded"
            assert refused.headers["x-ratelimit-remaining-requests"] == "0"
            assert refused.headers["x-ratelimit-reset-requests"] == "30ms"
        assert s.requests[-1].fault == "rate_limit"
        clock.advance(0.029)
        assert c.post(path, json=body(path, stream=False)).status_code == 429  # 1 ms early
        clock.advance(0.001)
        assert c.post(path, json=body(path, stream=False)).status_code == 200


@pytest.mark.e2e
def test_rate_limited_requests_do_not_consume_faults() -> None:
    clock = ManualClock()
    limit = RateLimit(requests_per_s=50, burst=1, now=clock)
    with serve(faults=["500"], rate_limit=limit) as s, httpx.Client(base_url=s.url) as c:
        assert c.post(ANTHROPIC, json=body(ANTHROPIC, stream=False)).status_code == 500
        assert c.post(ANTHROPIC, json=body(ANTHROPIC, stream=False)).status_code == 429
        clock.advance(0.02)  # one request's worth of refill
        assert c.post(ANTHROPIC, json=body(ANTHROPIC, stream=False)).status_code == 200
        assert [r.fault for r in s.requests] == ["500", "rate_limit", "ok"]
