"""What went wrong with a server, in the sentence the model (or the developer) reads.

Every text passes through the endpoint's `clean`, so a credential the server reflects in an
error (a 401 page quoting the token, say) never reaches a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._compat import is_connection_closed, mcp_error_class
from ._session import Connection, Endpoint


def describe_failure(
    conn: Connection, status: str, value: Any, tool: str | None, restarts: int, max_restarts: int
) -> str:
    """What the model reads when a request came back `status` (not "ok"), the server having
    been restarted `restarts` times of `max_restarts`."""
    ep = conn.endpoint
    what = f"Tool `{tool}`" if tool else "The request"
    if status == "timeout":
        return (
            f"{what} on MCP server `{ep.name}` timed out after {ep.call_timeout:g} s "
            "(call_timeout) and was cancelled. Try smaller input, a different tool, or "
            "explain the failure to the user."
        )
    if status == "lost":
        if not conn.loss:
            conn.set_loss()
        note = f" ({conn.loss_detail})" if conn.loss_detail else ""
        again = "reconnected" if ep.url else "restarted"
        left = max_restarts - restarts
        then = (
            f"It will be {again} for the next tool call ({left} attempt(s) left)."
            if left > 0
            else f"It will not be {again} again (max_restarts={max_restarts})."
        )
        return f"{what} did not finish: {conn.loss} while running this call{note}. {then}"
    if status == "closed":
        return f"{what} did not finish: the MCP source `{ep.name}` was closed during the call."
    exc = value if isinstance(value, BaseException) else None
    if exc is not None and isinstance(exc, mcp_error_class()):
        code = getattr(exc, "code", "")
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return (
            f"{what} failed: MCP server `{ep.name}` answered with a protocol error "
            f"(code {code}): {ep.clean(message, 1000)}. Fix the arguments, try a different "
            "tool, or explain the failure to the user."
        )
    detail = f"{type(exc).__name__}: {exc}" if exc else str(value)
    return (
        f"{what} failed on MCP server `{ep.name}`: {ep.clean(detail, 1000)}. Try a different "
        "tool or explain the failure to the user."
    )


def start_failure(conn: Connection, cause: str) -> str:
    ep = conn.endpoint
    tail = conn.read_stderr_tail()
    text = f"cannot start MCP server `{ep.name}` ({ep.target}): {cause}"
    if tail:
        text += f"; its stderr ends with: {tail}"
    return text


def describe_start_error(ep: Endpoint, exc: BaseException, http_status: int | None = None) -> str:
    if http_status in (401, 403):
        given = "the headers= given" if ep.headers else "no credentials (pass headers=)"
        word = "Unauthorized" if http_status == 401 else "Forbidden"
        return f"the server refused the connection with HTTP {http_status} {word}: check {given}"
    if http_status is not None and ep.url:
        return (
            f"the server answered HTTP {http_status} ({ep.clean(str(exc) or type(exc).__name__)})"
        )
    if isinstance(exc, FileNotFoundError):
        missing = exc.filename or (ep.command[0] if ep.command else "")
        if ep.cwd and not Path(ep.cwd).is_dir():
            return f"the working directory {ep.cwd} does not exist"
        return f"command not found: {missing}"
    if isinstance(exc, PermissionError):
        return f"permission denied running {exc.filename or ep.command[0]}"
    if isinstance(exc, OSError):
        return ep.clean(exc.strerror or str(exc) or type(exc).__name__)
    if is_connection_closed(exc):
        return "the server exited during startup" if ep.command else "the connection closed"
    text = str(exc).strip() or type(exc).__name__
    return ep.clean(f"{type(exc).__name__}: {text}" if ep.url else text)
