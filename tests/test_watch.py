"""nbagent.watch: the real SDKs against the mock server, watched and unwatched side by side.

Every test runs the same fault script through an unwatched client and a watched one and checks
that the SDK's own result (or exception) is the same, the random ids the mock gives each reply
aside; then that the attempt frame shows what the SDK did. Waits are the SDKs' own and real,
kept short (small Retry-After values, few retries); only lower bounds the SDK promises
(it waits at least the server's Retry-After) are asserted, never an upper bound.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import nbagent
from nbagent.events import AttemptFailed, Event, RunFinished, SDKRetryScheduled
from nbagent.mock import MockServer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

KEY = "sk-test-watch-0123456789abcdef"
ASK = [{"role": "user", "content": "What is 2 + 2?"}]
_IDS = re.compile(r"(msg_|chatcmpl-|resp_|req_011|req_)[0-9a-f]{20,}|\"created(_at)?\\?\":\s?\d+")


def same(value: Any) -> str:
    """The SDK's result as text, the mock's random per-reply ids replaced."""
    if hasattr(value, "model_dump_json"):
        value = value.model_dump_json()
    elif not isinstance(value, str):
        value = json.dumps(value, default=repr, sort_keys=True)
    return _IDS.sub("ID", value)


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def _twice(
    server: MockServer, faults: list[str], call: Callable[[Any], Any], make: Callable[[], Any]
) -> tuple[Any, Any, nbagent.Watcher]:
    """`call(client)` unwatched and then watched, each after the same faults."""

    def outcome(client: Any) -> Any:
        try:
            return ("ok", same(call(client)))
        except Exception as exc:  # the exception is the SDK's result here
            return ("raised", type(exc).__name__, _IDS.sub("ID", str(exc)))

    server.set_faults(faults)
    client = make()
    plain = outcome(client)
    _close(client)
    w = nbagent.watching(make(), show=False)
    server.set_faults(faults)
    watched = outcome(w.client)
    _close(w.client)
    return plain, watched, w


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        close()


def _anthropic(server: MockServer, retries: int = 3) -> Callable[[], Any]:
    return lambda: anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=retries)


def test_the_sdks_hidden_retries_become_three_attempts_with_their_real_waits(
    server: MockServer,
) -> None:
    def call(c: Any) -> Any:
        return c.messages.create(model="demo", max_tokens=100, messages=ASK)

    plain, watched, w = _twice(server, ["529", "429:retry_after=1", "ok"], call, _anthropic(server))
    assert plain[0] == "ok" and watched == plain
    df = w.attempts
    assert list(df["attempt"]) == [1, 2, 3]
    assert df["run_id"].nunique() == 1
    assert list(df["outcome"]) == ["error", "error", "ok"]
    assert list(df["error_kind"].fillna("")) == ["Overloaded", "RateLimited", ""]
    assert df["status_code"].tolist() == [529, 429, 200]  # the success has its status too
    assert list(df["action"]) == ["retry", "retry", "none"]
    assert list(df["nbagent_action"]) == ["retry", "retry", "none"]
    assert df["retry_after_s"].iloc[1] == 1.0
    assert df["delay_s"].iloc[1] >= 1.0  # the SDK honoured the server's Retry-After
    assert df["delay_s"].iloc[0] > 0  # its own backoff
    assert df["request_id"].notna().all()
    assert df["output_tokens"].iloc[2] > 0 and df["input_tokens"].iloc[2] > 0
    assert df["ttft_s"].notna().all()
    assert df["model"].eq("demo").all()


def test_the_status_line_says_the_sdk_is_waiting_for_the_server() -> None:
    from nbagent.notebook import TimelineState

    with MockServer(faults=["429:retry_after=1", "ok"]) as srv:
        w = nbagent.watching(_anthropic(srv)(), show=False)
        state = TimelineState()
        seen: list[str] = []

        def watch_status(event: Event) -> None:
            state(event)
            if isinstance(event, SDKRetryScheduled):
                seen.append(state.status)

        w.events.subscribe(watch_status)
        w.client.messages.create(model="demo", max_tokens=50, messages=ASK)
    assert seen == [
        "the Anthropic SDK is waiting about 1.0s (server's Retry-After) before attempt 2"
    ]
    snap = state.snapshot()
    assert [b["outcome"] for b in snap["bars"]] == ["error", "ok"]
    assert len(snap["waits"]) == 1


def test_an_sdk_that_gives_up_raises_unchanged_and_the_frame_says_why(server: MockServer) -> None:
    def call(c: Any) -> Any:
        return c.messages.create(model="demo", max_tokens=50, messages=ASK)

    plain, watched, w = _twice(server, ["529", "529", "529"], call, _anthropic(server, retries=1))
    assert plain[0] == "raised" and watched == plain
    df = w.attempts
    assert list(df["action"]) == ["retry", "fail"]
    assert list(df["nbagent_action"]) == ["retry", "retry"]  # nbagent has 4 attempts by default
    assert "gave up after 2 attempts" in df["message"].iloc[1]


def test_a_far_reset_is_retried_by_the_sdk_where_nbagent_would_fail_at_once(
    server: MockServer,
) -> None:
    # the SDK honours any positive Retry-After; nbagent's policy stops above max_retry_after
    def call(c: Any) -> Any:
        return c.messages.create(model="demo", max_tokens=50, messages=ASK)

    plain, watched, w = _twice(
        server, ["429:retry_after=3600"], call, _anthropic(server, retries=0)
    )
    assert watched == plain
    df = w.attempts
    assert df["retry_after_s"].iloc[0] == 3600
    assert df["nbagent_action"].iloc[0] == "fail"


def test_a_stream_that_breaks_off_reaches_the_caller_as_it_would_unwatched(
    server: MockServer,
) -> None:
    def call(c: Any) -> Any:
        with c.messages.stream(model="demo", max_tokens=200, messages=ASK) as s:
            return "".join(s.text_stream)

    plain, watched, w = _twice(server, ["drop_after_tokens=3"], call, _anthropic(server))
    assert watched == plain
    df = w.attempts
    assert len(df) == 1
    assert df["error_kind"].iloc[0] == "StreamInterrupted"
    assert df["action"].iloc[0] == "fail"  # the SDK had handed the stream over
    assert df["nbagent_action"].iloc[0] == "retry"
    assert df["ttft_s"].notna().iloc[0]


def test_a_whole_stream_streams_and_counts_tokens(server: MockServer) -> None:
    pieces: list[float] = []

    def call(c: Any) -> Any:
        with c.messages.stream(model="demo", max_tokens=200, messages=ASK) as s:
            for _ in s.text_stream:
                pieces.append(1)
            return s.get_final_message()

    plain, watched, w = _twice(server, ["503", "ok"], call, _anthropic(server))
    assert plain[0] == "ok" and watched == plain
    df = w.attempts
    assert list(df["outcome"]) == ["error", "ok"]
    assert df["output_tokens"].iloc[1] > 0
    assert len(pieces) > 1  # it streamed


def _openai(server: MockServer, retries: int = 2) -> Callable[[], Any]:
    return lambda: openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=retries)


def test_openai_chat_streams_with_a_retry_and_a_break(server: MockServer) -> None:
    def call(c: Any) -> Any:
        out = []
        for chunk in c.chat.completions.create(
            model="demo", messages=ASK, stream=True, stream_options={"include_usage": True}
        ):
            out.append(same(chunk))
        return out

    plain, watched, w = _twice(server, ["500", "ok"], call, _openai(server))
    assert plain[0] == "ok" and watched == plain
    df = w.attempts
    assert list(df["error_kind"].fillna("")) == ["ServerError", ""]
    assert list(df["action"]) == ["retry", "none"]
    assert df["output_tokens"].iloc[1] > 0

    plain, watched, w = _twice(server, ["drop_after_tokens=2"], call, _openai(server))
    assert plain[0] == "raised" or plain[0] == "ok"
    assert watched == plain
    assert w.attempts["error_kind"].iloc[0] == "StreamInterrupted"


def test_openai_responses_api_streaming(server: MockServer) -> None:
    def call(c: Any) -> Any:
        return [
            same(e) for e in c.responses.create(model="demo", input="What is 2 + 2?", stream=True)
        ]

    plain, watched, w = _twice(server, ["429:retry_after=0.2", "ok"], call, _openai(server))
    assert plain[0] == "ok" and watched == plain
    df = w.attempts
    assert list(df["outcome"]) == ["error", "ok"]
    assert df["delay_s"].iloc[0] >= 0.2
    assert df["output_tokens"].iloc[1] > 0

    plain, watched, w = _twice(server, ["drop_after_tokens=2"], call, _openai(server))
    assert watched == plain
    assert w.attempts["error_kind"].iloc[0] == "StreamInterrupted"


def test_async_clients_and_64_concurrent_calls_lose_no_attempt(server: MockServer) -> None:
    server.set_fault_rates({"500": 0.3}, seed=3)

    async def main(client: Any) -> list[str]:
        async def one(i: int) -> str:
            r = await client.messages.create(model="demo", max_tokens=30, messages=ASK)
            return str(r.content[0].text)

        async with base:  # closed on the loop it ran on: no socket left for a later test
            return await asyncio.gather(*(one(i) for i in range(64)))

    base = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=6)
    w = nbagent.watching(base, show=False)
    server.clear_requests()
    texts = asyncio.run(main(w.client))
    assert len(set(texts)) == 1
    df = w.attempts
    assert len(df) == len(server.requests)  # every attempt the server saw is a row
    assert df["run_id"].nunique() == 64
    assert (df.groupby("run_id")["outcome"].last() == "ok").all()
    for _, rows in df.groupby("run_id"):
        assert list(rows["attempt"]) == list(range(1, len(rows) + 1))
    assert (df["outcome"] == "error").any()  # the 30 % of 500s did happen


def test_64_threads_through_one_watched_sync_client(server: MockServer) -> None:
    server.set_fault_rates({"529": 0.3}, seed=5)
    w = nbagent.watching(_anthropic(server, retries=6)(), show=False)
    server.clear_requests()
    errors: list[BaseException] = []

    def one() -> None:
        try:
            w.client.messages.create(model="demo", max_tokens=30, messages=ASK)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    df = w.attempts
    assert len(df) == len(server.requests)
    assert df["run_id"].nunique() == 64
    for _, rows in df.groupby("run_id"):
        assert list(rows["attempt"]) == list(range(1, len(rows) + 1))


def test_cancelling_an_async_stream_is_a_cancelled_attempt(server: MockServer) -> None:
    server.set_faults(["stall=30"])
    w = nbagent.watching(
        anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=0), show=False
    )
    seen: list[Event] = []
    w.events.subscribe(seen.append)

    async def main() -> None:
        async def read() -> None:
            async with w.client.messages.stream(model="demo", max_tokens=50, messages=ASK) as s:
                async for _ in s.text_stream:
                    pass

        task = asyncio.create_task(read())
        while not any(isinstance(e, nbagent.events.AttemptStarted) for e in seen):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    df = w.attempts
    assert list(df["outcome"]) == ["cancelled"]
    finished = [e for e in seen if isinstance(e, RunFinished)]
    assert [e.end_reason for e in finished] == ["cancelled"]


@pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")
def test_google_genai_against_the_gemini_format(server: MockServer) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    def make() -> Any:
        return genai.Client(
            api_key=KEY,
            http_options=types.HttpOptions(
                base_url=server.url,
                retry_options=types.HttpRetryOptions(
                    attempts=3, initial_delay=0.05, max_delay=0.1, jitter=0.0
                ),
            ),
        )

    def call(c: Any) -> Any:
        return [
            same(ch.text or "")
            for ch in c.models.generate_content_stream(model="demo", contents="What is 2 + 2?")
        ]

    plain, watched, w = _twice(server, ["503", "ok"], call, make)
    assert plain[0] == "ok" and watched == plain
    df = w.attempts
    assert list(df["outcome"]) == ["error", "ok"]
    assert list(df["action"]) == ["retry", "none"]
    assert df["run_id"].nunique() == 1
    assert df["output_tokens"].iloc[1] > 0


def test_a_plain_httpx_client_is_watched_too(server: MockServer) -> None:
    def call(c: Any) -> Any:
        r = c.post(
            "/v1/messages",
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
            json={"model": "demo", "max_tokens": 30, "messages": ASK},
        )
        return same(r.text)

    plain, watched, w = _twice(server, ["500"], call, lambda: httpx.Client(base_url=server.url))
    assert watched == plain
    df = w.attempts
    assert list(df["error_kind"]) == ["ServerError"]
    assert list(df["action"]) == ["fail"]  # httpx does not retry
    assert df["nbagent_action"].iloc[0] == "retry"


def test_the_durable_log_and_the_analysis_take_the_watchers_attempts(
    server: MockServer, tmp_path: Any
) -> None:
    from nbagent.analysis import read_attempts, summary

    path = tmp_path / "runs.sqlite"
    server.set_faults(["429:retry_after=0.3", "ok"])
    client = nbagent.watch(_anthropic(server)(), log=path)
    client.messages.create(model="demo", max_tokens=30, messages=ASK)
    w = nbagent.watching(client)
    w.close()
    stored = read_attempts(path)
    assert list(stored["attempt"]) == [1, 2]
    assert list(stored["outcome"]) == ["error", "ok"]
    assert stored["delay_s"].iloc[0] == pytest.approx(w.attempts["delay_s"].iloc[0])
    assert stored["delay_s"].iloc[0] >= 0.3
    table = summary(w.attempts)
    assert len(table) >= 1


def test_anything_else_is_a_config_error() -> None:
    with pytest.raises(nbagent.ConfigError, match="cannot watch a dict"):
        nbagent.watch({})


def test_failed_events_carry_the_sdks_decision(server: MockServer) -> None:
    server.set_faults(["401"])
    w = nbagent.watching(_anthropic(server)(), show=False)
    seen: list[Event] = []
    w.events.subscribe(seen.append)
    with pytest.raises(anthropic.AuthenticationError):
        w.client.messages.create(model="demo", max_tokens=30, messages=ASK)
    failed = [e for e in seen if isinstance(e, AttemptFailed)]
    assert [(e.error, e.action) for e in failed] == [("AuthFailed", "fail")]
    assert w.attempts["nbagent_action"].iloc[0] == "fail"


# -- record= : the watcher's exchanges into a recording, replayed to the same SDK result ------


def test_a_watched_sdk_s_recording_replays_to_the_same_sdk_result(
    server: MockServer, tmp_path: Any
) -> None:
    from nbagent.recording import read_recording

    path = tmp_path / "sdk.nbrec"
    server.set_faults(["529", "ok"])
    client = nbagent.watch(
        anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=3), record=path
    )
    live = client.messages.create(model="demo", max_tokens=100, messages=ASK)
    with client.messages.stream(model="demo", max_tokens=100, messages=ASK) as stream:
        live_text = "".join(stream.text_stream)
    _close(client)
    recording = read_recording(path)
    assert [e.status for e in recording.exchanges] == [529, 200, 200]
    assert KEY not in path.read_text()

    with MockServer(replay=path) as replay:
        again = anthropic.Anthropic(api_key=KEY, base_url=replay.url, max_retries=3)
        replayed = again.messages.create(model="demo", max_tokens=100, messages=ASK)
        with again.messages.stream(model="demo", max_tokens=100, messages=ASK) as stream:
            replayed_text = "".join(stream.text_stream)
        _close(again)
    # byte for byte: the recording holds the very ids the live server gave
    assert replayed.model_dump_json() == live.model_dump_json()
    assert replayed_text == live_text


def test_record_on_an_already_watched_client_is_refused_in_one_sentence(
    server: MockServer, tmp_path: Any
) -> None:
    client = nbagent.watch(anthropic.Anthropic(api_key=KEY, base_url=server.url))
    with pytest.raises(nbagent.ConfigError, match="watched already"):
        nbagent.watching(client, record=tmp_path / "x.nbrec")
    assert not (tmp_path / "x.nbrec").exists()
    _close(client)
