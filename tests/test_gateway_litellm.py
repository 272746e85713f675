"""Behind a gateway: a real LiteLLM proxy on 127.0.0.1 in front of the mock server, every fault.

The proxy (`litellm[proxy]`, in `.venv-litellm`, installed by `scripts/setup.sh --dev`) speaks
OpenAI Chat Completions to nbagent and Anthropic Messages or OpenAI Chat to the mock, with its own
retries, fallbacks and cooldowns off, so each nbagent attempt is exactly one upstream request. The
gateway flattens the upstream's error into its message text and answers with a status of its own
(a 500 for the upstream's 402 or 403): nbagent must still give each fault its action.

What the gateway hides cannot be recovered, and the tests say so: LiteLLM sends no Retry-After
of the upstream on its errors (the wait survives only as text, "Please retry after 2s", which
nbagent reads), and it ends a broken Anthropic stream as if the answer were complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from provider_support import idle_timeout_on_first_answer

from nbagent import Agent, RetryPolicy
from nbagent import errors as E
from nbagent.events import Event, RetryScheduled
from nbagent.mock import MockServer
from nbagent.providers import OpenAIProvider

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a real proxy process, seconds to start

ROOT = Path(__file__).resolve().parents[1]
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1, max_retry_after=5)
UPSTREAMS = ["claude-mock", "gpt-mock"]  # Anthropic Messages and OpenAI Chat behind the proxy
STARTUP_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(mock: MockServer) -> str:
    return f"""
model_list:
  - model_name: claude-mock
    litellm_params:
      model: anthropic/claude-mock
      api_base: {mock.url}
      api_key: upstream-key
      max_retries: 0
  - model_name: gpt-mock
    litellm_params:
      model: openai/gpt-mock
      api_base: {mock.openai_base_url}
      api_key: upstream-key
      max_retries: 0
litellm_settings:
  num_retries: 0
  request_timeout: 30
router_settings:
  num_retries: 0
  disable_cooldowns: true
"""


@pytest.fixture(scope="module")
def mock() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(mock: MockServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A LiteLLM proxy on a free 127.0.0.1 port; stopped (its whole process group) at the end."""
    assert LITELLM.exists(), (
        f"{LITELLM} is missing: run `bash scripts/setup.sh --dev`, which installs the LiteLLM "
        "proxy into .venv-litellm"
    )
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.yaml"
    config.write_text(_config(mock))
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price map at start
        "LITELLM_TELEMETRY": "False",
        "NO_PROXY": "*",
    }
    log = (folder / "proxy.log").open("wb")
    process = subprocess.Popen(
        [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert process.poll() is None, (folder / "proxy.log").read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health/liveliness", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the LiteLLM proxy did not start in time"
            time.sleep(0.5)
        yield url + "/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        log.close()


def run(
    mock: MockServer,
    proxy: str,
    upstream: str,
    *faults: str,
    first_idle_s: float | None = None,
) -> dict[str, Any]:
    """One agent run through the proxy, the mock's requests meeting `faults` in turn;
    `first_idle_s`: the first answer's idle timeout (the later ones keep the default)."""
    mock.set_faults(list(faults))
    before = len(mock.requests)
    events: list[Event] = []
    provider = OpenAIProvider(upstream, api_key="sk-gateway", base_url=proxy)
    if first_idle_s is not None:
        provider = idle_timeout_on_first_answer(provider, first_idle_s)
    agent = Agent(provider, retry=FAST, limiter=False, subscribers=[events.append])
    out: dict[str, Any] = {"agent": agent, "events": events, "error": None, "result": None}

    async def main() -> None:
        try:
            out["result"] = await agent.run("Tell me about backoff.", show=False)
        except E.NbAgentError as exc:
            out["error"] = exc
        finally:
            await agent.aclose()

    asyncio.run(main())
    out["upstream"] = len(mock.requests) - before
    out["actions"] = agent.attempts["action"].tolist()
    out["retries"] = [e for e in events if isinstance(e, RetryScheduled)]
    return out


RETRIED = {
    "529": "Overloaded",  # Anthropic's 529 arrives as a 500 with overloaded_error inside
    "overloaded_midstream": "StreamInterrupted",
    "500": "ServerError",
    "502": "ServerError",
    "503": "ServerError",
    "504": "ServerError",
    "408": "ServerError",
    "409": "ServerError",
    "close": "ServerError",
    "empty": "EmptyResponse",
}
CASES = [(u, f, e) for u in UPSTREAMS for f, e in RETRIED.items()] + [
    # a broken OpenAI event: the gateway sends an error chunk, nbagent retries
    ("gpt-mock", "malformed", "StreamInterrupted"),
    # the gateway turns OpenAI's 413 "Request too large" into a 429
    ("gpt-mock", "413", "RateLimited"),
]


@pytest.mark.parametrize(("upstream", "fault", "error"), CASES)
def test_retryable_faults_through_the_gateway(
    mock: MockServer, proxy: str, upstream: str, fault: str, error: str
) -> None:
    out = run(mock, proxy, upstream, fault)
    assert out["error"] is None and out["result"].final_text
    assert out["actions"] == ["retry", "none"]
    assert out["upstream"] == 2  # the gateway retried nothing itself
    assert [m.role for m in out["agent"].history] == ["user", "assistant"]
    (retry,) = out["retries"]
    assert retry.error == error, retry.message


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_a_429s_wait_survives_only_as_text_and_is_honoured(
    mock: MockServer, proxy: str, upstream: str
) -> None:
    out = run(mock, proxy, upstream, "429:retry_after=0.25")
    (retry,) = out["retries"]
    assert retry.error == "RateLimited"
    assert retry.retry_after_s == pytest.approx(0.25) and retry.delay_s == pytest.approx(0.25)
    assert out["actions"] == ["retry", "none"]


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_an_idle_stream_through_the_gateway_is_retried(
    mock: MockServer, proxy: str, upstream: str
) -> None:
    # The first answer stalls for good (until the mock stops) and is the only one timed tightly:
    # it must time out, however slowly the proxy passes on its first chunks, and the retried
    # answer cannot, however slowly a busy proxy forwards it. (A stall of 1.5 s against a 0.5 s
    # timeout on every attempt once timed out the retry too, beside a CPU hog.)
    out = run(mock, proxy, upstream, "stall=3600", first_idle_s=0.5)
    (retry,) = out["retries"]
    assert retry.error == "TransportError" and "idle" in retry.message
    assert "0.5 s" in retry.message
    assert out["actions"] == ["retry", "none"]
    assert out["result"].final_text


FINAL = {
    "quota": E.QuotaExceeded,  # Anthropic's spend limit: only inside the flattened text
    "402": E.QuotaExceeded,  # LiteLLM answers 500 for Anthropic's 402
    "401": E.AuthFailed,
    "403": E.AuthFailed,  # LiteLLM answers 500 for Anthropic's 403
    "404": E.ModelNotFound,
    "400": E.BadRequest,
}


@pytest.mark.parametrize(
    ("upstream", "fault", "error"),
    [(u, f, e) for u in UPSTREAMS for f, e in FINAL.items()]
    + [("claude-mock", "413", E.BadRequest)],
)
def test_final_faults_through_the_gateway(
    mock: MockServer, proxy: str, upstream: str, fault: str, error: type[Exception]
) -> None:
    out = run(mock, proxy, upstream, fault)
    assert isinstance(out["error"], error), out["error"]
    assert out["actions"] == ["fail"] and out["upstream"] == 1
    assert out["agent"].history == []


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_overflow_through_the_gateway_keeps_the_numbers(
    mock: MockServer, proxy: str, upstream: str
) -> None:
    out = run(mock, proxy, upstream, "overflow", "overflow", "overflow")
    err = out["error"]
    assert isinstance(err, E.ContextOverflow)
    assert err.tokens and err.limit and err.tokens > err.limit
    assert out["agent"].history == []


@pytest.mark.parametrize(
    ("upstream", "fault"),
    [
        ("claude-mock", "malformed"),
        ("claude-mock", "drop_after_tokens=3"),
        ("gpt-mock", "drop_after_tokens=3"),
    ],
)
def test_a_broken_stream_arrives_through_the_gateway_as_a_short_clean_answer(
    mock: MockServer, proxy: str, upstream: str, fault: str
) -> None:
    """LiteLLM ends the stream with finish_reason "stop" when the upstream's stream breaks:
    nbagent sees a complete, shorter answer and cannot know better. (When nothing got through
    before the break, which depends on timing, the empty answer is retried.)"""
    clean = run(mock, proxy, upstream, "ok")["result"].final_text
    out = run(mock, proxy, upstream, fault)
    answer = out["result"].final_text
    assert all(r.error == "EmptyResponse" for r in out["retries"])
    if out["retries"]:
        assert answer == clean
    else:
        assert answer and clean.startswith(answer) and len(answer) < len(clean)
