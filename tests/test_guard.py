"""nbagent.guard: the real SDKs against the mock server, with nbagent's decision in the transport.

The guard waits on an injected `VirtualClock`, so a Retry-After of 30 s costs no real time;
the limiters are shared per clock, so each test's clock gives it fresh ones. Where the
unguarded SDK's result is the point (the same response objects, the same exception type on
giving up), the same fault script runs through both.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import nbagent
from nbagent import RetryBudget, RetryPolicy, VirtualClock
from nbagent.events import Event, PacedWait, RetryScheduled
from nbagent.mock import MockServer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

# the httpx the anthropic SDK is built on (httpx2 in its newer releases, httpx before)
hx: Any = importlib.import_module(anthropic.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
KEY = "sk-test-guard-0123456789abcdef"
ASK = [{"role": "user", "content": "What is 2 + 2?"}]
POLICY = RetryPolicy(seed=7)


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def _anthropic(server: MockServer, **kw: Any) -> Any:
    return anthropic.Anthropic(api_key=KEY, base_url=server.url, **kw)


def _create(client: Any) -> Any:
    return client.messages.create(model="demo", max_tokens=60, messages=ASK)


def test_the_guard_retries_with_nbagent_s_rules_and_the_sdk_gets_its_own_response(
    server: MockServer,
) -> None:
    clock = VirtualClock()
    server.set_faults(["529", "429:retry_after=30", "ok"])
    guarded = nbagent.guard(_anthropic(server, max_retries=5), retry=POLICY, clock=clock)
    reply = _create(guarded)
    assert isinstance(reply, anthropic.types.Message)
    assert reply.content[0].text
    assert len(server.requests) == 3  # the SDK's own retries are off: 3 requests, not more
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0"] * 3
    df = nbagent.watching(guarded).attempts
    assert list(df["attempt"]) == [1, 2, 3]
    assert list(df["status_code"]) == [529, 429, 200]  # a success has its status too
    assert list(df["action"]) == ["retry", "retry", "none"]
    assert list(df["nbagent_action"]) == ["retry", "retry", "none"]
    assert df["max_attempts"].eq(POLICY.max_attempts).all()
    assert df["delay_s"].iloc[1] == 30.0  # the server's wish, never jittered
    assert df["delay_s"].iloc[0] <= POLICY.initial_delay  # full jitter: 0 .. initial_delay
    assert 30.0 in clock.slept
    assert df["output_tokens"].iloc[2] > 0


def test_retry_after_ms_and_x_should_retry_are_read_as_the_agent_reads_them() -> None:
    clock = VirtualClock()
    answers = [
        httpx.Response(503, headers={"retry-after-ms": "1500"}, json={"error": {"message": "x"}}),
        httpx.Response(400, headers={"x-should-retry": "true"}, json={"error": {"message": "y"}}),
        httpx.Response(500, headers={"x-should-retry": "false"}, json={"error": {"message": "z"}}),
    ]
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answers[len(sent) - 1]

    client = openai.OpenAI(
        api_key=KEY,
        base_url="http://guard.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    guarded = nbagent.guard(client, retry=POLICY, limiter=False, clock=clock)
    with pytest.raises(openai.InternalServerError) as raised:
        guarded.chat.completions.create(model="demo", messages=ASK)
    assert raised.value.status_code == 500  # the SDK's own exception for the last answer
    assert len(sent) == 3
    df = nbagent.watching(guarded).attempts
    assert list(df["action"]) == ["retry", "retry", "fail"]
    assert df["delay_s"].iloc[0] == 1.5  # retry-after-ms
    assert df["error_kind"].iloc[1] == "BadRequest"  # a 400, retried: the server said so


def test_a_quota_past_max_retry_after_fails_at_once_with_the_sdk_s_exception(
    server: MockServer,
) -> None:
    clock = VirtualClock()
    server.set_faults(["429:retry_after=3600"])
    guarded = nbagent.guard(_anthropic(server), retry=POLICY, clock=clock)
    with pytest.raises(anthropic.RateLimitError):
        _create(guarded)
    assert len(server.requests) == 1
    assert sum(clock.slept) == 0  # no hour spent waiting
    df = nbagent.watching(guarded).attempts
    assert df["error_kind"].iloc[0] == "QuotaExceeded"
    assert df["action"].iloc[0] == "fail"
    assert "Resets in 1 h" in df["message"].iloc[0]

    # OpenAI's insufficient_quota (a 429 whose body says so): never retried either
    server.set_faults(["quota"])
    server.clear_requests()
    oai = nbagent.guard(
        openai.OpenAI(api_key=KEY, base_url=server.openai_base_url), retry=POLICY, clock=clock
    )
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model="demo", messages=ASK)
    assert len(server.requests) == 1


def test_giving_up_raises_what_the_unguarded_sdk_raises(server: MockServer) -> None:
    def outcome(client: Any) -> tuple[str, str]:
        try:
            client.chat.completions.create(model="demo", messages=ASK)
        except openai.APIError as exc:
            return type(exc).__name__, str(getattr(exc, "status_code", ""))
        return "ok", ""

    server.set_faults(["503", "503", "503"])
    plain = outcome(openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0))
    server.set_faults(["503", "503", "503"])
    server.clear_requests()
    guarded = nbagent.guard(
        openai.OpenAI(api_key=KEY, base_url=server.openai_base_url),
        retry=RetryPolicy(max_attempts=3, seed=1),
        clock=VirtualClock(),
    )
    assert outcome(guarded) == plain == ("InternalServerError", "503")
    assert len(server.requests) == 3
    df = nbagent.watching(guarded).attempts
    assert list(df["action"]) == ["retry", "retry", "fail"]

    # a connection the server drops, then an answer: retried inside the transport
    server.set_faults(["close", "ok"])
    reply = guarded.chat.completions.create(model="demo", messages=ASK)
    assert reply.choices[0].message.content
    # dropped every time: the SDK's own connection error, as without nbagent
    server.set_faults(["close", "close", "close"])
    with pytest.raises(openai.APIConnectionError):
        guarded.chat.completions.create(model="demo", messages=ASK)


class _BreakFirstStream(hx.SyncByteStream):  # type: ignore[misc]
    def __iter__(self) -> Iterator[bytes]:
        raise hx.ReadError("connection reset before the first byte")
        yield b""  # pragma: no cover


class _BreakFirst(hx.BaseTransport):  # type: ignore[misc]
    """The real transport to the mock, whose first answer breaks before its first byte."""

    def __init__(self) -> None:
        self.inner = hx.HTTPTransport()
        self.sent = 0

    def handle_request(self, request: Any) -> Any:
        self.sent += 1
        response = self.inner.handle_request(request)
        if self.sent == 1:
            response.stream.close()
            response.stream = _BreakFirstStream()
        return response


def test_a_stream_is_retried_only_before_its_first_byte_reaches_the_sdk(
    server: MockServer,
) -> None:
    clock = VirtualClock()

    def read(client: Any) -> str:
        with client.messages.stream(model="demo", max_tokens=200, messages=ASK) as s:
            return "".join(s.text_stream)

    transport = _BreakFirst()
    base = _anthropic(server, http_client=hx.Client(transport=transport))
    guarded = nbagent.guard(base, retry=POLICY, clock=clock)
    text = read(guarded)
    assert text and transport.sent == 2  # broken before the first byte: sent again
    assert list(nbagent.watching(guarded).attempts["action"]) == ["retry", "none"]

    # broken after the SDK had the first words: its break, as without nbagent; not sent again.
    # What the unguarded SDK raises for that break depends on its release (httpx's
    # RemoteProtocolError before, its own APIConnectionError since): the guarded one raises the same.
    server.set_faults(["drop_after_tokens=3"])
    with pytest.raises((hx.RemoteProtocolError, anthropic.APIConnectionError)) as bare:
        read(_anthropic(server, max_retries=2))
    server.set_faults(["drop_after_tokens=3"])
    server.clear_requests()
    with pytest.raises(type(bare.value)):
        read(guarded)
    assert len(server.requests) == 1
    df = nbagent.watching(guarded).attempts
    assert df["error_kind"].iloc[-1] == "StreamInterrupted"
    assert df["action"].iloc[-1] == "fail"
    assert "the reply had begun" in df["message"].iloc[-1]


def _file_answers(*statuses: int) -> tuple[Any, list[httpx.Request]]:
    sent: list[httpx.Request] = []
    file = {
        "id": "file-1",
        "object": "file",
        "bytes": 3,
        "created_at": 0,
        "filename": "a.jsonl",
        "purpose": "batch",
        "status": "processed",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        status = statuses[len(sent) - 1]
        headers = {"retry-after": "2"} if status == 429 else {}
        body = file if status == 200 else {"error": {"message": f"status {status}"}}
        return httpx.Response(status, headers=headers, json=body)

    client = openai.OpenAI(
        api_key=KEY,
        base_url="http://guard.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    return client, sent


def test_a_file_upload_is_retried_only_after_a_429() -> None:
    clock = VirtualClock()
    client, sent = _file_answers(500, 200)
    guarded = nbagent.guard(client, retry=POLICY, limiter=False, clock=clock)
    with pytest.raises(openai.InternalServerError):
        guarded.files.create(file=("a.jsonl", b"{}\n"), purpose="batch")
    assert len(sent) == 1  # a 500 may have stored the file: not sent twice
    df = nbagent.watching(guarded).attempts
    assert df["action"].iloc[0] == "fail"
    assert "only after a 429" in df["message"].iloc[0]

    client, sent = _file_answers(429, 200)
    guarded = nbagent.guard(client, retry=POLICY, limiter=False, clock=clock)
    uploaded = guarded.files.create(file=("a.jsonl", b"{}\n"), purpose="batch")
    assert uploaded.id == "file-1"
    assert len(sent) == 2  # a 429 proves the upload was not acted on
    assert sent[0].content == sent[1].content  # the same multipart body, sent again whole
    assert 2.0 in clock.slept

    # a watched (unguarded) upload's `nbagent_action` is what the guard does: no second send
    client, sent = _file_answers(500, 200)
    watched = nbagent.watch(client.with_options(max_retries=1))
    assert watched.files.create(file=("a.jsonl", b"{}\n"), purpose="batch").id == "file-1"
    assert len(sent) == 2  # the SDK sent it again
    assert list(nbagent.watching(watched).attempts["nbagent_action"]) == ["fail", "none"]


def test_guarded_clients_and_an_agent_pace_as_one_client(server: MockServer) -> None:
    clock = VirtualClock()
    server.set_faults(["429:retry_after=20", "ok", "ok"])
    guarded = nbagent.guard(
        anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url),
        retry=RetryPolicy(max_attempts=1),
        clock=clock,
    )
    agent = nbagent.Agent("anthropic:demo", base_url=server.url, api_key=KEY, clock=clock)
    seen: list[Event] = []
    agent.subscribe(seen.append)

    async def main() -> None:
        with pytest.raises(anthropic.RateLimitError):
            await guarded.messages.create(model="demo", max_tokens=30, messages=ASK)
        await agent.run("What is 2 + 2?", show=False)  # waits out the guarded client's 429
        again = [{"role": "user", "content": "And 3 + 3?"}]
        await guarded.messages.create(model="demo", max_tokens=30, messages=again)
        await agent.aclose()

    asyncio.run(main())
    paced = [e for e in seen if isinstance(e, PacedWait)]
    assert paced and paced[0].delay_s == pytest.approx(20.0, abs=0.01)
    assert [r.status for r in server.requests] == [429, 200, 200]  # no second 429
    limiter = agent.pacer_for(agent.providers[0])
    assert isinstance(limiter, nbagent.RateLimiter)
    assert limiter.rejected == 1 and limiter.admitted == 2  # both kinds of client counted


def test_a_retry_budget_of_its_own_stops_an_outage_from_becoming_a_storm(
    server: MockServer,
) -> None:
    budget = RetryBudget(capacity=5.0)
    server.set_faults(["503"] * 8)
    guarded = nbagent.guard(
        _anthropic(server), retry=POLICY, limiter=False, budget=budget, clock=VirtualClock()
    )
    with pytest.raises(anthropic.InternalServerError):
        _create(guarded)
    assert len(server.requests) == 2  # one retry was all the budget could pay for
    df = nbagent.watching(guarded).attempts
    assert "retry budget exhausted" in df["message"].iloc[-1]
    assert budget.refused == 1


def test_a_google_genai_client_is_guarded_with_its_own_retries_off(server: MockServer) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    client = genai.Client(
        api_key=KEY,
        http_options=types.HttpOptions(
            base_url=server.url, retry_options=types.HttpRetryOptions(attempts=5)
        ),
    )
    server.set_faults(["503", "ok"])
    guarded = nbagent.guard(client, retry=POLICY, clock=VirtualClock())
    reply = guarded.models.generate_content(model="demo", contents="What is 2 + 2?")
    assert reply.text
    assert len(server.requests) == 2
    df = nbagent.watching(guarded).attempts
    assert list(df["action"]) == ["retry", "none"]
    server.set_faults(["503"] * 5)
    server.clear_requests()
    with pytest.raises(genai.errors.ServerError):
        guarded.models.generate_content(model="demo", contents="What is 2 + 2?")
    assert len(server.requests) == POLICY.max_attempts


def test_an_httpx_client_many_concurrent_calls_and_everything_watched(
    server: MockServer, tmp_path: Any
) -> None:
    from nbagent.analysis import read_attempts
    from nbagent.recording import read_recording

    server.set_fault_rates({"500": 0.3}, seed=11)
    log, rec = tmp_path / "runs.sqlite", tmp_path / "calls.nbrec"
    guarded = nbagent.guard(
        httpx.AsyncClient(base_url=server.url),
        retry=RetryPolicy(max_attempts=8, seed=3),
        clock=VirtualClock(),
        log=log,
        record=rec,
    )
    w = nbagent.watching(guarded)
    retries: list[Event] = []
    w.events.subscribe(lambda e: retries.append(e) if isinstance(e, RetryScheduled) else None)

    async def one(i: int) -> int:
        r = await guarded.post(
            "/v1/messages",
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
            json={
                "model": "demo",
                "max_tokens": 20,
                "messages": [{"role": "user", "content": str(i)}],
            },
        )
        return r.status_code

    async def main() -> list[int]:
        try:
            return await asyncio.gather(*(one(i) for i in range(16)))
        finally:
            await guarded.aclose()

    assert asyncio.run(main()) == [200] * 16
    every = w.attempts
    df = every[every["action"] != "paced"]  # the shared limiter's holds are rows of their own
    assert len(df) == len(server.requests)  # every request the server saw is a row
    assert df["run_id"].nunique() == 16 and (df["action"] == "retry").any()
    assert len(retries) == int((df["action"] == "retry").sum())
    w.close()
    assert len(read_attempts(log)) == len(every)
    assert len(read_recording(rec).exchanges) == len(df)
    assert KEY not in rec.read_text()


def test_bad_arguments_are_one_sentence_each(server: MockServer) -> None:
    with pytest.raises(nbagent.ConfigError, match="cannot watch a dict"):
        nbagent.guard({})
    client = _anthropic(server)
    with pytest.raises(nbagent.ConfigError, match="retry= takes a RetryPolicy"):
        nbagent.guard(client, retry=3)  # type: ignore[arg-type]
    with pytest.raises(nbagent.ConfigError, match="limiter= takes"):
        nbagent.guard(client, limiter="yes")  # type: ignore[arg-type]
    with pytest.raises(nbagent.ConfigError, match="budget= takes"):
        nbagent.guard(client, budget=5)  # type: ignore[arg-type]
    assert json.dumps(repr(nbagent.watching(nbagent.guard(client)))).count(KEY) == 0
