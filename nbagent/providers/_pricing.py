"""What a request cost, and how large a model's window is, from genai-prices' bundled data (no
network).

Through a provider's batch API (`batch=True`) a request costs half: Anthropic's Message Batches,
OpenAI's and Azure's Batch API and Gemini's batch mode all document 50 % of the standard price.
genai-prices knows the batch price of many models (its `processing: batch` variants) and is
asked first; for a model it has no batch price for, the documented half of the standard price
is used."""

from __future__ import annotations

from typing import Any

from .._core._budget import Usage

__all__ = ["BATCH_DISCOUNT", "context_window", "estimate_cost"]

# nbagent's provider names -> genai-prices' provider ids (None: let genai-prices find the model)
_PROVIDER_IDS = {
    "openrouter": "openrouter",
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "azure": "azure",
    "azure-responses": "azure",
}


BATCH_DISCOUNT = 0.5
"""The batch price as a share of the standard one, where genai-prices has no batch variant."""
_BATCH_CONTEXT = {"processing": "batch"}


def _lookup(provider: str, model: str, usage: Usage, *, batch: bool = False) -> Any:
    from genai_prices import Usage as PUsage
    from genai_prices import calc_price

    return calc_price(
        PUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens or None,
            cache_write_tokens=usage.cache_write_tokens or None,
        ),
        model_ref=model,
        provider_id=_PROVIDER_IDS.get(provider),
        price_context=_BATCH_CONTEXT if batch else None,
    )


def estimate_cost(provider: str, model: str, usage: Usage, *, batch: bool = False) -> float | None:
    """Price a request with genai-prices' bundled data; None when the model is unknown to it.

    `usage.input_tokens` counts every prompt token, cached ones included (as each provider's
    total does); the cached reads and writes are priced at their own rates. `batch=True`: the
    price through the provider's batch API (see the module docstring)."""
    if provider in ("demo", "scripted", "ollama", "mock"):
        return 0.0
    try:
        price = float(_lookup(provider, model, usage).total_price)
        if not batch:
            return price
        batched = float(_lookup(provider, model, usage, batch=True).total_price)
    except Exception:  # LookupError for unknown models; anything else is price-data trouble
        return None
    # genai-prices gives the standard price when it knows no batch variant of the model
    return batched if batched < price else price * BATCH_DISCOUNT


def context_window(provider: str, model: str) -> int | None:
    """The model's context window in tokens as genai-prices knows it, or None."""
    try:
        window = getattr(_lookup(provider, model, Usage()).model, "context_window", None)
    except Exception:
        return None
    return window if isinstance(window, int) and window > 0 else None
