"""What a request cost, from genai-prices' bundled price data (no network)."""

from __future__ import annotations

from .._core._budget import Usage

__all__ = ["estimate_cost"]


def estimate_cost(provider: str, model: str, usage: Usage) -> float | None:
    """Price a request with genai-prices' bundled data; None when the model is unknown to it."""
    if provider in ("demo", "scripted", "ollama", "mock"):
        return 0.0
    try:
        from genai_prices import Usage as PUsage
        from genai_prices import calc_price
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    provider_id = {"openrouter": "openrouter", "anthropic": "anthropic", "openai": "openai"}.get(
        provider
    )
    try:
        price = calc_price(
            PUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens or None,
                cache_write_tokens=usage.cache_write_tokens or None,
            ),
            model_ref=model,
            provider_id=provider_id,
        )
    except Exception:  # LookupError for unknown models; anything else is price-data trouble
        return None
    return float(price.total_price)
