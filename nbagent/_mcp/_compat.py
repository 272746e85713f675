"""The SDK's error types, imported late, and the small helpers the MCP modules share."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.shared.exceptions import MCPError


def mcp_error_class() -> type[MCPError]:
    from mcp.shared.exceptions import MCPError  # imported late: the SDK takes a second

    return MCPError


def is_connection_closed(exc: Any) -> bool:
    """The SDK's "connection closed" error: the server (or its stream) went away."""
    from mcp import types

    return isinstance(exc, mcp_error_class()) and exc.code == types.CONNECTION_CLOSED


def unwrap(exc: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups from anyio task groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, (list, tuple)) or not inner:
            return exc
        real = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        exc = real[0] if real else inner[0]


def preload() -> None:
    """Import the SDK (a second or so the first time), meant to run off the event loop."""
    import importlib

    for module in ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "jsonschema"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
