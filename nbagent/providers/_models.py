"""Model strings -> providers: `"anthropic:claude-sonnet-4-0"`, `"openai:gpt-4o"`, `"demo"`.

Everything that can be wrong about a model string (no prefix, an unknown prefix, no model, no
key, a base URL that is not http(s) with a host, an unknown option) raises `ConfigError` with one
sentence saying what to change, before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ._anthropic import AnthropicProvider
from ._base import Provider
from ._http import HTTPProvider, check_base_url
from ._openai_chat import OpenAIProvider

__all__ = ["PROVIDERS", "ProviderInfo", "register_model", "resolve_model"]

ModelFactory = Callable[..., Provider]
"""Makes the provider of a named model: called with `base_url=` (None: its own) and options."""

_NAMED: dict[str, ModelFactory] = {}


def register_model(name: str, factory: ModelFactory) -> None:
    """Make the model string `name` (no prefix, such as "demo") resolve through `factory`.

    This is how upper layers plug a model in without the providers importing them: the demo
    package registers "demo" (the demo model behind the loopback mock server).
    """
    _NAMED[name] = factory


@dataclass(frozen=True)
class ProviderInfo:
    prefix: str
    label: str
    wire: type[HTTPProvider]
    base_url: str
    key_env: str | None  # None: no key needed
    base_url_env: str | None = None
    example: str = ""


PROVIDERS: dict[str, ProviderInfo] = {
    "anthropic": ProviderInfo(
        "anthropic",
        "Anthropic",
        AnthropicProvider,
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "anthropic:claude-sonnet-4-0",
    ),
    "openai": ProviderInfo(
        "openai",
        "OpenAI",
        OpenAIProvider,
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "openai:gpt-4o",
    ),
    "openrouter": ProviderInfo(
        "openrouter",
        "OpenRouter",
        OpenAIProvider,
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        None,
        "openrouter:anthropic/claude-sonnet-4",
    ),
    "ollama": ProviderInfo(
        "ollama",
        "Ollama",
        OpenAIProvider,
        "http://localhost:11434/v1",
        None,
        None,
        "ollama:llama3.2",
    ),
}

_OPTIONS = frozenset(
    {
        "client",
        "connect_timeout",
        "idle_timeout",
        "max_body_bytes",
        "max_event_bytes",
        "extra_headers",
        "name",
    }
)
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def _known() -> str:
    return ", ".join(f"'{p}:'" for p in PROVIDERS)


def _guess_prefix(model: str) -> str | None:
    low = model.lower()
    if low.startswith("claude"):
        return "anthropic"
    if low.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if "/" in low:
        return "openrouter"
    return None


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.")


def resolve_model(
    spec: str, *, api_key: str | None = None, base_url: str | None = None, **kw: Any
) -> Provider:
    """The provider for a model string.

    `"<provider>:<model>"` with provider `anthropic`, `openai`, `openrouter` or `ollama`, or a
    registered name such as `"demo"` (the embedded model behind the loopback mock server, no
    key, no internet).
    `api_key` defaults to `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` / `OPENROUTER_API_KEY`;
    `base_url` to the provider's public endpoint (or `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`).
    A key is not needed for Ollama, nor for any server on this machine (llama.cpp, vLLM).
    Other keyword arguments (`client`, `connect_timeout`, `idle_timeout`, `max_body_bytes`,
    `max_event_bytes`, `extra_headers`, `name`) go to the provider.
    """
    unknown = sorted(set(kw) - _OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown option {unknown[0]!r} for resolve_model: "
            f"use one of {', '.join(sorted(_OPTIONS))}."
        )
    if not isinstance(spec, str):
        raise ConfigError(
            f"a model must be given as a string such as 'anthropic:claude-sonnet-4-0', "
            f"not {type(spec).__name__}."
        )
    text = spec.strip()
    if base_url is not None:
        base_url = check_base_url(base_url)
    named = _NAMED.get(text)
    if named is not None:
        return named(base_url=base_url, **kw)
    prefix, sep, model = text.partition(":")
    if not sep:
        guess = _guess_prefix(text)
        hint = f" such as '{guess}:{text}'" if guess else f" ({_known()}) or 'demo'"
        raise ConfigError(
            f"model string {spec!r} has no provider prefix: write it as '<provider>:<model>'{hint}."
        )
    info = PROVIDERS.get(prefix.strip().lower())
    if info is None:
        raise ConfigError(
            f"unknown provider {prefix!r} in model string {spec!r}: use one of {_known()} "
            "or 'demo'."
        )
    model = model.strip()
    if not model:
        raise ConfigError(f"model string {spec!r} names no model: write it like {info.example!r}.")
    url = base_url
    if url is None and info.base_url_env and os.environ.get(info.base_url_env, "").strip():
        url = check_base_url(os.environ[info.base_url_env], what=info.base_url_env)
    if url is None:
        url = info.base_url
    key = api_key
    if key is None and info.key_env:
        key = os.environ.get(info.key_env) or None
    if isinstance(key, str):
        key = key.strip() or None
    if key is None and info.key_env and not _is_loopback(url):
        raise ConfigError(
            f"no API key for {info.label}: set the {info.key_env} environment variable "
            "or pass api_key='...'."
        )
    kw.setdefault("name", info.prefix)
    return info.wire(model, api_key=key, base_url=url, **kw)
