"""Which batch API a provider's requests go to: `batch_client(provider)`.

Anthropic's Message Batches (and the `demo` model, whose mock server answers them), OpenAI's
Batch API (Chat Completions and Responses), Azure OpenAI's (a Global-Batch deployment, Chat
Completions) and Gemini's batch mode. Every other provider (OpenRouter, Ollama, llama.cpp,
vLLM, Azure's Responses) has none: `batch_client` says why in one sentence.
"""

from __future__ import annotations

from ..errors import ConfigError
from ._anthropic import AnthropicProvider
from ._anthropic_batch import AnthropicBatches
from ._azure import AzureChatProvider, AzureResponsesProvider
from ._batch_client import BatchClient
from ._batch_wire import BatchCaps
from ._gemini import GeminiProvider
from ._gemini_batch import GeminiBatches
from ._openai_batch import AzureBatches, OpenAIBatches
from ._openai_chat import OpenAIProvider
from ._openai_responses import ResponsesProvider

__all__ = ["batch_client"]

_OPENAI_NAMES = frozenset({"openai", "openai-responses"})


def batch_client(provider: object, *, caps: BatchCaps | None = None) -> BatchClient:
    """The batch API client of `provider`; `caps` replaces its provider's size caps (tests).

    Raises `ConfigError` for a provider that has no batch API."""
    client: BatchClient | None = None
    if isinstance(provider, AnthropicProvider):
        client = AnthropicBatches(provider, caps=caps)
    elif isinstance(provider, AzureChatProvider):
        client = AzureBatches(provider, caps=caps)
    elif isinstance(provider, AzureResponsesProvider):
        client = None
    elif isinstance(provider, (OpenAIProvider, ResponsesProvider)) and (
        provider.name in _OPENAI_NAMES
    ):
        client = OpenAIBatches(provider, caps=caps)
    elif isinstance(provider, GeminiProvider):
        client = GeminiBatches(provider, caps=caps)
    if client is None:
        name = getattr(provider, "name", type(provider).__name__)
        raise ConfigError(
            f"{name!r} has no batch API: backend='provider' takes 'anthropic:', 'openai:', "
            "'openai-responses:', 'azure:' (a Global-Batch deployment), 'gemini:' or 'demo' "
            "models; use backend='local' for this one."
        )
    return client
