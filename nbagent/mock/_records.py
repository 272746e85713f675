"""What the mock server remembers about each request it received."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..recording._format import SECRET_HEADERS

_HIDDEN = frozenset({*SECRET_HEADERS, "cookie"})
_QUERY_KEY = re.compile(r"(?<=[?&]key=)[^&]*")
REDACTED = "[redacted]"


@dataclass(frozen=True)
class RequestRecord:
    """One request the mock server received, and what it did with it.

    Attributes:
        index: Its number since the start (or `clear_requests`), kept or not.
        method: The HTTP method.
        path: The path and query (a ``key`` in it redacted).
        format: "anthropic", "openai", "responses", "gemini", or None (a health check, an
            unknown path).
        body: The parsed JSON body, or None when it did not parse.
        headers: Its headers, names lowercased, secrets redacted.
        fault: The fault applied ("ok", "500", "drop_after_tokens=20", "rate_limit", ...).
        status: The status it answered with.
        request_id: The request id it answered with.
        stream: Whether it was streamed.
        received_at: When it came (`time.time()`).
    """

    index: int
    method: str
    path: str  # a key in the query redacted
    format: str | None  # "anthropic", "openai", or None (health check, unknown path)
    body: Any  # the parsed JSON body, or None when it did not parse
    headers: dict[str, str]  # lowercased names, secrets redacted
    fault: str  # the fault applied: "ok", "500", "drop_after_tokens=20", "rate_limit", ...
    status: int
    request_id: str
    stream: bool
    received_at: float  # time.time()


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): (REDACTED if k.lower() in _HIDDEN else v) for k, v in headers.items()}


def redact_path(path: str) -> str:
    """``path`` with the value of a ``key`` query parameter (Gemini's key) redacted."""
    return _QUERY_KEY.sub(REDACTED, path)
