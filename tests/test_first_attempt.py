"""The first attempt of a fresh process is timed for the request alone.

httpx loads its transport (httpcore, h11, the anyio backend) when its first client is built and
its first connection opens, and a TLS client loads the CA bundle: together a quarter of a second
that the first attempt's `duration_s` (and the demo's picture, its first bar) showed as if the
server had been slow. A provider loads them when it is made. These tests look at what is loaded
when, not at how long anything took.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from nbagent.providers import AnthropicProvider, _client

_FRESH = """
import json, sys
from nbagent import Agent
from nbagent.mock import MockServer

with MockServer(["500", "ok"]) as server:
    agent = Agent("demo", base_url=server.url)
    before = set(sys.modules)
    agent.run_sync("What is 2 + 2?", show=False)
    loaded = sorted(
        m for m in set(sys.modules) - before
        if m.split(".")[0] in {"httpx", "httpcore", "h11", "h2", "anyio", "sniffio", "ssl", "certifi"}
    )
    print(json.dumps({"loaded": loaded, "attempts": len(agent.attempts)}))
"""


def test_a_fresh_processs_first_attempt_loads_no_part_of_the_http_stack() -> None:
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", _FRESH],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["attempts"] == 2  # the 500, then the answer: a real connection was opened
    assert result["loaded"] == []  # before: httpcore, h11 and anyio's backend, ~0.25 s of it


def test_an_https_provider_loads_the_ca_bundle_when_made_not_in_its_first_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []
    original = httpx.create_ssl_context

    def counting(*args: object, **kwargs: object) -> object:
        made.append(1)
        return original()

    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    _client._ssl_context.cache_clear()
    try:
        provider = AnthropicProvider("claude-x", api_key="sk-test")  # the public https endpoint
        assert len(made) == 1
        # the first attempt builds this loop's client with the context already made
        asyncio.run(_client_of(provider))
        assert len(made) == 1
        # a local server over plain http has no certificate to check: nothing to load
        _client._ssl_context.cache_clear()
        AnthropicProvider("claude-x", base_url="http://127.0.0.1:9", api_key=None)
        assert made[1:] == []
    finally:
        _client._ssl_context.cache_clear()


async def _client_of(provider: AnthropicProvider) -> None:
    client = provider._client.current()
    assert isinstance(client, httpx.AsyncClient)
    await provider.aclose()
