"""What a request cost, and how large a model's window is, from genai-prices' bundled data (no
network)."""

from __future__ import annotations

from typing import Any

from .._core._budget import Usage

__all__ = ["context_window", "estimate_cost"]

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


def _lookup(provider: str, model: str, usage: Usage) -> Any:
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
    )


def estimate_cost(provider: str, model: str, usage: Usage) -> float | None:
    """Price a request with genai-prices' bundled data; None when the model is unknown to it.

    `usage.input_tokens` counts every prompt token, cached ones included (as each provider's
    total does); the cached reads and writes are priced at their own rates."""
    if provider in ("demo", "scripted", "ollama", "mock"):
        return 0.0
    try:
        price = _lookup(provider, model, usage)
    except Exception:  # LookupError for unknown models; anything else is price-data trouble
        return None
    return float(price.total_price)


def context_window(provider: str, model: str) -> int | None:
    """The model's context window in tokens as genai-prices knows it, or None."""
    try:
        window = getattr(_lookup(provider, model, Usage()).model, "context_window", None)
    except Exception:
        return None
    return window if isinstance(window, int) and window > 0 else None
