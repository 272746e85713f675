"""Secrets in how a server is reached (a token in its command line, its URL or its headers),
kept out of every message, log line and repr the source produces."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

from ..providers._error_text import redact

_SECRET = re.compile(r"(key|token|secret|passw|auth|bearer|credential)", re.IGNORECASE)


def redact_argv(argv: list[str]) -> list[str]:
    """`--api-key X`, `--token=X`, `API_KEY=X` and bearer-like values become `***`."""
    out: list[str] = []
    hide_next = False  # the argument before was a secret's flag (`--token X`)
    for arg in argv:
        flag, eq, _value = arg.partition("=")
        secret = _SECRET.search(flag) is not None
        if hide_next and not arg.startswith("-"):
            out.append("***")
        else:
            out.append(f"{flag}=***" if secret and eq else arg)
        hide_next = secret and not eq and arg.startswith("-")
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


# -- the SDK's own log lines -----------------------------------------------------------------------

_LOGGED_SECRETS: set[str] = set()
_STACK = ("mcp", "httpx", "httpcore", "httpx2", "httpcore2", "nbagent")


class _ScrubSecrets(logging.Filter):
    """Masks the credentials of MCP sources in log records. At DEBUG the SDK logs what the
    server sent (a tool result, a 401's headers): a server that echoes its token would put it
    in the user's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _LOGGED_SECRETS:
            text = record.getMessage()
            clean = redact(text, sorted(_LOGGED_SECRETS, key=len, reverse=True))
            if clean != text:
                record.msg, record.args = clean, ()
        return True


_FILTER = _ScrubSecrets()


def guard_logs(secrets: Iterable[str]) -> None:
    """Mask these secrets in the records of every logger of the MCP and HTTP stacks that exists
    now (a filter acts only on its own logger's records, so each gets one)."""
    _LOGGED_SECRETS.update(s for s in secrets if s)
    if not _LOGGED_SECRETS:
        return
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (
            isinstance(logger, logging.Logger)
            and name.split(".")[0] in _STACK
            and _FILTER not in logger.filters
        ):
            logger.addFilter(_FILTER)
