"""Which batch API a provider's requests go to: `batch_client(provider)`.

Each provider says it (`HTTPProvider.batch_api`): Anthropic's Message Batches (and the `demo`
model, whose mock server answers them), OpenAI's Batch API (Chat Completions and Responses),
Azure OpenAI's (a Global-Batch deployment, Chat Completions) and Gemini's batch mode. Every
other provider (OpenRouter, Ollama, llama.cpp, vLLM, Azure's Responses) has none:
`batch_client` says why in one sentence.
"""

from __future__ import annotations

from ..errors import ConfigError
from ._batch_client import BatchClient
from ._batch_wire import BatchCaps
from ._http import HTTPProvider
from ._models import PROVIDERS

__all__ = ["batch_client"]


def batch_client(provider: object, *, caps: BatchCaps | None = None) -> BatchClient:
    """The batch API client of `provider`; `caps` replaces its provider's size caps (tests).

    Raises `ConfigError` for a provider that has no batch API."""
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
