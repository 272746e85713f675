"""Model strings -> providers: `"anthropic:claude-sonnet-4-0"`, `"openai:gpt-4o"`,
`"gemini:gemini-2.5-flash"`, `"openai-responses:o4-mini"`, `"azure:<deployment>"`, `"demo"`.

Everything that can be wrong about a model string (no prefix, an unknown prefix, no model, no
key, a base URL that is not http(s) with a host, an unknown option) raises `ConfigError` with one
sentence saying what to change, before anything is sent.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, set_provider_label
from ..recording._paths import WirePath
from ._anthropic import AnthropicProvider
from ._azure import AzureChatProvider, AzureResponsesProvider
from ._base import Provider
from ._batch_client import BatchClient
from ._batch_wire import BatchCaps
from ._client import check_base_url
from ._gemini import GeminiProvider
from ._http import HTTPProvider
from ._openai_chat import OpenAIProvider
from ._openai_responses import ResponsesProvider
from ._pricing import FREE, set_price_id

ModelFactory = Callable[..., Provider]
"""Makes the provider of a named model: called with `base_url=` (None: its own) and options."""

_NAMED: dict[str, ModelFactory] = {}
_PREFIXED: dict[str, Callable[..., Provider]] = {}


def register_model(
    name: str, factory: ModelFactory, *, label: str | None = None, free: bool = False
) -> None:
    """Make the model string `name` (no prefix, such as "demo") resolve through `factory`.

    This is how upper layers plug a model in without the providers importing them: the demo
    package registers "demo" (the demo model behind the loopback mock server).

    Args:
        name: The model string, as `Agent(model=...)` takes it.
        factory: Makes the provider: called with `base_url=` (None for its own) and the other
            options of `resolve_model`.
        label: How an error's sentence names it ("Demo model"); None: by `name`.
        free: Its answers cost nothing (priced at 0, not as the model it answers as).
    """
    _NAMED[name] = factory
    if label is not None:
        set_provider_label(name, label)
    if free:
        set_price_id(name, FREE)


def model_string(provider: Provider) -> str:
    """The model string that names `provider`: a registered name alone ("demo"), else
    `"<name>:<model>"`."""
    return provider.name if provider.name in _NAMED else f"{provider.name}:{provider.model}"


def register_prefix(prefix: str, factory: Callable[..., Provider]) -> None:
    """Make `"<prefix>:<rest>"` resolve through `factory`.

    The demo package registers "replay" (a recording served by the mock server) this way.

    Args:
        prefix: The part before the colon.
        factory: Called as `factory(rest, api_key=..., base_url=..., **options)`.
    """
    _PREFIXED[prefix] = factory


@dataclass(frozen=True)
class ProviderInfo:
    """One provider of the registry, under its prefix in `PROVIDERS`."""

    label: str
    wire: type[HTTPProvider]
    key_env: str | None  # None: no key needed
    base_url_env: str | None = None
    example: str = ""
    base_url: str | None = None  # None: the wire format's own (`default_base_url`)
    alt_key_env: str | None = None  # read when key_env is not set
    version_env: str | None = None  # Azure's api-version
    # genai-prices' provider id (FREE: priced at nothing); None: let it find the model
    price_id: str | None = None
    name: str | None = None  # the provider's name (the attempt log's); None: its prefix


_OPENAI = ProviderInfo(
    "OpenAI",
    OpenAIProvider,
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "openai:gpt-4o",
    price_id="openai",
)
_AZURE = ProviderInfo(
    "Azure OpenAI",
    AzureChatProvider,
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "azure:my-gpt-4o-deployment",
    price_id="azure",
    version_env="AZURE_OPENAI_API_VERSION",
    name="azure",  # both of its formats
)

# Azure's endpoint is the resource's own: AZURE_OPENAI_ENDPOINT or base_url (its wire has none)
PROVIDERS: dict[str, ProviderInfo] = {
    "anthropic": ProviderInfo(
        "Anthropic",
        AnthropicProvider,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "anthropic:claude-sonnet-4-0",
        price_id="anthropic",
    ),
    "openai": _OPENAI,
    "openrouter": ProviderInfo(
        "OpenRouter",
        OpenAIProvider,
        "OPENROUTER_API_KEY",
        None,
        "openrouter:anthropic/claude-sonnet-4",
        base_url="https://openrouter.ai/api/v1",
        price_id="openrouter",
    ),
    "ollama": ProviderInfo(
        "Ollama",
        OpenAIProvider,
        None,
        None,
        "ollama:llama3.2",
        base_url="http://localhost:11434/v1",
        price_id=FREE,  # a model on this machine costs nothing per token
    ),
    "gemini": ProviderInfo(
        "Gemini",
        GeminiProvider,
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
        "gemini:gemini-2.5-flash",
        alt_key_env="GOOGLE_API_KEY",
        price_id="google",
    ),
    "openai-responses": replace(
        _OPENAI, wire=ResponsesProvider, example="openai-responses:o4-mini"
    ),
    "azure": _AZURE,
    "azure-responses": replace(
        _AZURE, wire=AzureResponsesProvider, example="azure-responses:my-o4-mini-deployment"
    ),
}

for _prefix, _info in PROVIDERS.items():
    set_provider_label(_prefix, _info.label)
    set_price_id(_prefix, _info.price_id)


def batch_client(provider: object, *, caps: BatchCaps | None = None) -> BatchClient:
    """The batch API client of `provider` (`HTTPProvider.batch_api`); `caps` replaces its
    provider's size caps (tests).

    Raises `ConfigError` for a provider that has no batch API (OpenRouter, Ollama, llama.cpp,
    vLLM, Azure's Responses), saying which prefixes have one."""
    api = provider.batch_api(provider.name) if isinstance(provider, HTTPProvider) else None
    if api is None:
        name = getattr(provider, "name", type(provider).__name__)
        takes = ", ".join(f"'{p}:'" for p, row in PROVIDERS.items() if row.wire.batch_api(p))
        raise ConfigError(
            f"{name!r} has no batch API: backend='provider' takes {takes} or 'demo' models; "
            "use backend='local' for this one."
        )
    client: BatchClient = api(provider, caps=caps)
    return client


# The row whose provider reads a request of each wire format (by its path, `wire_path`), at
# Azure OpenAI or elsewhere.
_READERS = {
    ("anthropic", False): "anthropic",
    ("openai", False): "openai",
    ("openai", True): "azure",
    ("responses", False): "openai-responses",
    ("responses", True): "azure-responses",
    ("gemini", False): "gemini",
}


def reader_of(
    route: WirePath | None, *, model: str, base_url: str, secrets: tuple[str, ...]
) -> HTTPProvider | None:
    """The provider that reads the answer to a request another client sent (a watched SDK's),
    made to read, never to send; None for a request of no known format.

    Args:
        route: What the request's path says (`recording._paths.wire_path`), or None.
        model: The model the request names ("" when it names none).
        base_url: The request's scheme and host.
        secrets: The credentials the request carries (masked in what the reader says).

    Returns:
        The provider, named as its registry row, or None.
    """
    name = _READERS.get((route.format, route.azure)) if route is not None else None
    if name is None:
        return None
    key = next((s for s in secrets if s and all(32 < ord(c) != 127 for c in s)), None)
    return PROVIDERS[name].wire(model or name, api_key=key, base_url=base_url, name=name)


# what resolve_model passes on to a provider: HTTPProvider's options, and Azure's api_version
_OPTIONS = frozenset(inspect.signature(HTTPProvider.__init__).parameters).union({"api_version"}) - {
    "self",
    "model",
    "api_key",
    "base_url",
}
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def _known() -> str:
    return ", ".join(f"'{p}:'" for p in PROVIDERS)


# how a model id without its prefix begins, by the prefix it likely lacks
_GUESSES = {
    "anthropic": ("claude",),
    "openai": ("gpt-", "o1", "o3", "o4", "chatgpt"),
    "gemini": ("gemini",),
}


def _guess_prefix(model: str) -> str | None:
    low = model.lower()
    guess = next((prefix for prefix, starts in _GUESSES.items() if low.startswith(starts)), None)
    return guess or ("openrouter" if "/" in low else None)


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.")


def resolve_model(
    spec: str, *, api_key: str | None = None, base_url: str | None = None, **kw: Any
) -> Provider:
    """The provider for a model string.

    `"<provider>:<model>"` with provider `anthropic`, `openai`, `openai-responses`, `gemini`,
    `azure` (Chat Completions against a deployment), `azure-responses`, `openrouter` or
    `ollama`, or a registered name such as `"demo"` (the embedded model behind the loopback mock
    server, no key, no internet), or a registered prefix such as `"replay:<recording>"` (a
    recording's answers, served by the mock server).
    `api_key` defaults to the provider's variable: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
    `GEMINI_API_KEY` (else `GOOGLE_API_KEY`), `AZURE_OPENAI_API_KEY`, `OPENROUTER_API_KEY`;
    `base_url` to the provider's public endpoint (or `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` /
    `GEMINI_BASE_URL`); Azure's is the resource's own, `AZURE_OPENAI_ENDPOINT`, with
    `api_version` (or `AZURE_OPENAI_API_VERSION`) choosing the dated endpoint over v1.
    A key is not needed for Ollama, nor for any server on this machine (llama.cpp, vLLM).
    Other keyword arguments (`client`, `connect_timeout`, `idle_timeout`, `max_body_bytes`,
    `max_event_bytes`, `extra_headers`, `name`, `trust_end_marker`) go to the provider.

    Args:
        spec: The model string.
        api_key: The key; None for the provider's environment variable.
        base_url: The endpoint; None for the provider's variable or its public endpoint.
        **kw: Options for the provider (listed above), and `api_version` for Azure.

    Returns:
        The provider, not yet connected (nothing is sent until a run).

    Raises:
        ConfigError: The string names no known provider or model, an option is unknown, or
            a key the provider needs is missing (the message names the variable to set).
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
    wanted = prefix.strip().lower()
    prefixed = _PREFIXED.get(wanted)
    if prefixed is not None:
        return prefixed(model.strip(), api_key=api_key, base_url=base_url, **kw)
    info = PROVIDERS.get(wanted)
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
        url = info.wire.default_base_url if info.base_url is None else info.base_url
    if not url:
        raise ConfigError(
            f"no endpoint for {info.label}: set the {info.base_url_env} environment variable "
            "to your resource's URL (https://<resource>.openai.azure.com) or pass base_url='...'."
        )
    key = api_key
    for env in (info.key_env, info.alt_key_env):
        if key is None and env:
            key = os.environ.get(env) or None
    if isinstance(key, str):
        key = key.strip() or None
    if key is None and info.key_env and not _is_loopback(url):
        also = f" (or {info.alt_key_env})" if info.alt_key_env else ""
        raise ConfigError(
            f"no API key for {info.label}: set the {info.key_env}{also} environment variable "
            "or pass api_key='...'."
        )
    if info.version_env:
        version = kw.pop("api_version", None) or os.environ.get(info.version_env) or None
        kw["api_version"] = version
    elif "api_version" in kw:
        raise ConfigError(
            f"api_version is an option of Azure OpenAI only, not of {info.label}: leave it out."
        )
    kw.setdefault("name", info.name or wanted)
    return info.wire(model, api_key=key, base_url=url, **kw)
