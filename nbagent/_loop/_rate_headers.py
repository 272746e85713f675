"""What a reply's rate-limit headers say about the provider's request bucket: its size, what is
left, and (OpenAI's millisecond `x-ratelimit-reset-requests`) how long until it is full again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..providers._server_wish import parse_duration

LIMIT = ("anthropic-ratelimit-requests-limit", "x-ratelimit-limit-requests")
REMAINING = ("anthropic-ratelimit-requests-remaining", "x-ratelimit-remaining-requests")
RESET = "x-ratelimit-reset-requests"


class RequestLimits(NamedTuple):
    """The request bucket as one reply's headers tell it; None where they say nothing."""

    limit: float | None
    remaining: float | None
    reset: float | None  # seconds until the bucket is full again


def request_limits(headers: Mapping[str, str] | None) -> RequestLimits:
    """Read the request bucket's numbers from response headers (any case)."""
    h = {k.lower(): v for k, v in (headers or {}).items()}
    return RequestLimits(
        _first_number(h, LIMIT), _first_number(h, REMAINING), parse_duration(h.get(RESET, ""))
    )


def _first_number(headers: Mapping[str, str], names: tuple[str, ...]) -> float | None:
    for n in names:
        v = headers.get(n)
        if v is not None:
            try:
                x = float(v)
            except ValueError:
                continue
            if x == x and x >= 0:  # not NaN, not negative
                return x
    return None
