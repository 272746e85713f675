"""What an error's text and headers say, read the same way for every wire format.

Redaction (no key leaves in any text), the headers worth keeping for retries and pacing, request
ids, the `x-should-retry` verdict, context-overflow markers with the numbers they name, and the
fields a request-validation error names (FastAPI's, whatever the status it came with). Kept
apart from the classification in `_http_errors` so both it and the stream readers can use them.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._core._words import shortened
from ._server_wish import unprefixed

__all__ = [
    "CONTEXT_CODES",
    "CONTEXT_MARKERS",
    "MAX_MESSAGE_CHARS",
    "context_numbers",
    "is_context_overflow",
    "kept_headers",
    "redact",
    "request_id_from",
    "short",
    "should_retry_from",
    "text_message",
    "validation_issues",
]

MAX_MESSAGE_CHARS = 1000

CONTEXT_MARKERS = (
    "prompt is too long",
    "context_length_exceeded",
    "exceed_context_size_error",
    "maximum context length",
    "exceeds the available context size",
    "too many tokens",
    "context window",
    "context length exceeded",
    "exceeds the context",
    "input is too long",
    "input tokens exceed",
    "reduce the length of the messages",
    "prompt length exceeds",
    # Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed"
    "exceeds the maximum number of tokens allowed",
)
CONTEXT_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
)

_KEPT_PREFIXES = ("retry-after", "anthropic-ratelimit-", "x-ratelimit-")
_KEPT_NAMES = frozenset({"x-should-retry", "request-id", "x-request-id", "apim-request-id"})


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every occurrence of each secret replaced by `***` (strings, lists, dicts)."""
    keys = [s for s in secrets if s and len(s) >= 4]
    if not keys:
        return value
    return _redact(value, keys)


def _redact(value: Any, keys: list[str]) -> Any:
    if isinstance(value, str):
        for k in keys:
            if k in value:
                value = value.replace(k, "***")
        return value
    if isinstance(value, dict):
        return {_redact(k, keys): _redact(v, keys) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, keys) for v in value]
    return value


def kept_headers(headers: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """The response headers that matter for retrying: rate limits, retry wishes, request ids.

    A gateway's `llm_provider-` copies of the upstream's headers are kept under the upstream's
    names (unless the gateway sent its own), so pacing reads the upstream's limits."""
    out: dict[str, str] = {}
    for k, value in unprefixed(headers).items():
        if k in _KEPT_NAMES or k.startswith(_KEPT_PREFIXES):
            out[k] = value
    return redact(out, secrets)  # type: ignore[no-any-return]


def request_id_from(
    headers: Mapping[str, str], body: Any = None, secrets: Iterable[str] = ()
) -> str | None:
    """`request-id` (Anthropic), `x-request-id` (OpenAI and most others), Azure's
    `apim-request-id`, or the body's."""
    rid = _request_id(headers, body)
    return None if rid is None else str(redact(rid, secrets))


def _request_id(headers: Mapping[str, str], body: Any) -> str | None:
    h = {k.lower(): v for k, v in headers.items()}
    for name in ("request-id", "x-request-id", "apim-request-id"):
        if h.get(name):
            return h[name]
    if isinstance(body, dict):
        rid = body.get("request_id")
        if isinstance(rid, str) and rid:
            return rid
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("request_id"), str):
            return str(err["request_id"])
    return None


def should_retry_from(headers: Mapping[str, str]) -> bool | None:
    """The server's `x-should-retry: true|false` verdict, or None."""
    for key, value in headers.items():
        if key.lower() == "x-should-retry" and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    return None


_NUM = r"(\d[\d,]*)"
_PAIR_PATTERNS = (
    # Anthropic: "prompt is too long: 205429 tokens > 200000 maximum"
    re.compile(_NUM + r"\s*tokens?\s*>\s*" + _NUM),
    # llama.cpp: "request (9000 tokens) exceeds the available context size (8192 tokens)"
    re.compile(r"\(" + _NUM + r"\s*tokens?\)\s*exceeds.*?context size\s*\(" + _NUM),
    # Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed
    # (1048576)."
    re.compile(r"token count\s*\(" + _NUM + r"\)\s*exceeds.*?allowed\s*\(" + _NUM, re.I),
)
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length is\s*" + _NUM, re.I),
    re.compile(r"configured limit of\s*" + _NUM, re.I),
    re.compile(r"context (?:size|window|length) (?:is |of )?\(?" + _NUM, re.I),
    re.compile(r"limit of\s*" + _NUM, re.I),
    re.compile(_NUM + r"\s*(?:tokens?\s*)?maximum", re.I),
)
_TOKENS_PATTERNS = (
    re.compile(r"resulted in\s*" + _NUM + r"\s*tokens", re.I),
    re.compile(r"you requested\s*" + _NUM + r"\s*tokens", re.I),
    re.compile(r"prompt is too long:\s*" + _NUM, re.I),
    re.compile(r"request \(" + _NUM + r"\s*tokens", re.I),
    re.compile(r"(?:prompt|input) (?:has|contains|of)\s*" + _NUM + r"\s*tokens", re.I),
)


def _int(text: str) -> int | None:
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return None


def context_numbers(message: str) -> tuple[int | None, int | None]:
    """(tokens, limit) named by a context-overflow message, each None when it does not say."""
    for pattern in _PAIR_PATTERNS:
        m = pattern.search(message)
        if m:
            return _int(m.group(1)), _int(m.group(2))
    return _first(_TOKENS_PATTERNS, message), _first(_LIMIT_PATTERNS, message)


def _first(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    """The number the first of `patterns` that matches names, or None."""
    found = (m for m in (p.search(message) for p in patterns) if m)
    return next((_int(m.group(1)) for m in found), None)


def is_context_overflow(message: str, codes: Iterable[str | None] = ()) -> bool:
    """True when a message or an error code says the prompt does not fit the context window."""
    if any(c and c.lower() in CONTEXT_CODES for c in codes):
        return True
    low = message.lower()
    return any(marker in low for marker in CONTEXT_MARKERS)


def short(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """One line (when it had several), at most `limit` characters."""
    return shortened(" ".join(text.split()) if "\n" in text else text.strip(), limit)


def text_message(text: str) -> str:
    """A readable line from a body that is not JSON: an HTML page's title, or the text."""
    stripped = text.strip()
    if not stripped:
        return ""
    if "<html" in stripped[:500].lower() or "<!doctype" in stripped[:100].lower():
        m = re.search(r"<title[^>]*>(.*?)</title>", stripped, re.I | re.S)
        if m:
            return short(html.unescape(m.group(1)), 300)
        stripped = re.sub(r"<[^>]+>", " ", stripped)
    return short(stripped, 300)


# FastAPI's text for a request that failed its pydantic model ("1 validation error:\n  {'type':
# 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "Input should be ...",
# ...}"): llama-cpp-python's route handler sends it as the message of an HTTP 500.
_VALIDATION = re.compile(r"\d+ validation errors?:")
_LOC = re.compile(r"'loc': \(([^()]*)\)")
_MSG = re.compile(r"""'msg': ("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_TYPE = re.compile(r"'type': '([a-z_]+)'")
_LOC_PART = re.compile(r"'((?:[^'\\]|\\.)*)'|(\d+)")


def validation_issues(payload: Any, message: str) -> list[tuple[str, str, str]]:
    """The (field, message, kind) of each request-body field a validation error names: FastAPI's
    own answer (`{"detail": [{"loc": ["body", ...], "msg", "type"}]}`, HTTP 422) or its text
    inside another error's message (llama-cpp-python's HTTP 500). Empty when it is none: only a
    `loc` inside `body` counts, so a 422 of another kind is not read as one."""
    found: list[tuple[list[Any], str, str]] = []
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if isinstance(detail, list):
        for item in detail:
            if isinstance(item, dict) and isinstance(item.get("loc"), list):
                msg, kind = item.get("msg"), item.get("type")
                found.append((item["loc"], str(msg or ""), str(kind or "")))
    elif _VALIDATION.match(message.lstrip()):
        for entry in message.split("\n")[1:]:
            loc, msg, kind = _LOC.search(entry), _MSG.search(entry), _TYPE.search(entry)
            if loc is None:
                continue
            parts: list[Any] = [q if n == "" else int(n) for q, n in _LOC_PART.findall(loc[1])]
            text = ""
            if msg is not None:
                try:
                    text = str(ast.literal_eval(msg[1]))
                except (ValueError, SyntaxError):
                    text = msg[1][1:-1]
            found.append((parts, text, kind[1] if kind else ""))
    return [
        (".".join(str(part) for part in loc[1:]), msg, kind)
        for loc, msg, kind in found
        if len(loc) > 1 and loc[0] == "body"
    ]
