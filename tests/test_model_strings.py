"""resolve_model: model strings -> providers, and the ConfigErrors raised before anything is sent."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from provider_support import KEY_ENVS as ENV_KEYS
from provider_support import SENTINEL_KEY

from nbagent._core._messages import Message
from nbagent.errors import ConfigError
from nbagent.mock import shared_server
from nbagent.providers import (
    AnthropicProvider,
    Completed,
    ModelRequest,
    OpenAIProvider,
    Provider,
    resolve_model,
)

ENV_URLS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GEMINI_BASE_URL", "AZURE_OPENAI_ENDPOINT")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_KEYS + ENV_URLS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("spec", "env", "cls", "name", "model", "base_url"),
    [
        (
            "anthropic:claude-sonnet-4-0",
            "ANTHROPIC_API_KEY",
            AnthropicProvider,
            "anthropic",
            "claude-sonnet-4-0",
            "https://api.anthropic.com",
        ),
        (
            "openai:gpt-4o",
            "OPENAI_API_KEY",
            OpenAIProvider,
            "openai",
            "gpt-4o",
            "https://api.openai.com/v1",
        ),
        (
            "openrouter:anthropic/claude-sonnet-4",
            "OPENROUTER_API_KEY",
            OpenAIProvider,
            "openrouter",
            "anthropic/claude-sonnet-4",
            "https://openrouter.ai/api/v1",
        ),
        (
            "openrouter:google/gemini-2.0-flash-exp:free",
            "OPENROUTER_API_KEY",
            OpenAIProvider,
            "openrouter",
            "google/gemini-2.0-flash-exp:free",
            "https://openrouter.ai/api/v1",
        ),
        (
            "ollama:llama3.2",
            None,
            OpenAIProvider,
            "ollama",
            "llama3.2",
            "http://localhost:11434/v1",
        ),
        (
            "  openai:gpt-4o-mini ",
            "OPENAI_API_KEY",
            OpenAIProvider,
            "openai",
            "gpt-4o-mini",
            "https://api.openai.com/v1",
        ),
    ],
)
def test_model_string_table(
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    env: str | None,
    cls: type[Provider],
    name: str,
    model: str,
    base_url: str,
) -> None:
    if env:
        monkeypatch.setenv(env, SENTINEL_KEY)
    provider = resolve_model(spec)
    assert type(provider) is cls
    assert isinstance(provider, Provider)
    assert (provider.name, provider.model) == (name, model)
    assert provider.base_url == base_url  # type: ignore[attr-defined]
    assert SENTINEL_KEY not in repr(provider)


def test_explicit_key_and_base_url_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0000")
    p = resolve_model("openai:qwen2.5", api_key=SENTINEL_KEY, base_url="http://gpu-box:8000/v1/")
    assert isinstance(p, OpenAIProvider)
    assert p.base_url == "http://gpu-box:8000/v1"
    assert p._api_key == SENTINEL_KEY


def test_base_url_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example/v1")
    assert resolve_model("openai:gpt-4o").base_url == "https://proxy.example/v1"  # type: ignore[attr-defined]
    monkeypatch.setenv("OPENAI_BASE_URL", "not a url")
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        resolve_model("openai:gpt-4o")


def test_local_servers_need_no_key() -> None:
    p = resolve_model("openai:llama-3-8b", base_url="http://127.0.0.1:8080/v1")
    assert p.name == "openai"
    p = resolve_model("ollama:qwen3", base_url="http://localhost:11435/v1")
    assert p._api_key is None  # type: ignore[attr-defined]


def test_options_go_to_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL_KEY)
    p = resolve_model(
        "anthropic:claude-haiku-4-5",
        idle_timeout=5.0,
        max_event_bytes=1000,
        extra_headers={"anthropic-beta": "x"},
        name="work",
    )
    assert isinstance(p, AnthropicProvider)
    assert p.limits.idle_timeout == 5.0 and p.limits.max_event_bytes == 1000
    assert p.name == "work"


@pytest.mark.parametrize(
    ("spec", "kw", "match"),
    [
        ("gpt-4o", {}, "no provider prefix.*'openai:gpt-4o'"),
        ("claude-sonnet-4-0", {}, "'anthropic:claude-sonnet-4-0'"),
        ("mystery", {}, "no provider prefix"),
        ("", {}, "no provider prefix"),
        ("vertex:gemini-2.5-pro", {}, "unknown provider 'vertex'"),
        ("gemini:gemini-2.5-pro", {}, "GEMINI_API_KEY"),
        ("azure:my-deployment", {"api_key": SENTINEL_KEY}, "AZURE_OPENAI_ENDPOINT"),
        ("openai:", {}, "names no model"),
        ("anthropic:   ", {}, "names no model"),
        ("anthropic:claude-sonnet-4-0", {}, "ANTHROPIC_API_KEY"),
        ("openai:gpt-4o", {}, "OPENAI_API_KEY"),
        ("openrouter:x/y", {}, "OPENROUTER_API_KEY"),
        ("openai:gpt-4o", {"api_key": ""}, "OPENAI_API_KEY"),
        (
            "openai:gpt-4o",
            {"api_key": SENTINEL_KEY, "base_url": "ftp://example.com"},
            "not an http",
        ),
        ("openai:gpt-4o", {"api_key": SENTINEL_KEY, "base_url": "http://"}, "not an http"),
        ("openai:gpt-4o", {"api_key": SENTINEL_KEY, "base_url": "localhost:8080"}, "not an http"),
        (
            "openai:gpt-4o",
            {"api_key": SENTINEL_KEY, "base_url": "http://host:port/v1"},
            "not an http",
        ),
        ("openai:gpt-4o", {"api_key": SENTINEL_KEY, "bogus": 1}, "unknown option 'bogus'"),
        ("openai:gpt-4o", {"api_key": "sk-has-a-newline\n"}, None),
        ("openai:gpt-4o", {"api_key": "sk-has a-space"}, "spaces or control characters"),
    ],
)
def test_config_errors(spec: str, kw: dict[str, object], match: str | None) -> None:
    if match is None:  # a trailing newline is stripped, like the env var would be
        resolve_model(spec, **kw)  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError, match=match) as info:
        resolve_model(spec, **kw)  # type: ignore[arg-type]
    text = str(info.value)
    assert SENTINEL_KEY not in text
    assert text.endswith(".") and ". " not in text  # one sentence


def test_non_string_spec_is_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve_model(42)  # type: ignore[arg-type]


def test_nothing_is_sent_on_config_error() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            with pytest.raises(ConfigError):
                resolve_model("openai:gpt-4o", client=client)

    asyncio.run(main())
    assert sent == []


@pytest.mark.e2e
def test_demo_uses_the_shared_mock_server() -> None:
    server = shared_server()
    provider = resolve_model("demo")
    assert isinstance(provider, AnthropicProvider)
    assert (provider.name, provider.model) == ("demo", "demo")
    assert provider.base_url == str(server.url).rstrip("/")

    async def main() -> Completed:
        try:
            parts = [p async for p in provider.stream(ModelRequest((Message.user("hello"),)))]
        finally:
            owned = list(provider._client._owned.values())
            await provider.aclose()
        assert len(owned) == 1 and owned[0].is_closed  # the client it created is closed
        assert not provider._client._owned
        last = parts[-1]
        assert isinstance(last, Completed)
        return last

    done = asyncio.run(main())
    assert done.usage.cost_usd == 0.0
    assert done.message.blocks


def test_demo_with_base_url_needs_no_server() -> None:
    p = resolve_model("demo", base_url="http://127.0.0.1:5999")
    assert p.name == "demo" and p.base_url == "http://127.0.0.1:5999"  # type: ignore[attr-defined]


def test_gemini_key_from_gemini_then_google_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent.providers import GeminiProvider

    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY \\(or GOOGLE_API_KEY\\)"):
        resolve_model("gemini:gemini-2.5-flash")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-1")
    p = resolve_model("gemini:gemini-2.5-flash")
    assert isinstance(p, GeminiProvider) and p._api_key == "google-key-1"
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL_KEY)
    p = resolve_model("gemini:gemini-2.5-flash")
    assert isinstance(p, GeminiProvider) and p._api_key == SENTINEL_KEY
    assert (p.name, p.model) == ("gemini", "gemini-2.5-flash")
    with pytest.raises(ConfigError, match="'gemini:gemini-2.5-flash'"):
        resolve_model("gemini-2.5-flash")  # the hint names the prefix


def test_openai_responses_shares_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent.providers import ResponsesProvider

    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)
    p = resolve_model("openai-responses:o4-mini")
    assert isinstance(p, ResponsesProvider)
    assert (p.name, p.url) == ("openai-responses", "https://api.openai.com/v1/responses")
