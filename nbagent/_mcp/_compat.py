"""What differs between mcp 1.x and 2.x, and the small text helpers the MCP modules share."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from .._core._words import shortened

__all__ = [
    "attr",
    "braces",
    "is_connection_closed",
    "mcp_error_class",
    "one_line",
    "preload",
    "unwrap",
]


def mcp_error_class() -> type[Exception]:
    try:
        from mcp.shared.exceptions import MCPError  # mcp >= 2

        return MCPError
    except ImportError:  # pragma: no cover - mcp 1.x
        from mcp.shared import exceptions

        return cast("type[Exception]", exceptions.McpError)  # type: ignore[attr-defined]


def _connection_closed_code() -> int:
    from mcp import types

    return int(getattr(types, "CONNECTION_CLOSED", -32000))


def is_connection_closed(exc: Any) -> bool:
    """The SDK's "connection closed" error: the server (or its stream) went away."""
    code = _connection_closed_code()
    return isinstance(exc, mcp_error_class()) and (
        getattr(exc, "code", None) == code
        or getattr(getattr(exc, "error", None), "code", None) == code
    )


def attr(obj: Any, *names: str, default: Any = None) -> Any:
    """A field under its mcp 2 (snake_case) or mcp 1 (camelCase) name."""
    for n in names:
        value = getattr(obj, n, None)
        if value is not None:
            return value
    return default


def unwrap(exc: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups from anyio task groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, (list, tuple)) or not inner:
            return exc
        real = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        exc = real[0] if real else inner[0]


def one_line(text: str, limit: int = 300) -> str:
    return shortened(" ".join(text.split()), limit)


def braces(text: str) -> str:
    """Escape text for use inside a `str.format` template."""
    return text.replace("{", "{{").replace("}", "}}")


def preload() -> None:
    """Import the SDK (a second or so the first time), meant to run off the event loop."""
    import importlib

    for module in ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "jsonschema"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
