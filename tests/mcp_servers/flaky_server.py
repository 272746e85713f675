"""A misbehaving MCP server for nbagent's tests, spoken to over stdio (or streamable HTTP).

Tools: `echo(text)`, `fail(message)` (an isError result), `slow(seconds)`, `gate(key, count)`
(returns once `count` calls with the key run at once), `whoami()` (echoes the Authorization
header), `crash()` (the process dies mid-call), `protocol_error()` (a JSON-RPC error response), `image()` (image
content), `pid()` (so a test can kill the process from outside).

    python flaky_server.py                      # stdio
    python flaky_server.py --http PORT          # streamable HTTP on 127.0.0.1:PORT/mcp
    python flaky_server.py --http PORT --token T  # the same, requiring "Authorization: Bearer T"
    python flaky_server.py --exit-at-start      # dies before the handshake
    python flaky_server.py --hang-at-start      # never answers the handshake
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any

# A 1x1 transparent PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _server_class() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer  # mcp >= 2

        return MCPServer
    except ImportError:
        from mcp.server.fastmcp import FastMCP  # mcp 1.x

        return FastMCP


def _error_class() -> Any:
    try:
        from mcp.shared.exceptions import MCPError

        return MCPError
    except ImportError:
        from mcp.shared.exceptions import McpError

        return McpError


def _tool_error_class() -> Any:
    try:
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        from mcp.server.fastmcp.exceptions import ToolError
    return ToolError


def _context_class() -> Any:
    try:
        from mcp.server.mcpserver import Context
    except ImportError:
        from mcp.server.fastmcp import Context
    return Context


def require_token(app: Any, token: str) -> Any:
    """The app behind a bearer token; a wrong one gets a 401 page that quotes it back (as a
    careless server might), so a test can check that the client never repeats it."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            if got != f"Bearer {token}":
                body = f"invalid credentials: {got!r} is not accepted".encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer"),
                            (b"x-echo", got.encode("latin-1")),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def build() -> Any:
    import anyio
    from mcp import types

    server = _server_class()("flaky")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def fail(message: str) -> str:
        """Fail with an isError result carrying `message`."""
        raise _tool_error_class()(message)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then say so."""
        await anyio.sleep(seconds)
        return f"slept {seconds:g} s"

    gates: dict[str, tuple[list[int], anyio.Event]] = {}

    @server.tool()
    async def gate(key: str, count: int) -> str:
        """Wait until `count` calls with this key run at once (at most 30 s): "met" proves the
        calls ran concurrently, "alone" that they did not."""
        arrived, everyone = gates.setdefault(key, ([0], anyio.Event()))
        arrived[0] += 1
        if arrived[0] >= count:
            everyone.set()
        with anyio.move_on_after(30):
            await everyone.wait()
        return "met" if everyone.is_set() else "alone"

    @server.tool()
    def crash() -> str:
        """Kill the server process mid-call."""
        sys.stderr.write("flaky: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool()
    def protocol_error() -> str:
        """Answer with a JSON-RPC error instead of a result."""
        err = _error_class()
        raise err(-32603, "flaky server: deliberate protocol error")

    @server.tool()
    def image() -> list[Any]:
        """Return a caption and a 1x1 PNG."""
        return [
            types.TextContent(type="text", text="a tiny image"),
            types.ImageContent(
                type="image", data=base64.b64encode(PNG_1X1).decode(), mimeType="image/png"
            ),
        ]

    def whoami(ctx: Any) -> str:
        """The Authorization header of this call, echoed (a server reflecting a secret)."""
        request = getattr(ctx.request_context, "request", None)
        headers = getattr(request, "headers", None) or {}
        return f"you sent: {headers.get('authorization', '(nothing)')}"

    whoami.__annotations__["ctx"] = _context_class()  # how the SDK knows to pass its context
    server.tool()(whoami)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return server


def main(argv: list[str]) -> None:
    if "--exit-at-start" in argv:
        sys.stderr.write("flaky: refusing to start (missing configuration)\n")
        sys.exit(2)
    if "--hang-at-start" in argv:
        sys.stdin.read()  # never answers; exits when its stdin closes
        return
    server = build()
    if "--http" in argv and "--token" in argv:
        import uvicorn

        port = int(argv[argv.index("--http") + 1])
        token = argv[argv.index("--token") + 1]
        app = require_token(server.streamable_http_app(), token)
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
        return
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        try:
            server.run("streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host = "127.0.0.1"
            server.settings.port = port
            server.run("streamable-http")
        return
    server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
