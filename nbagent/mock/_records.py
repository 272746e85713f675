"""What the mock server remembers about each request it received."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SECRET_HEADERS = frozenset(
    {"x-api-key", "authorization", "api-key", "proxy-authorization", "cookie", "openai-api-key"}
)
REDACTED = "[redacted]"


@dataclass(frozen=True)
class RequestRecord:
    """One request the mock server received, and what it did with it."""

    index: int
    method: str
    path: str
    format: str | None  # "anthropic", "openai", or None (health check, unknown path)
    body: Any  # the parsed JSON body, or None when it did not parse
    headers: dict[str, str]  # lowercased names, secrets redacted
    fault: str  # the fault applied: "ok", "500", "drop_after_tokens=20", "rate_limit", ...
    status: int
    request_id: str
    stream: bool
    received_at: float  # time.time()


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        k.lower(): (REDACTED if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()
    }
