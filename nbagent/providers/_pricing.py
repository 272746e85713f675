"""What a request cost, and how large a model's window is, from genai-prices' bundled data (no
network).

Through a provider's batch API (`batch=True`) a request costs half: Anthropic's Message Batches,
OpenAI's and Azure's Batch API and Gemini's batch mode all document 50 % of the standard price.
genai-prices knows the batch price of many models (its `processing: batch` variants) and is
asked first; for a model it has no batch price for, the documented half of the standard price
is used."""

from __future__ import annotations

import functools
from typing import Any

from .._core._budget import Usage

FREE = ""
"""The price id of a provider that costs nothing per token (a local model, the demo)."""

# nbagent's provider names -> genai-prices' provider ids, filled from the providers' registry
# rows (`ProviderInfo.price_id`); a name not here lets genai-prices find the model
_PROVIDER_IDS: dict[str, str | None] = {"scripted": FREE, "mock": FREE}


def set_price_id(name: str, price_id: str | None) -> None:
    """Price provider `name`'s models under genai-prices' `price_id` (`FREE`: at nothing)."""
    _PROVIDER_IDS[name] = price_id


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
    price through the provider's batch API (see the module docstring): each kind of token at
    genai-prices' batch rate where it has one, else at half the standard rate."""
    if _PROVIDER_IDS.get(provider) == FREE:
        return 0.0
    live = _rates(provider, model, False)
    if live is None:
        return None
    rates = _rates(provider, model, True) if batch else live
    assert rates is not None
    if usage.input_tokens <= LINEAR_UP_TO:
        return _linear(rates, usage)
    try:  # a long prompt: the tiers apply, so genai-prices prices it whole
        exact = float(_lookup(provider, model, usage).total_price)
    except Exception:  # LookupError for unknown models; anything else is price-data trouble
        return None
    flat = _linear(live, usage)
    return exact * _linear(rates, usage) / flat if batch and flat > 0 else exact


LINEAR_UP_TO = 100_000
"""Below this many input tokens a price is the same per token whatever the count (the tiers
that raise it, such as the long-context ones, begin at 128k or 200k): it is computed from the
model's per-token rates, looked up once, not by a lookup per request (a 100,000-item batch
would spend minutes in them)."""
_PROBE = 1000
_PROBES = (
    Usage(input_tokens=_PROBE),
    Usage(output_tokens=_PROBE),
    Usage(input_tokens=_PROBE, cache_read_tokens=_PROBE),
    Usage(input_tokens=_PROBE, cache_write_tokens=_PROBE),
)
Rates = tuple[float, float, float, float]


@functools.lru_cache(maxsize=512)
def _rates(provider: str, model: str, batch: bool) -> Rates | None:
    """Dollars per uncached input, output, cache-read and cache-write token, or None."""
    try:
        live = [float(_lookup(provider, model, u).total_price) / _PROBE for u in _PROBES]
        if not batch:
            return (live[0], live[1], live[2], live[3])
        raw = [float(_lookup(provider, model, u, batch=True).total_price) / _PROBE for u in _PROBES]
    except Exception:  # LookupError for unknown models; anything else is price-data trouble
        return None
    # a probe of cached tokens has no uncached input left: its price is the cached rate's
    out = [b if b < a else a * BATCH_DISCOUNT for a, b in zip(live, raw, strict=True)]
    return (out[0], out[1], out[2], out[3])


def _linear(rates: Rates, usage: Usage) -> float:
    fresh = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    counts = (fresh, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    return sum(rate * n for rate, n in zip(rates, counts, strict=True))


def context_window(provider: str, model: str) -> int | None:
    """The model's context window in tokens as genai-prices knows it, or None."""
    try:
        window = getattr(_lookup(provider, model, Usage()).model, "context_window", None)
    except Exception:
        return None
    return window if isinstance(window, int) and window > 0 else None
