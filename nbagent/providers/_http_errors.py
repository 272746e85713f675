"""HTTP status, error body, headers and mid-stream error events -> a typed `ProviderError`.

Both wire formats (Anthropic Messages and OpenAI Chat Completions, with the OpenRouter, Ollama,
llama.cpp and vLLM dialects) come through here, so the table of DESIGN.md ("The four actions")
is applied to provider answers in exactly one place. The error keeps the provider's own message
("prompt is too long: 203042 tokens > 200000 maximum"), its request id, the server's retry wish
(`_server_wish.server_wish`), the `x-should-retry` verdict and the rate-limit headers, and
never an API key: every text that leaves this module goes through `redact`.
"""

from __future__ import annotations

import html
import http
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    AuthFailed,
    BadRequest,
    ContentFiltered,
    ContextOverflow,
    InvalidResponse,
    ModelNotFound,
    Overloaded,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    ServerError,
    StreamInterrupted,
)
from ._server_wish import server_wish

__all__ = [
    "context_numbers",
    "error_from_payload",
    "error_from_response",
    "is_context_overflow",
    "kept_headers",
    "redact",
    "request_id_from",
    "should_retry_from",
]

MAX_MESSAGE_CHARS = 1000
MAX_TEXT_BODY_CHARS = 64 * 1024

# Anthropic names its errors by type only; mid-stream they come without an HTTP status.
ANTHROPIC_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

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
)
CONTEXT_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
)
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "enforced_spend_limit_reached",
        "billing_error",
        "billing_hard_limit_reached",
        "insufficient_credits",
        "payment_required",
    }
)
QUOTA_MARKERS = (
    "credit balance is too low",
    "insufficient credits",
    "exceeded your current quota",
    "spend limit",
    "billing",
)
OVERLOADED_CODES = frozenset({"overloaded_error", "overloaded"})
RATE_CODES = frozenset({"rate_limit_error", "rate_limit_exceeded", "rate_limited", "tokens"})
AUTH_CODES = frozenset(
    {"authentication_error", "permission_error", "invalid_api_key", "unauthorized"}
)
NOT_FOUND_CODES = frozenset({"not_found_error", "model_not_found"})
FILTER_CODES = frozenset(
    {"content_filter", "content_policy_violation", "content_filtered", "moderation", "safety"}
)

# What a mid-stream error keeps of its class; everything else means "the stream broke".
_MIDSTREAM_KEEP: tuple[type[ProviderError], ...] = (
    RateLimited,
    Overloaded,
    ContentFiltered,
    ContextOverflow,
)

_KEPT_PREFIXES = ("retry-after", "anthropic-ratelimit-", "x-ratelimit-")
_KEPT_NAMES = frozenset({"x-should-retry", "request-id", "x-request-id"})


# -- small helpers ---------------------------------------------------------------------------


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
    """The response headers that matter for retrying: rate limits, retry wishes, request ids."""
    out: dict[str, str] = {}
    for key, value in headers.items():
        k = key.lower()
        if k in _KEPT_NAMES or k.startswith(_KEPT_PREFIXES):
            out[k] = value
    return redact(out, secrets)  # type: ignore[no-any-return]


def request_id_from(
    headers: Mapping[str, str], body: Any = None, secrets: Iterable[str] = ()
) -> str | None:
    """`request-id` (Anthropic), `x-request-id` (OpenAI and most others), or the body's."""
    rid = _request_id(headers, body)
    return None if rid is None else str(redact(rid, secrets))


def _request_id(headers: Mapping[str, str], body: Any) -> str | None:
    h = {k.lower(): v for k, v in headers.items()}
    for name in ("request-id", "x-request-id"):
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
        if key.lower() == "x-should-retry":
            v = value.strip().lower()
            if v == "true":
                return True
            if v == "false":
                return False
    return None


_NUM = r"(\d[\d,]*)"
_PAIR_PATTERNS = (
    # Anthropic: "prompt is too long: 205429 tokens > 200000 maximum"
    (re.compile(_NUM + r"\s*tokens?\s*>\s*" + _NUM), "tokens", "limit"),
    # llama.cpp: "request (9000 tokens) exceeds the available context size (8192 tokens)"
    (
        re.compile(r"\(" + _NUM + r"\s*tokens?\)\s*exceeds.*?context size\s*\(" + _NUM),
        "tokens",
        "limit",
    ),
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
    for pattern, _, _ in _PAIR_PATTERNS:
        m = pattern.search(message)
        if m:
            return _int(m.group(1)), _int(m.group(2))
    tokens = limit = None
    for p in _TOKENS_PATTERNS:
        m = p.search(message)
        if m:
            tokens = _int(m.group(1))
            break
    for p in _LIMIT_PATTERNS:
        m = p.search(message)
        if m:
            limit = _int(m.group(1))
            break
    return tokens, limit


def is_context_overflow(message: str, codes: Iterable[str | None] = ()) -> bool:
    """True when a message or an error code says the prompt does not fit the context window."""
    if any(c and c.lower() in CONTEXT_CODES for c in codes):
        return True
    low = message.lower()
    return any(marker in low for marker in CONTEXT_MARKERS)


# -- body parsing ---------------------------------------------------------------------------


@dataclass
class _Parsed:
    message: str = ""
    code: str | None = None  # the string code, or the error type
    codes: set[str] = field(default_factory=set)  # every code-like string, lowercased
    numeric: int | None = None  # a numeric code (OpenRouter, llama.cpp, vLLM)
    tokens: int | None = None
    limit: int | None = None
    flagged: bool = False
    body: Any = None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _short(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = " ".join(text.split()) if "\n" in text else text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_message(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return ""
    if "<html" in stripped[:500].lower() or "<!doctype" in stripped[:100].lower():
        m = re.search(r"<title[^>]*>(.*?)</title>", stripped, re.I | re.S)
        if m:
            return _short(html.unescape(m.group(1)), 300)
        stripped = re.sub(r"<[^>]+>", " ", stripped)
    return _short(stripped, 300)


def _parse_payload(payload: Any) -> _Parsed:
    p = _Parsed(body=payload)
    if not isinstance(payload, dict):
        if isinstance(payload, str):
            p.message = _text_message(payload)
        return p
    err: Any = payload.get("error")
    if isinstance(err, str):  # Ollama's native API, some proxies
        err = {"message": err}
    if not isinstance(err, dict):
        # vLLM's older shape: {"object": "error", "message", "type", "code"}; FastAPI's "detail"
        if isinstance(payload.get("message"), str) or "code" in payload:
            err = payload
        elif isinstance(payload.get("detail"), str):
            err = {"message": payload["detail"]}
        else:
            err = {}
    message = err.get("message")
    p.message = message if isinstance(message, str) else ""
    code = err.get("code")
    etype = err.get("type")
    numeric = _as_int(code)
    if numeric is not None:
        p.numeric = numeric
    elif isinstance(code, str) and code:
        p.code = code
        p.codes.add(code.lower())
    if isinstance(etype, str) and etype:
        p.codes.add(etype.lower())
        if p.code is None and etype.lower() not in ("error", "object"):
            p.code = etype
    details = err.get("details")
    if isinstance(details, dict):
        dcode = details.get("error_code") or details.get("code")
        if isinstance(dcode, str) and dcode:
            p.codes.add(dcode.lower())
            if p.code is None or p.code.endswith("_error"):
                p.code = dcode
    metadata = err.get("metadata")
    if isinstance(metadata, dict):  # OpenRouter
        raw = metadata.get("raw")
        who = metadata.get("provider_name")
        if isinstance(raw, str) and raw.strip():
            suffix = f" ({who})" if isinstance(who, str) and who else ""
            p.message = f"{p.message}{suffix}: {raw.strip()}" if p.message else raw.strip()
        if metadata.get("reasons") or metadata.get("flagged_input"):
            p.flagged = True
    # llama.cpp names both numbers in fields of its own
    n_prompt = _as_int(err.get("n_prompt_tokens"))
    n_ctx = _as_int(err.get("n_ctx"))
    if n_prompt is not None:
        p.tokens = n_prompt
    if n_ctx is not None:
        p.limit = n_ctx
    p.message = _short(p.message)
    return p


def _decode_body(body: bytes | str | Any) -> Any:
    if isinstance(body, (bytes, bytearray)):
        text = bytes(body).decode("utf-8", errors="replace")
    elif isinstance(body, str):
        text = body
    else:
        return body
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text[:MAX_TEXT_BODY_CHARS]


# -- classification --------------------------------------------------------------------------


def _error_class(status: int | None, p: _Parsed) -> type[ProviderError]:
    codes = p.codes
    low = p.message.lower()
    if status == 529 or codes & OVERLOADED_CODES:
        return Overloaded
    if codes & FILTER_CODES or (status == 403 and p.flagged):
        return ContentFiltered
    if status == 402 or codes & QUOTA_CODES:
        return QuotaExceeded
    if status in (400, 403, 429) and any(m in low for m in QUOTA_MARKERS):
        return QuotaExceeded
    if status == 429 or (status is None and codes & RATE_CODES):
        return RateLimited
    if status in (401, 403) or (status is None and codes & AUTH_CODES):
        return AuthFailed
    if status == 404 or (status is None and codes & NOT_FOUND_CODES):
        return ModelNotFound
    if (status is None or 400 <= status < 500) and is_context_overflow(p.message, codes):
        return ContextOverflow
    if status is None:
        return StreamInterrupted
    if status == 413:
        return BadRequest
    if status in (408, 409, 425) or status >= 500:
        return ServerError
    if 400 <= status < 500:
        return BadRequest
    return InvalidResponse


def _build(
    cls: type[ProviderError],
    p: _Parsed,
    *,
    provider: str,
    status: int | None,
    headers: Mapping[str, str],
    secrets: Iterable[str],
    fallback_message: str,
) -> ProviderError:
    secrets = tuple(secrets)
    message = redact(p.message or fallback_message, secrets)
    kwargs: dict[str, Any] = {
        "provider": provider,
        "status_code": status,
        "code": redact(p.code, secrets),
        "request_id": request_id_from(headers, p.body, secrets),
        "retry_after": server_wish(headers),
        "should_retry": should_retry_from(headers),
        "headers": kept_headers(headers, secrets),
        "body": redact(p.body, secrets),
    }
    if cls is ContextOverflow:
        tokens, limit = context_numbers(p.message)
        return ContextOverflow(
            message,
            tokens=p.tokens if p.tokens is not None else tokens,
            limit=p.limit if p.limit is not None else limit,
            **kwargs,
        )
    return cls(message, **kwargs)


def error_from_response(
    provider: str,
    status: int,
    body: bytes | str | Any,
    headers: Mapping[str, str],
    *,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """The typed error for an HTTP answer that is not a success.

    `body` is the raw bytes (or text, or an already decoded JSON value). A 2xx whose JSON
    carries an `error` object is classified by the code inside it.
    """
    p = _parse_payload(_decode_body(body))
    effective = status
    if 200 <= status < 300:
        if p.numeric is not None and 400 <= p.numeric < 600:
            effective = p.numeric
        else:
            effective = 500 if p.message else 0
    if 300 <= status < 400:
        location = {k.lower(): v for k, v in headers.items()}.get("location", "")
        fallback = f"unexpected redirect (HTTP {status}) to {location or 'nowhere'}; check base_url"
        p.message = p.message or fallback
        cls: type[ProviderError] = BadRequest
    elif effective == 0:
        cls = InvalidResponse
    else:
        cls = _error_class(effective, p)
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = f"HTTP {status}"
    return _build(
        cls,
        p,
        provider=provider,
        status=status,
        headers=headers,
        secrets=secrets,
        fallback_message=phrase,
    )


def error_from_payload(
    provider: str,
    payload: Any,
    headers: Mapping[str, str],
    *,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """The typed error for an error that arrived inside a 200 stream.

    Anthropic's `event: error`, OpenAI's `data: {"error": ...}` and OpenRouter's chunks with an
    `error` object. Rate limits, overload, content filters and context overflow keep their class;
    anything else (5xx, `api_error`, unknown) means the stream broke: `StreamInterrupted`.
    """
    p = _parse_payload(payload)
    status = p.numeric if p.numeric is not None and 400 <= p.numeric < 600 else None
    if status is None:
        for c in sorted(p.codes):
            if c in ANTHROPIC_TYPE_STATUS:
                status = ANTHROPIC_TYPE_STATUS[c]
                break
    cls = _error_class(status, p)
    if not issubclass(cls, _MIDSTREAM_KEEP):
        cls = StreamInterrupted
    return _build(
        cls,
        p,
        provider=provider,
        status=p.numeric if p.numeric is not None and 100 <= p.numeric < 600 else None,
        headers=headers,
        secrets=secrets,
        fallback_message="the provider sent an error event mid-stream",
    )
