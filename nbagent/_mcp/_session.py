"""One connection to an MCP server, and the runner task that owns its session.

The SDK's transports and `ClientSession` are anyio context managers that must be entered and
exited by one task. Each connection therefore lives in a background "session runner" task: it
enters the contexts, serves requests from a queue (each in a task of its own, so calls run
concurrently and cancelling one leaves the session intact), and exits the contexts when the
source closes it or the server goes away. What the runner saw (the server exited, the stream
closed) is kept on the `Connection` for the source to explain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Literal, cast

import anyio

from .._core._words import shortened
from ..providers._error_text import redact
from ._compat import is_connection_closed, unwrap

log = logging.getLogger("nbagent._mcp")

_STDERR_TAIL_BYTES = 4000
SETTLE_AFTER_LOSS_S = 2.0  # how long in-flight calls may take to notice a lost connection

STOP = "stop"  # put on the queue: the runner stops serving (we close it, or the server left)


@dataclass(frozen=True, repr=False)
class Endpoint:
    """How to reach one server: a command (stdio) or a URL with headers (streamable HTTP).

    `target` is the command line or URL for messages, with anything secret masked; `secrets`
    (header values, tokens) are scrubbed from every text the source produces. No repr: the
    headers hold credentials.
    """

    name: str
    target: str
    command: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    env: dict[str, str] | None = None
    cwd: str | None = None
    call_timeout: float | None = 30.0
    secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Endpoint({self.name!r}, {self.target!r})"

    def clean(self, text: str, limit: int = 300) -> str:
        """Text for a message: secrets out first, then cut to one line."""
        return shortened(" ".join(str(redact(text, self.secrets)).split()), limit)


@dataclass
class Request:
    kind: Literal["list", "call"]
    future: asyncio.Future[tuple[str, Any]]
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    scope: anyio.CancelScope | None = None

    def settle(self, status: str, value: Any = None) -> None:
        if not self.future.done():
            self.future.set_result((status, value))


class Connection:
    """One server process (or HTTP session), served by one runner task (`serve`)."""

    def __init__(self, endpoint: Endpoint, generation: int) -> None:
        loop = asyncio.get_running_loop()
        self.endpoint = endpoint
        self.generation = generation
        self.loop = loop
        self.queue: asyncio.Queue[Request | str] = asyncio.Queue()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.task: asyncio.Task[None] | None = None
        self.alive = False  # accepting requests
        self.lost = False  # the server went away (exit, closed stream)
        self.stopping = False  # we are closing it
        self.failed = False  # the runner ended with an error of its own
        self.loss = ""  # what happened, when the server went away
        self.loss_detail = ""
        self.errlog: IO[str] | None = None
        self.stderr_mark = 0  # stderr size when the current batch started
        self.stderr_tail = ""
        self.http_status: int | None = None  # an HTTP error the server answered with

    # -- what the server left behind ----------------------------------------------------------

    def mark_stderr(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.stderr_mark = os.fstat(self.errlog.fileno()).st_size  # type: ignore[union-attr]

    def read_stderr_tail(self) -> str:
        """The last lines the server wrote to stderr during the current batch (or at start).

        Read with pread, so the file offset the server process shares is never moved.
        """
        f = self.errlog
        if f is None or f.closed:
            return self.stderr_tail
        try:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            start = max(self.stderr_mark, size - _STDERR_TAIL_BYTES)
            data = os.pread(fd, size - start, start) if size > start else b""
        except (OSError, ValueError):
            return self.stderr_tail
        lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
        self.stderr_tail = self.endpoint.clean(" | ".join(lines[-3:]), 400)
        return self.stderr_tail

    def close_errlog(self) -> None:
        if self.errlog is not None:
            self.read_stderr_tail()
            self.errlog.close()
            self.errlog = None

    def set_loss(self, detail: str = "") -> None:
        """Record what happened when the server went away: `loss` says what, `loss_detail`
        adds the evidence (the server's last words on stderr, or the HTTP error)."""
        ep = self.endpoint
        if ep.url:
            self.loss = f"the connection to MCP server `{ep.name}` ({ep.target}) was lost"
            self.loss_detail = ep.clean(detail, 200)
        else:
            self.loss = f"the MCP server `{ep.name}` exited"
            tail = self.read_stderr_tail()
            self.loss_detail = f"its stderr ends with: {tail}" if tail else ""

    @property
    def loss_summary(self) -> str:
        return self.loss + (f" ({self.loss_detail})" if self.loss_detail else "")

    def mark_lost(self, detail: str = "") -> None:
        if self.stopping or self.lost:
            return
        self.lost = True
        self.alive = False
        self.set_loss(detail)
        self.queue.put_nowait(STOP)

    # -- the runner ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        ep = self.endpoint
        if ep.url is not None:
            async with _http_transport(ep.url, ep.headers, self._saw_response) as streams:
                yield streams
            return
        from mcp import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=ep.command[0], args=list(ep.command[1:]), env=ep.env, cwd=ep.cwd
        )
        errlog = cast("Any", self.errlog)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams[0], streams[1]

    async def _saw_response(self, response: Any) -> None:
        # The SDK turns an HTTP error into "Server returned an error response"; the status
        # (401: the credentials were refused) is what the user can act on.
        status = int(response.status_code)
        if status >= 400:
            self.http_status = status

    async def serve(self) -> None:
        """The runner: owns the transport and session contexts from entry to exit."""
        from mcp import ClientSession

        try:
            async with self._transport() as (read, write):
                send, receive = anyio.create_memory_object_stream[Any](0)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._pump, read, send)
                    try:
                        async with ClientSession(receive, write) as session:
                            await session.initialize()
                            self.alive = not self.lost
                            if not self.ready.done():
                                self.ready.set_result(None)
                            await self._serve_requests(session)
                    finally:
                        tg.cancel_scope.cancel()
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except Exception as exc:
            self.failed = True
            if not self.ready.done():
                self.ready.set_exception(exc)
            elif not self.stopping:
                if not self.loss:
                    self.set_loss(repr(unwrap(exc)))
                log.warning(
                    "MCP source `%s` stopped: %s",
                    self.endpoint.name,
                    self.endpoint.clean(repr(unwrap(exc))),
                )
        finally:
            self.alive = False
            self.close_errlog()
            if self.lost and not self.loss:
                self.set_loss()
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if isinstance(item, Request):
                    item.settle("lost" if self.lost else "closed")

    async def _pump(self, read: Any, send: Any) -> None:
        """Forward server messages to the session, noticing when the server goes away."""
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            if self.stopping:
                return
        # The server's output ended: it exited (stdio) or its stream closed (HTTP).
        self.mark_lost()

    async def _serve_requests(self, session: Any) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                item = await self.queue.get()
                if isinstance(item, str):
                    break
                if item.future.done():  # the caller gave up before it started
                    continue
                tg.start_soon(self._handle, session, item)
            self.alive = False
            if self.lost:
                # In-flight calls are woken with "connection closed"; give them a moment.
                tg.cancel_scope.deadline = anyio.current_time() + SETTLE_AFTER_LOSS_S
            else:
                tg.cancel_scope.cancel()

    async def _handle(self, session: Any, req: Request) -> None:
        timeout = self.endpoint.call_timeout
        try:
            with anyio.CancelScope() as scope:
                req.scope = scope
                if req.future.done():
                    scope.cancel()
                try:
                    if req.kind == "list":
                        req.settle("ok", await _list_all(session))
                    else:
                        with anyio.fail_after(timeout):  # None: no limit
                            result = await session.call_tool(req.name, req.arguments)
                        req.settle("ok", result)
                except TimeoutError:
                    req.settle("timeout")
                except Exception as exc:
                    if not is_connection_closed(exc):
                        req.settle("error", exc)
                    else:  # settled below, "lost" (or "closed" when we were closing it)
                        # Over HTTP the session object outlives a dead server: a request that
                        # loses its stream is the only sign. Reconnect for the next batch.
                        self.mark_lost(str(getattr(exc, "message", "") or exc))
        finally:
            req.settle("lost" if self.lost else "closed")

    async def submit(self, req: Request) -> tuple[str, Any]:
        """Hand a request to the runner and wait for its (status, value)."""
        if not self.alive:
            return ("lost" if self.lost else "closed"), None
        self.queue.put_nowait(req)
        try:
            return await req.future
        except asyncio.CancelledError:
            if req.scope is not None:
                req.scope.cancel()
            raise


async def _list_all(session: Any) -> list[Any]:
    from mcp import types

    tools: list[Any] = []
    result = await session.list_tools()
    for _ in range(100):
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    return tools


@contextlib.asynccontextmanager
async def _http_transport(
    url: str, headers: Mapping[str, str], on_response: Callable[[Any], Awaitable[None]]
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streamable HTTP client, with the endpoint's headers on every request and
    `on_response` told of every response."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's own defaults

    client = create_mcp_http_client(headers=dict(headers) or None)
    client.event_hooks["response"].append(on_response)
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams[0], streams[1]
