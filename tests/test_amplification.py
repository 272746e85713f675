"""Retry amplification: an outer layer's retries over a watched SDK, counted and warned about.

The SDKs run against the mock server with their real retries; the waits are kept short by a
429 asking for 10 ms (the SDKs honour a positive Retry-After), except in the pydantic-ai test,
which is the issue's outage (529 / 503) through a real framework. Every count is held against
the mock's own request count.
"""

from __future__ import annotations

import asyncio
import re
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import tenacity

import nbagent
from nbagent import RetryAmplification, VirtualClock
from nbagent.mock import MockServer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

KEY = "sk-test-amplify-0123456789abcdef"
ASK = [{"role": "user", "content": "What is 2 + 2?"}]
FAST_429 = "429:retry_after=0.01"


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def _sdk(server: MockServer, retries: int) -> Any:
    return anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=retries)


def _outer(client: Any, tries: int, messages: list[dict[str, str]] = ASK) -> Any:
    """What a framework's retry layer does: call the SDK again when it raised."""
    for n in range(tries):
        try:
            return client.messages.create(model="demo", max_tokens=30, messages=messages)
        except anthropic.APIStatusError:
            if n == tries - 1:
                raise
    return None


def test_an_outer_layer_s_tries_are_one_intended_call_and_the_product_is_shown(
    server: MockServer,
) -> None:
    server.set_faults([FAST_429] * 6 + ["ok"])
    w = nbagent.watching(_sdk(server, retries=1), show=False)
    with pytest.warns(RetryAmplification) as caught:
        _outer(w.client, tries=4)
    assert len(server.requests) == 7
    df = w.attempts
    assert df["call"].nunique() == 1 and (df["call"] == df["run_id"].iloc[0]).all()
    assert list(df["layer_attempt"]) == [1, 1, 2, 2, 3, 3, 4]
    assert list(df["attempt"]) == [1, 2, 1, 2, 1, 2, 1]  # the SDK's own count, beside it
    amp = w.amplification
    assert len(amp) == 1
    row = amp.iloc[0]
    assert (row["logical_calls"], row["requests"], row["factor"]) == (4, 7, 7.0)
    assert (row["allowed"], row["outcome"]) == (2, "ok")
    # warned once, when the second try had made the call more than the SDK alone allows
    assert [str(c.message) for c in caught] == [
        "1 call has become 4 requests so far: the SDK's 2 in each of 2 tries by an outer layer "
        "(each further try adds up to 2; the watcher's amplification frame keeps counting). "
        "Let one layer retry: set max_retries=0 on the client, or the outer layer's retries "
        "to 0, or use nbagent.guard(client)."
    ]
    assert caught[0].filename == __file__  # pointed at the caller's code, not the library's


def test_the_same_request_again_is_a_new_call_after_a_success_or_long_after_a_failure(
    server: MockServer,
) -> None:
    clock = VirtualClock()
    w = nbagent.Watcher(_sdk(server, retries=0), clock=clock, show=False)
    server.set_faults(["ok", "ok"])
    _outer(w.client, tries=1)
    _outer(w.client, tries=1)  # asked again on purpose: not a retry
    server.set_faults([FAST_429, "ok"])
    with pytest.raises(anthropic.RateLimitError):
        _outer(w.client, tries=1)
    clock.advance(600)  # ten minutes later: a plain new call with the same body
    _outer(w.client, tries=1)
    df = w.attempts
    assert list(df["layer_attempt"]) == [1, 1, 1, 1]
    assert df["call"].nunique() == 4
    assert list(w.amplification["factor"]) == [1.0] * 4

    # without the ten minutes, the same pair is an outer retry
    server.set_faults([FAST_429, "ok"])
    with pytest.raises(anthropic.RateLimitError):
        _outer(w.client, tries=1)
    clock.advance(5)
    _outer(w.client, tries=1)
    assert list(w.attempts["layer_attempt"].iloc[-2:]) == [1, 2]
    assert w.amplification["factor"].iloc[0] == 2.0


def test_the_same_request_from_another_thread_continues_the_failed_call(
    server: MockServer,
) -> None:
    # an outer layer may run each try where it likes: the request, not the thread, says whose
    w = nbagent.watching(_sdk(server, retries=0), show=False)
    server.set_faults([FAST_429, "ok"])
    with pytest.raises(anthropic.RateLimitError):
        _outer(w.client, tries=1)
    other = threading.Thread(target=_outer, args=(w.client, 1))
    other.start()
    other.join()
    assert len(server.requests) == 2
    assert list(w.attempts["layer_attempt"]) == [1, 2]
    assert w.attempts["call"].nunique() == 1


def test_the_same_prompt_in_a_concurrent_map_is_never_an_outer_retry(server: MockServer) -> None:
    # A thread pool's workers ask the same prompt, nothing retries a failed item: while one
    # item's answer is still being read, the other worker's failures and its next items (the
    # same request, in the same thread, right after a failure) are separate calls.
    server.set_faults(["ok", FAST_429, FAST_429, FAST_429, FAST_429, "ok"])
    w = nbagent.watching(_sdk(server, retries=0), show=False)
    opened, release = threading.Event(), threading.Event()

    def ask(hold: threading.Event | None) -> str | None:
        try:
            with w.client.messages.with_streaming_response.create(
                model="demo", max_tokens=30, messages=ASK
            ) as reply:
                if hold is not None:  # a slow answer: read once the map is through
                    opened.set()
                    assert hold.wait(timeout=60)
                return str(reply.parse().content[0].text)
        except anthropic.RateLimitError:
            return None

    with warnings.catch_warnings(record=True) as caught, ThreadPoolExecutor(2) as pool:
        warnings.simplefilter("always")
        slow = pool.submit(ask, release)
        assert opened.wait(timeout=60)
        rest = list(pool.map(ask, [None] * 5))
        release.set()
        answers = [slow.result(), *rest]
    assert [a is None for a in answers] == [False, True, True, True, True, False]
    assert len(server.requests) == 6 == len(w.attempts)
    assert list(w.attempts["layer_attempt"]) == [1] * 6
    assert w.attempts["call"].nunique() == 6
    assert list(w.amplification["factor"]) == [1.0] * 6
    assert not [c for c in caught if issubclass(c.category, RetryAmplification)]


def test_tenacity_around_a_plain_sdk_call_is_one_intended_call(server: MockServer) -> None:
    server.set_faults([FAST_429] * 9)
    w = nbagent.watching(_sdk(server, retries=2), show=False)

    @tenacity.retry(
        stop=tenacity.stop_after_attempt(3),
        retry=tenacity.retry_if_exception_type(anthropic.APIStatusError),
        reraise=True,
    )
    def ask() -> Any:
        return w.client.messages.create(model="demo", max_tokens=30, messages=ASK)

    with pytest.warns(RetryAmplification) as caught, pytest.raises(anthropic.RateLimitError):
        ask()
    assert len(server.requests) == 9 == len(w.attempts)
    assert w.attempts["call"].nunique() == 1
    assert list(w.attempts["layer_attempt"]) == [1] * 3 + [2] * 3 + [3] * 3
    _one_warning_consistent_with_the_frame(caught, w.amplification, requests=9, tries=3)


def test_an_outer_layer_s_task_per_try_is_one_intended_call(server: MockServer) -> None:
    server.set_faults([FAST_429] * 4 + ["ok"])
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=1)
    w = nbagent.watching(client, show=False)

    async def outer(tries: int) -> Any:
        for n in range(tries):  # each try in a task of its own: no context carries over
            try:
                return await asyncio.create_task(
                    w.client.messages.create(model="demo", max_tokens=30, messages=ASK)
                )
            except anthropic.APIStatusError:
                if n == tries - 1:
                    raise
        return None

    async def closing(tries: int) -> Any:
        async with client:  # closed on the loop it ran on: no socket left for a later test
            return await outer(tries)

    with pytest.warns(RetryAmplification) as caught:
        reply = asyncio.run(closing(3))
    assert reply.content[0].text
    assert len(server.requests) == 5 == len(w.attempts)
    assert w.attempts["call"].nunique() == 1
    assert list(w.attempts["layer_attempt"]) == [1, 1, 2, 2, 3]
    _one_warning_consistent_with_the_frame(caught, w.amplification, requests=5, tries=3)


def _one_warning_consistent_with_the_frame(
    caught: Any, amp: Any, *, requests: int, tries: int
) -> None:
    """One warning, and its words agree with the frame: the SDK's share per try is the frame's
    `allowed`, the outer layer's tries so far are no more than its `logical_calls`, and so far
    is their product, no more than the frame's `requests`."""
    assert len(amp) == 1
    row = amp.iloc[0]
    assert (row["logical_calls"], row["requests"], row["factor"]) == (tries, requests, requests)
    texts = [str(c.message) for c in caught if issubclass(c.category, RetryAmplification)]
    assert len(texts) == 1
    found = re.match(
        r"1 call has become (\d+) requests so far: the SDK's (\d+) in each of (\d+) "
        r"tries by an outer layer \(each further try adds up to (\d+);",
        texts[0],
    )
    assert found is not None, texts[0]
    so_far, sdk, outer, further = (int(g) for g in found.groups())
    assert sdk == further == row["allowed"]
    assert so_far == sdk * outer <= row["requests"]
    assert outer < row["logical_calls"]  # warned when the crossing try ended, not at the last


def test_the_warning_comes_once_per_client(server: MockServer) -> None:
    w = nbagent.watching(_sdk(server, retries=1), show=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for prompt in ("one", "two"):
            server.set_faults([FAST_429] * 4 + ["ok"])
            _outer(w.client, tries=3, messages=[{"role": "user", "content": prompt}])
        server.set_faults([FAST_429] * 4 + ["ok"])
        again = nbagent.watching(_sdk(server, retries=1), show=False)
        _outer(again.client, tries=3)
    amplified = [c for c in caught if issubclass(c.category, RetryAmplification)]
    assert len(amplified) == 2  # the first client once, the second client once
    assert list(w.amplification["requests"]) == [5, 5]


def test_a_warning_filter_that_raises_never_breaks_the_client_s_call(server: MockServer) -> None:
    w = nbagent.watching(_sdk(server, retries=1), show=False)
    server.set_faults([FAST_429] * 4 + ["ok"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reply = _outer(w.client, tries=3)
    assert reply.content[0].text  # the SDK's answer, untouched
    assert w.amplification["requests"].iloc[0] == 5


def test_the_widget_draws_the_tries_and_its_summary_says_the_factor(server: MockServer) -> None:
    from nbagent.notebook import TimelineState

    w = nbagent.watching(_sdk(server, retries=1), show=False)
    state = TimelineState()
    w.events.subscribe(state)
    server.set_faults([FAST_429] * 4 + ["ok"])
    with pytest.warns(RetryAmplification):
        _outer(w.client, tries=3)
    snap = state.snapshot()
    first = snap["runs"][0]["run_id"]
    assert [(r["call"], r["layer_attempt"]) for r in snap["runs"]] == [
        (first, 1),
        (first, 2),
        (first, 3),
    ]
    assert snap["summary"]["layer_attempt"] == 3
    assert snap["summary"]["call_requests"] == 5 == len(server.requests)
    assert snap["session"]["most_requests_per_call"] == 5  # the headline over every run
