"""Secrets in how a server is reached (a token in its command line, its URL or its headers),
kept out of every message, log line and repr the source produces."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from ..providers._http_errors import redact

__all__ = ["header_secrets", "redact_argv", "redact_url", "scrub"]

_SECRET = re.compile(r"(key|token|secret|passw|auth|bearer|credential)", re.IGNORECASE)


def redact_argv(argv: list[str]) -> list[str]:
    """`--api-key X`, `--token=X`, `API_KEY=X` and bearer-like values become `***`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("-"):
            out.append("***")
            hide_next = False
            continue
        hide_next = False
        flag, eq, _value = arg.partition("=")
        if _SECRET.search(flag):
            if eq:
                out.append(f"{flag}=***")
                continue
            hide_next = arg.startswith("-")
        out.append(arg)
    return out


def redact_url(url: str) -> str:
    parsed = urlparse(url)
    netloc = parsed.netloc.rpartition("@")[2]
    query = "?***" if parsed.query else ""
    return f"{parsed.scheme}://{netloc}{parsed.path}{query}"


def header_secrets(headers: Mapping[str, str]) -> tuple[str, ...]:
    """Every header value is treated as a secret, and the token after a scheme word too
    (`Bearer sk-...` leaks as `sk-...` as easily as whole)."""
    out: list[str] = []
    for value in headers.values():
        out.append(value)
        scheme, _, token = value.partition(" ")
        if token.strip() and scheme.isalpha():
            out.append(token.strip())
    return tuple(sorted({s for s in out if s}, key=len, reverse=True))


def scrub(text: Any, secrets: tuple[str, ...]) -> Any:
    """`text` (or a list / dict of texts) with every secret replaced by `***`; call it before
    cutting text short, so no cut can leave part of a secret behind."""
    return redact(text, secrets)
