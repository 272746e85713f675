"""What a recording keeps of an exchange, and what it never keeps.

Headers pass an allow-list, never a deny-list: a header that is not named here (an API key, an
auth header, a cookie, an MCP session header, or one that nobody has thought of yet) does not
reach the file. The query string of the path passes the same way (Gemini takes `?key=`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

FORMAT = "nbagent-recording"
"""The `format` the header line names: a file without it is not a recording."""
VERSION = 1
"""The layout version written; a file of a newer one is refused (never guessed at)."""
SUFFIX = ".nbrec"
"""The usual file suffix of a recording (`replay:NAME` looks for NAME + SUFFIX)."""

KEY_HEADERS = ("x-api-key", "x-goog-api-key", "api-key", "authorization")
"""The request headers a client's key travels in (Anthropic's, Gemini's, Azure's, a bearer
token), in the order a key is looked for; Gemini's may also come as ``?key=``."""
SECRET_HEADERS = (*KEY_HEADERS, "proxy-authorization", "openai-api-key")
"""The request headers whose value is a credential (a token, after a scheme such as "Bearer"):
never kept, and masked wherever a text may show it (the mock's request records, a watched
call's error and recording). A cookie is never kept either, but it is no token to mask in a
text: its pieces may be as short as "1"."""

KEPT_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "request-id",
        "x-request-id",
        "apim-request-id",
        "x-goog-request-id",
        "openai-processing-ms",
    }
)
"""Response headers kept by name (lowercase)."""

KEPT_FAMILIES = ("anthropic-ratelimit-", "x-ratelimit-")
"""Response header families kept by prefix: the providers' rate-limit headers."""

GATEWAY_PREFIXES = ("llm_provider-",)
"""A gateway's copies of the upstream's headers (LiteLLM): kept when the rest is kept."""

KEPT_QUERY = frozenset({"alt", "api-version"})
"""Query parameters kept in a recorded path; every other one (`key=...`) is dropped."""

_MODEL_IN_PATH = re.compile(r"/models/([^/:?]+)|/deployments/([^/?]+)")


def kept_header(name: str) -> bool:
    """Whether a response header may be written to a recording.

    Args:
        name: The header's name (a gateway's copy, "llm_provider-…" from LiteLLM, counts as
            the header it copies).

    Returns:
        True for the retry-relevant headers (Retry-After, rate-limit, request ids, content type);
            never for cookies or auth.
    """
    low = name.lower()
    low = next((low[len(p) :] for p in GATEWAY_PREFIXES if low.startswith(p)), low)
    return low in KEPT_HEADERS or low.startswith(KEPT_FAMILIES)


def kept_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The response headers a recording keeps, lowercased, in the order they came.

    Args:
        headers: Response headers, as a mapping or as pairs.

    Returns:
        The kept ones, names lowercased.
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {k.lower(): v for k, v in items if kept_header(k)}


def clean_path(url: str) -> str:
    """The path of `url` with only the allowed query parameters (no host, no key).

    Args:
        url: A request URL.

    Returns:
        Its path and kept query ("/v1/messages",
            "/v1beta/models/gemini:streamGenerateContent?alt=sse").
    """
    parts = urlsplit(url)
    path = parts.path or "/"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k in KEPT_QUERY]
    return path + ("?" + urlencode(query) if query else "")


def model_of(path: str, body: bytes | None) -> str | None:
    """The model a request asks for: `"model"` in its JSON body, else the path's
    (`/models/{model}:...` for Gemini, `/deployments/{name}/` for Azure).

    Args:
        path: The request's path.
        body: The request's body, or None.

    Returns:
        The model's name, or None when neither says.
    """
    doc = json_or_none(body) if body else None
    if isinstance(doc, dict) and isinstance(doc.get("model"), str):
        return str(doc["model"])
    found = _MODEL_IN_PATH.search(urlsplit(path).path)
    if found:
        return found.group(1) or found.group(2)
    return None


def digest(body: bytes) -> str:
    """The body's fingerprint: a retry sends the same snapshot, so it has the same digest."""
    return hashlib.sha256(body).hexdigest()


def redact_bytes(data: bytes, secrets: tuple[bytes, ...]) -> bytes:
    """`data` with each secret, and any piece of one (8 bytes or more) cut by a chunk's edge,
    replaced by asterisks."""
    for secret in secrets:
        if secret in data:
            data = data.replace(secret, b"***")
        data = _mask_edges(data, secret)
    return data


def _mask_edges(data: bytes, secret: bytes) -> bytes:
    """Mask the start of `secret` ending the chunk, and its end starting it (8 bytes or more:
    the next or the last chunk holds the rest). Two searches with an 8-byte needle."""
    n = len(secret)
    if n < 8 or len(data) < 8:
        return data
    head = secret[:8]
    i = data.find(head, max(0, len(data) - n + 1))
    while i != -1:
        if secret.startswith(data[i:]):
            data = data[:i] + b"*" * (len(data) - i)
            break
        i = data.find(head, i + 1)
    first = data[:8]
    k = secret.find(first, 1)
    while k != -1 and n - k >= 8:
        tail = secret[k:]
        if data.startswith(tail):
            return b"*" * len(tail) + data[len(tail) :]
        k = secret.find(first, k + 1)
    return data


def json_or_none(raw: bytes) -> Any:
    """`raw` parsed as JSON; None when it is not JSON (or not text)."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def jsonable_body(body: bytes) -> Any:
    """A request body as it goes into a recording with `record_bodies=True`: its JSON, or its
    text when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return body.decode("utf-8", errors="replace")
