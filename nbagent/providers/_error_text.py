"""What an error's words, text and headers say, read the same way for every wire format.

The words of providers' error bodies that say which failure it is (error codes and types,
message markers, the fields of a refused output schema): `_http_errors` reads a body against
these tables, the one place to add a provider's words (a new code for a failure kind).

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
from ._parts import json_object
from ._server_wish import unprefixed

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

# -- the words of error bodies: which failure an answer is --------------------------------

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

QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "enforced_spend_limit_reached",
        "billing_error",
        "billing_hard_limit_reached",
        "insufficient_credits",
        "payment_required",
        "budget_exceeded",
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
# "Not found" in each dialect: Anthropic's type, OpenAI's code (the Responses API sends it with
# HTTP 400), Azure's deployment, Gemini's `NOT_FOUND` status, vLLM's and LiteLLM's exception name.
# Read whatever the status, so a fallback chain moves on from a model the server does not have.
NOT_FOUND_CODES = frozenset(
    {
        "not_found_error",
        "model_not_found",
        "deploymentnotfound",
        "not_found",
        "notfounderror",
        "model_not_available",
    }
)
# OpenRouter names an unknown model in its message only (`{"code": 400, "message": "x is not a
# valid model ID"}`); Ollama says `model "x" not found, try pulling it first`.
NOT_FOUND_MARKERS = ("is not a valid model id", "try pulling it first")
FILTER_CODES = frozenset(
    {"content_filter", "content_policy_violation", "content_filtered", "moderation", "safety"}
)
# Where a provider's 400 says the output schema is what it refuses (the field it names in
# `param`, or the start of its message): OpenAI Chat `response_format` ("Invalid schema for
# response_format 'X': ...", param response_format), the Responses API `text.format.schema`,
# Anthropic `output_config.format.schema: Invalid schema: ...` (and the beta `output_format`),
# Gemini `generation_config.response_schema` / `response_json_schema` ("Invalid JSON payload
# received. Unknown name ... at 'generation_config.response_schema'"), and Gemini 2.x refusing
# JSON mode beside function calling ("Function calling with a response mime type:
# 'application/json' is unsupported", googleapis/python-genai#867).
OUTPUT_SCHEMA_FIELDS = (
    "response_format",
    "text.format",
    "output_config.format",
    "output_format",
    "generation_config.response_schema",
    "generation_config.response_json_schema",
    "generationconfig.responseschema",
    "generationconfig.responsejsonschema",
)
OUTPUT_SCHEMA_TEXT = re.compile(
    r"invalid schema for response_format|with a response mime type|(^|[\s'\"])("
    + "|".join(re.escape(f) for f in OUTPUT_SCHEMA_FIELDS)
    + r")\b",
    re.I,
)
SCHEMA_HINT = (
    " The output schema (output=), or the form it was sent in, is what the provider refused: "
    "change it as the message says, or pass output_mode='auto' (it tries the other forms this "
    "server may take, down to a tool), 'tool' or 'prompted'."
)

# Codes distinctive enough to count when a gateway mentions them anywhere in its message text.
TEXT_CODES = sorted(
    c
    for c in QUOTA_CODES
    | CONTEXT_CODES
    | OVERLOADED_CODES
    | RATE_CODES
    | AUTH_CODES
    | NOT_FOUND_CODES
    | FILTER_CODES
    if "_" in c
)
TEXT_CODE = re.compile(r"\b(" + "|".join(map(re.escape, TEXT_CODES)) + r")\b")

_KEPT_PREFIXES = ("retry-after", "anthropic-ratelimit-", "x-ratelimit-")
_REQUEST_ID_HEADERS = ("request-id", "x-request-id", "apim-request-id")  # the first set counts
_KEPT_NAMES = frozenset({"x-should-retry", *_REQUEST_ID_HEADERS})


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
    h = {k.lower(): v for k, v in headers.items()}
    doc = body if isinstance(body, dict) else {}
    said = [h.get(name) for name in _REQUEST_ID_HEADERS]  # the first header set counts
    said += [doc.get("request_id"), json_object(doc, "error").get("request_id")]
    rid = next((r for r in said if isinstance(r, str) and r), None)
    return None if rid is None else str(redact(rid, secrets))


def should_retry_from(headers: Mapping[str, str]) -> bool | None:
    """The server's `x-should-retry: true|false` verdict, or None."""
    said = {k.lower(): v for k, v in headers.items()}.get("x-should-retry", "").strip().lower()
    return said == "true" if said in ("true", "false") else None


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


def context_numbers(message: str) -> tuple[int | None, int | None]:
    """(tokens, limit) named by a context-overflow message, each None when it does not say."""
    for pattern in _PAIR_PATTERNS:
        m = pattern.search(message)
        if m:
            return _number(m), _number(m, 2)
    return _first(_TOKENS_PATTERNS, message), _first(_LIMIT_PATTERNS, message)


def _first(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    """The number the first of `patterns` that matches names, or None."""
    found = (m for m in (p.search(message) for p in patterns) if m)
    return next((_number(m) for m in found), None)


def _number(match: re.Match[str], group: int = 1) -> int:
    """The count a pattern's group holds (digits, thousands maybe separated by commas)."""
    return int(match.group(group).replace(",", ""))


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
