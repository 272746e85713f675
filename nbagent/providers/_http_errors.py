"""HTTP status, error body, headers and mid-stream error events -> a typed `ProviderError`.

Every wire format (Anthropic Messages; OpenAI Chat Completions and Responses with the Azure,
OpenRouter, Ollama, llama.cpp and vLLM dialects; Gemini) comes through here, so the table of
DESIGN.md ("The four actions") is applied to provider answers in exactly one place. The error keeps
the provider's own message ("prompt is too long: 203042 tokens > 200000 maximum"), its request id,
the server's retry wish (`_server_wish.server_wish`, or Gemini's `RetryInfo` in the body), the
`x-should-retry` verdict and the rate-limit headers, and never an API key: every text that leaves
this module goes through `redact`.

Behind a gateway (the LiteLLM proxy) the upstream's error arrives flattened into the gateway's
message text (`"litellm.RateLimitError: AnthropicException - b'{...}'"`): the JSON object inside
is read like a body of its own, and known error codes are looked for in the text, so a spend
limit behind a gateway is still `QuotaExceeded` and not retried.
"""

from __future__ import annotations

import http
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import errors
from ..errors import ProviderError
from ._error_text import (
    ANTHROPIC_TYPE_STATUS,
    AUTH_CODES,
    CONTEXT_CODES,
    FILTER_CODES,
    MAX_TEXT_BODY_CHARS,
    NOT_FOUND_CODES,
    NOT_FOUND_MARKERS,
    OUTPUT_SCHEMA_FIELDS,
    OUTPUT_SCHEMA_TEXT,
    OVERLOADED_CODES,
    QUOTA_CODES,
    QUOTA_MARKERS,
    RATE_CODES,
    SCHEMA_HINT,
    TEXT_CODE,
    context_numbers,
    is_context_overflow,
    kept_headers,
    redact,
    request_id_from,
    short,
    should_retry_from,
    text_message,
    validation_issues,
)
from ._google_rpc import AUTH_REASONS, GoogleDetails, google_details, seconds_to_reset
from ._parts import json_object, json_or_none, whole_number
from ._server_wish import server_wish, wish_in_text

# What a mid-stream error keeps of its class; everything else means "the stream broke".
_MIDSTREAM_KEEP: tuple[type[ProviderError], ...] = (
    errors.RateLimited,
    errors.Overloaded,
    errors.ContentFiltered,
    errors.ContextOverflow,
)


_PHRASES = {s.value: s.phrase for s in http.HTTPStatus}  # "Not Found", by status

# -- body parsing ---------------------------------------------------------------------------


@dataclass
class _Parsed:
    message: str = ""
    code: str | None = None  # the string code, or the error type
    codes: set[str] = field(default_factory=set)  # every code-like string, lowercased
    numeric: int | None = None  # a numeric code (OpenRouter, llama.cpp, vLLM, Gemini)
    tokens: int | None = None
    limit: int | None = None
    flagged: bool = False
    google: GoogleDetails = field(default_factory=GoogleDetails)
    upstream_status: int | None = None  # the status a gateway's flattened upstream error names
    param: str = ""  # the request field an OpenAI-style error names
    body: Any = None
    invalid: bool = False  # the request body failed the server's validation (FastAPI's)


def _error_object(payload: dict[str, Any]) -> dict[str, Any]:
    err: Any = payload.get("error")
    if isinstance(err, str):  # Ollama's native API, some proxies
        return {"message": err}
    if isinstance(err, dict):
        return err
    # vLLM's older shape and the Responses `error` event's documented flat shape:
    # {"message", "type", "code"} at the top; FastAPI's "detail"
    if isinstance(payload.get("message"), str) or "code" in payload:
        return payload
    if isinstance(payload.get("detail"), str):
        return {"message": payload["detail"]}
    return {}


def _parse_payload(payload: Any, *, nested: bool = False) -> _Parsed:
    p = _Parsed(body=payload)
    if not isinstance(payload, dict):
        if isinstance(payload, str):
            p.message = text_message(payload)
        return p
    err = _error_object(payload)
    message = err.get("message")
    p.message = message if isinstance(message, str) else ""
    code = err.get("code")
    etype = err.get("type")
    if isinstance(err.get("param"), str):
        p.param = err["param"]
    p.numeric = whole_number(code)
    if p.numeric is None and isinstance(code, str) and code:
        p.code = code
        p.codes.add(code.lower())
    if isinstance(etype, str) and etype:
        p.codes.add(etype.lower())
        if p.code is None and etype.lower() not in ("error", "object"):
            p.code = etype
    details = json_object(err, "details")
    dcode = details.get("error_code") or details.get("code")
    if isinstance(dcode, str) and dcode:
        p.codes.add(dcode.lower())
        if p.code is None or p.code.endswith("_error"):
            p.code = dcode
    p.google = google_details(err, p.message)
    if p.google.is_google:
        p.codes |= p.google.extra_codes
        reason = next(iter(sorted(p.google.reasons)), "")
        p.code = reason.upper() if reason else (p.google.status or p.code)
    metadata = json_object(err, "metadata")  # OpenRouter's
    raw = metadata.get("raw")
    who = metadata.get("provider_name")
    if isinstance(raw, str) and raw.strip():
        suffix = f" ({who})" if isinstance(who, str) and who else ""
        p.message = f"{p.message}{suffix}: {raw.strip()}" if p.message else raw.strip()
    p.flagged = bool(metadata.get("reasons") or metadata.get("flagged_input"))
    # llama.cpp names both numbers in fields of its own
    p.tokens = whole_number(err.get("n_prompt_tokens"))
    p.limit = whole_number(err.get("n_ctx"))
    issues = validation_issues(payload, p.message)
    if issues:  # a request the server's model refused: name the fields, whatever the status
        p.invalid, p.param, p.code = True, issues[0][0], issues[0][2] or "validation_error"
        said = "; ".join(f"{where}: {what}" for where, what, _ in issues)
        p.message = f"the request failed the server's validation: {said}."
    elif not nested:
        _read_flattened(p)
    p.message = short(p.message)
    return p


def _embedded_json(text: str) -> Any:
    """The JSON object a gateway flattened into its message (`... - b'{...}'`), or None."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    chunk = text[start : end + 1]
    # a Python bytes repr (b'...') escapes quotes that JSON does not
    for candidate in (chunk, chunk.replace("\\'", "'"), chunk.replace('\\"', '"')):
        value = json_or_none(candidate)
        if isinstance(value, dict):
            return value
    return None


def _read_flattened(p: _Parsed) -> None:
    """What an upstream error flattened into this one's message says (a gateway's answer)."""
    inner = _embedded_json(p.message)
    if inner is not None:
        q = _parse_payload(inner, nested=True)
        p.codes |= q.codes
        p.flagged = p.flagged or q.flagged
        if not p.google.is_google and q.google.is_google:
            p.google = q.google
        if q.code and (p.code is None or p.code.endswith("_error") or p.code.isdigit()):
            p.code = q.code
        p.param = p.param or q.param
        p.tokens = q.tokens if p.tokens is None else p.tokens
        p.limit = q.limit if p.limit is None else p.limit
        p.upstream_status = _status_of(q)
    found = set(TEXT_CODE.findall(p.message.lower()))
    p.codes |= found
    specific = sorted(found & (QUOTA_CODES | CONTEXT_CODES))
    if specific and (p.code is None or p.code.endswith("_error") or p.code.isdigit()):
        p.code = specific[0]


def _status_of(p: _Parsed) -> int | None:
    """The HTTP status an error object names: its numeric code, or Anthropic's type."""
    if p.numeric is not None and 400 <= p.numeric < 600:
        return p.numeric
    typed = (ANTHROPIC_TYPE_STATUS[c] for c in sorted(p.codes) if c in ANTHROPIC_TYPE_STATUS)
    return next(typed, None)


def _decode_body(body: bytes | str | Any) -> Any:
    """A body as JSON, or its text (capped) when it is not JSON; a decoded one as it is."""
    if not isinstance(body, (bytes, bytearray, str)):
        return body
    text = body if isinstance(body, str) else bytes(body).decode("utf-8", errors="replace")
    value = json_or_none(text)
    return text[:MAX_TEXT_BODY_CHARS] if value is None else value


# -- classification --------------------------------------------------------------------------


def _google_class(status: int | None, g: GoogleDetails) -> type[ProviderError] | None:
    """Gemini's answers, read by their `google.rpc` status and details first."""
    if not g.is_google:
        return None
    if g.reasons & AUTH_REASONS:
        return errors.AuthFailed
    if g.status == "RESOURCE_EXHAUSTED" and status in (None, 429):
        return errors.QuotaExceeded if g.final_quota else errors.RateLimited
    if g.status == "UNAVAILABLE" and status in (None, 503):
        return errors.Overloaded
    return None


def _error_class(status: int | None, p: _Parsed) -> type[ProviderError]:
    codes = p.codes
    low = p.message.lower()
    google = _google_class(status, p.google)
    if google is not None:
        return google
    if p.invalid:  # the request itself: sending it again gets the same answer
        return errors.SchemaRejected if _rejects_output_schema(p) else errors.BadRequest
    if status == 529 or codes & OVERLOADED_CODES:
        return errors.Overloaded
    if codes & FILTER_CODES or (status == 403 and p.flagged):
        return errors.ContentFiltered
    if status == 402 or codes & QUOTA_CODES:
        return errors.QuotaExceeded
    if status in (400, 403, 429) and any(m in low for m in QUOTA_MARKERS):
        return errors.QuotaExceeded
    if status == 429 or (status is None and codes & RATE_CODES):
        return errors.RateLimited
    if status == 404 or codes & NOT_FOUND_CODES or any(m in low for m in NOT_FOUND_MARKERS):
        return errors.ModelNotFound
    if status in (401, 403) or (status is None and codes & AUTH_CODES):
        return errors.AuthFailed
    if (status is None or 400 <= status < 500) and is_context_overflow(p.message, codes):
        return errors.ContextOverflow
    if status in (400, 422) and _rejects_output_schema(p):
        return errors.SchemaRejected
    if status is None:
        return errors.StreamInterrupted
    if status == 413:
        return errors.BadRequest
    if status in (408, 409, 425) or status >= 500:
        return errors.ServerError
    if 400 <= status < 500:
        return errors.BadRequest
    return errors.InvalidResponse


def status_class(status: int) -> type[ProviderError]:
    """The error class of an HTTP `status` whose body says nothing more."""
    return _error_class(status, _Parsed())


def _rejects_output_schema(p: _Parsed) -> bool:
    """A 400 about the output schema: the field it names, or its message's first words."""
    param = p.param.lower()
    if any(param == f or param.startswith(f + ".") for f in OUTPUT_SCHEMA_FIELDS):
        return True
    return bool(OUTPUT_SCHEMA_TEXT.search(p.message))


def _build(
    cls: type[ProviderError],
    p: _Parsed,
    *,
    provider: str,
    status: int | None,
    headers: Mapping[str, str],
    secrets: Iterable[str],
    model: str | None = None,
) -> ProviderError:
    """The `cls` error of what `p` read (its message already the fallback when it had none)."""
    secrets = tuple(secrets)
    message = redact(p.message, secrets)
    if cls is errors.SchemaRejected:
        message = message.rstrip() + SCHEMA_HINT
    retry_after = server_wish(headers)
    if retry_after is None:
        retry_after = p.google.retry_delay
    if retry_after is None and cls is errors.RateLimited:
        retry_after = wish_in_text(p.message)
    if cls is errors.QuotaExceeded and p.google.final_quota:
        # a daily (or zero) quota: the sentence says which and when it resets; the short
        # retryDelay that came with it would only lead to a futile retry
        message = redact(p.google.quota_sentence(model or ""), secrets)
        retry_after = None if p.google.limit_zero else seconds_to_reset()
    kwargs: dict[str, Any] = {
        "provider": provider,
        "status_code": status,
        "code": redact(p.code, secrets),
        "request_id": request_id_from(headers, p.body, secrets),
        "retry_after": retry_after,
        "should_retry": should_retry_from(headers),
        "headers": kept_headers(headers, secrets),
        "body": redact(p.body, secrets),
    }
    if cls is errors.ContextOverflow:
        tokens, limit = context_numbers(p.message)
        kwargs["tokens"] = tokens if p.tokens is None else p.tokens
        kwargs["limit"] = limit if p.limit is None else p.limit
    return cls(message, **kwargs)


def error_from_response(
    provider: str,
    status: int,
    body: bytes | str | Any,
    headers: Mapping[str, str],
    *,
    secrets: Iterable[str] = (),
    model: str | None = None,
) -> ProviderError:
    """The typed error for an HTTP answer that is not a success.

    `body` is the raw bytes (or text, or an already decoded JSON value). A 2xx whose JSON
    carries an `error` object is classified by the code inside it. `model` names the model
    asked for, for the sentences that mention it (Gemini's daily quota).

    Args:
        provider: The provider's name, for the message.
        status: The HTTP status.
        body: The response body: bytes, text, or decoded JSON.
        headers: The response headers (Retry-After and the rate-limit ones are read).
        secrets: Strings to blank out of the message (the key), should a server echo them.
        model: The model asked for, or None.

    Returns:
        The `ProviderError` subclass of the failure-to-action table, with its status, code,
        request id and server wish filled in.
    """
    p = _parse_payload(_decode_body(body))
    effective = status
    if status >= 500 and p.upstream_status is not None:
        # a gateway that answers 500 for its upstream's 402 or 403: the upstream's status counts
        effective = p.upstream_status
    if 200 <= status < 300:
        if p.numeric is not None and 400 <= p.numeric < 600:
            effective = p.numeric
        else:
            effective = 500 if p.message else 0
    if 300 <= status < 400:
        location = {k.lower(): v for k, v in headers.items()}.get("location", "")
        fallback = f"unexpected redirect (HTTP {status}) to {location or 'nowhere'}; check base_url"
        p.message = p.message or fallback
        cls: type[ProviderError] = errors.BadRequest
    elif effective == 0:
        cls = errors.InvalidResponse
    else:
        cls = _error_class(effective, p)
    p.message = p.message or _PHRASES.get(status, f"HTTP {status}")
    return _build(
        cls, p, provider=provider, status=status, headers=headers, secrets=secrets, model=model
    )


def error_from_payload(
    provider: str,
    payload: Any,
    headers: Mapping[str, str],
    *,
    secrets: Iterable[str] = (),
    model: str | None = None,
    fallback_message: str = "the provider sent an error event mid-stream",
) -> ProviderError:
    """The typed error for an error that arrived inside a 200 stream.

    Anthropic's `event: error`, OpenAI's `data: {"error": ...}`, OpenRouter's chunks with an
    `error` object, the Responses API's `error` event and `response.failed`, Gemini's error
    chunk. Rate limits, quotas, overload, content filters and context overflow keep their class;
    anything else (5xx, `api_error`, `server_error`, unknown) means the stream broke:
    `StreamInterrupted`.

    Args:
        provider: The provider's name, for the message.
        payload: The decoded error event.
        headers: The response headers of the stream.
        secrets: Strings to blank out of the message.
        model: The model asked for, or None.
        fallback_message: The message when the payload carries none.

    Returns:
        The typed error.
    """
    p = _parse_payload(payload)
    status = _status_of(p)
    if status is not None and status >= 500 and p.upstream_status is not None:
        status = p.upstream_status
    cls = _error_class(status, p)
    if not issubclass(cls, _MIDSTREAM_KEEP):
        cls = errors.StreamInterrupted
    p.message = p.message or fallback_message
    status = p.numeric if p.numeric is not None and 100 <= p.numeric < 600 else None
    return _build(
        cls, p, provider=provider, status=status, headers=headers, secrets=secrets, model=model
    )
