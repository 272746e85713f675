"""How long a server asks us to wait, read from its answer.

`server_wish(headers)` reads `retry-after-ms`, `retry-after` (seconds or an HTTP date) and the
rate-limit reset headers (Anthropic's `anthropic-ratelimit-*-reset` RFC 3339 times, OpenAI's
`x-ratelimit-reset-*` durations such as `6m0s`). The retry policy takes the result as the
error's `retry_after`: it replaces the computed backoff and is never jittered.

Behind a gateway (the LiteLLM proxy) the upstream's headers arrive prefixed `llm_provider-`
(`llm_provider-retry-after`, `llm_provider-retry-after-ms`, ...): they count as the upstream's
own when the gateway sent no header of that name itself. Gemini puts its wish in the error body
(`google.rpc.RetryInfo.retryDelay`, a protobuf duration such as `"48.18s"`, which
`parse_duration` reads).

A negative wish is ignored, as the official SDKs do (the policy's delay applies); zero means now.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
GATEWAY_PREFIX = "llm_provider-"


def unprefixed(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased headers, with a gateway's `llm_provider-` copies of the upstream's headers
    taken as the upstream's own wherever the gateway sent no header of that name itself."""
    h = {k.lower(): v for k, v in headers.items()}
    for key, value in list(h.items()):
        if key.startswith(GATEWAY_PREFIX):
            h.setdefault(key[len(GATEWAY_PREFIX) :], value)
    return h


def parse_duration(text: str) -> float | None:
    """OpenAI's reset durations: `6m0s`, `1s`, `12ms`, `1h2m3.5s`. None if not one."""
    s = text.strip()
    if not s:
        return None
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            return None
        value = float(m.group(1))
        total += value * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        pos = m.end()
    if pos != len(s):
        try:  # a bare number of seconds (a negative or endless one is no wish)
            return float(s) if math.isfinite(float(s)) and float(s) >= 0 else None
        except ValueError:
            return None
    return total


_RETRY_IN_TEXT = re.compile(
    r"(?:retry|try again)\s+(?:after|in)\s+(\d+(?:\.\d+)?(?:\s*seconds?\b|(?:ms|h|m|s)"
    r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))*\b))",
    re.I,
)


def wish_in_text(message: str) -> float | None:
    """A wait a rate-limit message names ("Please try again in 3s.", "in 6m0s", "after 2
    seconds", Gemini's "Please retry in 58.2s."): behind a gateway, the upstream's only trace
    of its Retry-After when the gateway drops the headers."""
    m = _RETRY_IN_TEXT.search(message)
    if not m:
        return None
    text = re.sub(r"\s*seconds?$", "s", m.group(1).strip(), flags=re.I)
    return parse_duration(text)


def parse_retry_after(value: str, now_wall: float | None = None) -> float | None:
    """`Retry-After`: delta-seconds or an HTTP date. None when it is neither, or a negative
    number of seconds; a date already past means now (0)."""
    v = value.strip()
    try:
        secs = float(v)
    except ValueError:
        pass
    else:
        return secs if math.isfinite(secs) and secs >= 0 else None
    try:
        when = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = time.time() if now_wall is None else now_wall
    delta = when.timestamp() - now  # an aware time: no local clock to overflow
    return max(0.0, delta) if math.isfinite(delta) else None


def rfc3339(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (`2024-09-24T18:37:24.100435Z`; without an offset, UTC),
    or None: Anthropic's rate-limit resets, batches' creation times."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    if "." in text:  # Python before 3.11 takes a fraction of exactly 3 or 6 digits
        head, _, rest = text.partition(".")
        n = len(rest) - len(rest.lstrip("0123456789"))  # the fraction's digits, not the offset's
        text = f"{head}.{rest[:n][:6].ljust(6, '0')}{rest[n:]}"
    try:
        when = datetime.fromisoformat(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()
    except (ValueError, OverflowError):
        return None


def retry_after_of(headers: Mapping[str, str], now_wall: float | None = None) -> float | None:
    """Seconds `retry-after-ms`, else `retry-after` (seconds or an HTTP date), asks to wait, or
    None (a negative value is skipped as if absent): what the official SDKs read."""
    if "retry-after-ms" in headers:
        try:
            ms = float(headers["retry-after-ms"])
        except ValueError:
            ms = math.nan
        if math.isfinite(ms) and ms >= 0:
            return ms / 1000
    if "retry-after" in headers:
        return parse_retry_after(headers["retry-after"], now_wall)
    return None


_RESET_HEADER = re.compile(r"^(?:anthropic-ratelimit-(.+)-reset|x-ratelimit-reset-(.+))$")


def server_wish(headers: Mapping[str, str], now_wall: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from whichever header says so, or None.

    Order: `retry-after-ms`, `retry-after`, then the latest rate-limit reset of the limits
    that are exhausted (remaining 0); None when none is. A
    gateway's `llm_provider-` copies count as the upstream's own (see `unprefixed`); a negative
    value is skipped as if absent.
    """
    h = unprefixed(headers)
    now = time.time() if now_wall is None else now_wall
    wish = retry_after_of(h, now)
    if wish is not None:
        return wish
    resets: dict[str, float] = {}  # by the header that says how much of its limit remains
    for key, value in h.items():
        m = _RESET_HEADER.match(key)
        if not m:
            continue
        if m.group(1):
            when = rfc3339(value)
            remaining = f"anthropic-ratelimit-{m.group(1)}-remaining"
            secs = None if when is None else max(0.0, when - now)
        else:
            remaining, secs = f"x-ratelimit-remaining-{m.group(2)}", parse_duration(value)
        if secs is not None:
            resets[remaining] = secs
    exhausted = [secs for name, secs in resets.items() if h.get(name, "").strip() == "0"]
    return max(exhausted) if exhausted else None
