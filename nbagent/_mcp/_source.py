"""MCP servers as tool sources: every failure of a server becomes a tool result the model reads.

`MCPSource` speaks to one MCP server, started as a subprocess over stdio (`command=`) or reached
over streamable HTTP (`url=`). The model is offered the server's tools with their JSON input
schemas; calls run over one session, concurrently within a batch.

What can go wrong, and what the model (or the developer) sees:

- the tool answers with `isError`: an error result with the server's own content;
- a call outlives `call_timeout`: an error result naming the timeout;
- the server answers with a JSON-RPC error: an error result with its message and code;
- the server process dies mid-batch: every call it was running gets an error result naming the
  cause (with the last lines it wrote to stderr); the next batch restarts the server, at most
  `max_restarts` times, after which calls get an error result saying the server is unavailable;
- the server cannot start at all (command not found, exits at start, no handshake within
  `start_timeout`): `list_tools()` returns no tools and `unavailable_reason` says why, or, with
  `strict=True`, a `ConfigError` names the command and the cause.

The SDK's transports and `ClientSession` are anyio context managers that must be entered and
exited by one task. Each connection therefore lives in a background "session runner" task owned by
the source: it enters the contexts, serves requests from a queue (each in a task of its own, so
calls run concurrently and cancelling one leaves the session intact), and exits the contexts when
the source is closed or the server goes away. `call_batch` may be awaited from any task of the
same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, cast
from urllib.parse import urlparse

import anyio

from .._core._messages import ImageBlock, TextBlock
from .._loop._tools import ToolCall, ToolOutcome
from ..errors import ConfigError
from ..providers._base import ToolSpec

__all__ = ["MCPSource"]

log = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STDERR_TAIL_BYTES = 4000
_SETTLE_AFTER_LOSS_S = 2.0  # how long in-flight calls may take to notice a lost connection
_STOP_TIMEOUT_S = 15.0  # the SDK's own stdio shutdown is bounded at about 5 s


def _mcp_error_class() -> type[Exception]:
    try:
        from mcp.shared.exceptions import MCPError  # mcp >= 2

        return MCPError
    except ImportError:  # pragma: no cover - mcp 1.x
        from mcp.shared import exceptions

        return cast("type[Exception]", exceptions.McpError)  # type: ignore[attr-defined]


def _connection_closed_code() -> int:
    from mcp import types

    return int(getattr(types, "CONNECTION_CLOSED", -32000))


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    """A field under its mcp 2 (snake_case) or mcp 1 (camelCase) name."""
    for n in names:
        value = getattr(obj, n, None)
        if value is not None:
            return value
    return default


def _unwrap(exc: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups from anyio task groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, (list, tuple)) or not inner:
            return exc
        real = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        exc = real[0] if real else inner[0]


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class _Request:
    kind: Literal["list", "call"]
    future: asyncio.Future[tuple[str, Any]]
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    scope: anyio.CancelScope | None = None

    def settle(self, status: str, value: Any = None) -> None:
        if not self.future.done():
            self.future.set_result((status, value))


_STOP = "stop"
_LOST = "lost"


class _Connection:
    """One server process (or HTTP session), served by one runner task."""

    def __init__(self, generation: int) -> None:
        loop = asyncio.get_running_loop()
        self.generation = generation
        self.loop = loop
        self.queue: asyncio.Queue[_Request | str] = asyncio.Queue()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.task: asyncio.Task[None] | None = None
        self.alive = False  # accepting requests
        self.lost = False  # the server went away (exit, closed stream)
        self.stopping = False  # we are closing it
        self.end: str = ""  # why it ended: stopped | lost | failed | cancelled
        self.error: BaseException | None = None
        self.loss = ""  # what happened, when the server went away
        self.loss_detail = ""
        self.errlog: IO[str] | None = None
        self.stderr_mark = 0  # stderr size when the current batch started
        self.stderr_tail = ""

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
        self.stderr_tail = _one_line(" | ".join(lines[-3:]), 400)
        return self.stderr_tail

    def close_errlog(self) -> None:
        if self.errlog is not None:
            self.read_stderr_tail()
            self.errlog.close()
            self.errlog = None


class MCPSource:
    """The tools of one MCP server, for `Agent(tools=[...])`.

    `MCPSource([sys.executable, "server.py"])` runs a stdio server (a list, or one string split
    like a shell would); `MCPSource(url="http://127.0.0.1:8000/mcp")` reaches a streamable HTTP
    server. The server starts on the first `list_tools()`; close it with `await source.aclose()`
    or `async with MCPSource(...) as source:`.
    """

    def __init__(
        self,
        command: Sequence[str] | str | None = None,
        *,
        url: str | None = None,
        name: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        call_timeout: float | None = 30.0,
        start_timeout: float = 20.0,
        max_restarts: int = 2,
        strict: bool = False,
    ) -> None:
        if (command is None) == (url is None):
            raise ConfigError(
                "MCPSource needs exactly one of command=[...] (a stdio server) or url=... "
                "(a streamable HTTP server)"
            )
        self.command: list[str] = []
        self.url: str | None = None
        if command is not None:
            argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
            if not argv or not argv[0]:
                raise ConfigError("MCPSource(command=...) needs a program to run")
            self.command = argv
        else:
            parsed = urlparse(str(url))
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ConfigError(
                    f"MCPSource(url={url!r}) needs an http:// or https:// URL, "
                    "e.g. http://127.0.0.1:8000/mcp"
                )
            self.url = str(url)
        if call_timeout is not None and not call_timeout > 0:
            raise ConfigError("MCPSource call_timeout must be a positive number of seconds or None")
        if not start_timeout > 0:
            raise ConfigError("MCPSource start_timeout must be a positive number of seconds")
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise ConfigError("MCPSource max_restarts must be a whole number >= 0")
        self.name = name or self._default_name()
        self.env = dict(env) if env else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.call_timeout = call_timeout
        self.start_timeout = float(start_timeout)
        self.max_restarts = max_restarts
        self.strict = strict

        self.unavailable_reason: str | None = None
        self.restarts = 0
        self.skipped_tools: dict[str, str] = {}  # tool name -> why it is not offered
        self._specs: list[ToolSpec] | None = None
        self._conn: _Connection | None = None
        self._generation = 0
        self._last_loss = ""  # what happened to the last connection that went away
        self._needs_restart = False  # the server went away (or a restart failed)
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    # -- public surface -----------------------------------------------------------------------

    def __repr__(self) -> str:
        state = (
            "unavailable" if self.unavailable_reason else ("running" if self.running else "idle")
        )
        return f"MCPSource(name={self.name!r}, {self.target!r}, {state})"

    @property
    def running(self) -> bool:
        conn = self._conn
        return conn is not None and conn.alive

    @property
    def target(self) -> str:
        """The command line or URL, for messages, with anything that looks secret masked."""
        if self.url:
            return _redact_url(self.url)
        return shlex.join(_redact_argv(self.command))

    async def __aenter__(self) -> MCPSource:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def list_tools(self) -> list[ToolSpec]:
        """The server's tools (started on first use). No tools if it cannot start; see
        `unavailable_reason`, or pass `strict=True` to get a `ConfigError` instead."""
        async with self._get_lock():
            if self._specs is None and self.unavailable_reason is None:
                await self._first_start()
            if self.unavailable_reason is not None and self._specs is None:
                if self.strict:
                    raise ConfigError(self.unavailable_reason)
                return []
            return list(self._specs or [])

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        """Run the calls concurrently over one session; one outcome per call, in order."""
        if not calls:
            return []
        conn, problem = await self._connection_for_batch()
        if conn is None:
            return [
                ToolOutcome.failed(c.id, problem.format(tool=c.name), "unavailable") for c in calls
            ]
        conn.mark_stderr()
        outcomes: list[ToolOutcome | BaseException] = list(
            await asyncio.gather(*(self._call_one(conn, c) for c in calls))
        )
        return outcomes

    async def aclose(self) -> None:
        """Stop the server (or end the HTTP session) and wait until everything is released."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._stop(conn)

    # -- starting and restarting --------------------------------------------------------------

    def _default_name(self) -> str:
        if self.url:
            return urlparse(self.url).netloc.rpartition("@")[2] or "mcp"
        argv = [a for a in _redact_argv(self.command) if "***" not in a]
        if "-m" in argv[:-1]:
            return argv[argv.index("-m") + 1].rsplit(".", 1)[-1]
        for arg in reversed(argv[1:]):
            if arg.endswith((".py", ".js", ".ts", ".mjs")):
                return Path(arg).stem
        for arg in argv[1:]:  # npx -y @scope/server-thing@1.2 -> server-thing
            base = Path(arg).name.split("@")[0] if not arg.startswith("-") else ""
            if base:
                return base
        return Path(argv[0]).name

    def _get_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    def _forget_other_loop(self) -> None:
        """A connection made on another event loop (a finished `asyncio.run`) cannot be used."""
        conn = self._conn
        if conn is None or conn.loop is asyncio.get_running_loop():
            return
        if not conn.loop.is_closed() and conn.task is not None and not conn.task.done():
            raise ConfigError(
                f"MCP source `{self.name}` is running on another event loop; "
                "use one MCPSource per event loop"
            )
        conn.close_errlog()
        self._conn = None

    async def _first_start(self) -> None:
        self._forget_other_loop()
        conn = self._conn
        if conn is None or not conn.alive:  # (alive: an earlier listing was cancelled)
            if conn is not None:
                await self._stop(conn)
                self._conn = None
            conn, reason = await self._start()
            if conn is None:
                self.unavailable_reason = reason
                log.warning("%s", reason)
                return
        status, value = await self._submit(conn, _Request("list", conn.loop.create_future()))
        if status != "ok":
            await self._stop(conn)
            self._conn = None
            self.unavailable_reason = (
                f"MCP server `{self.name}` ({self.target}) started but did not list its tools: "
                f"{self._describe_failure(conn, status, value)}"
            )
            log.warning("%s", self.unavailable_reason)
            return
        self._specs = self._to_specs(value)

    async def _connection_for_batch(self) -> tuple[_Connection | None, str]:
        """A live connection, restarting the server if it went away; else why there is none.

        The reason is a template with `{tool}` for the call's tool name.
        """
        async with self._get_lock():
            self._forget_other_loop()
            conn = self._conn
            if conn is not None and conn.alive:
                return conn, ""
            if self._specs is None:  # never started (list_tools was not called), or failed to
                if self.unavailable_reason is None:
                    await self._first_start()
                if self._specs is None:
                    return None, (
                        "Tool `{tool}` is unavailable: "
                        + _braces(self.unavailable_reason or "the MCP server did not start")
                        + ". Do not call its tools again; answer without them or explain the "
                        "failure to the user."
                    )
                conn = self._conn
                if conn is not None and conn.alive:
                    return conn, ""
            if conn is not None:
                if conn.lost or conn.end in ("lost", "failed"):
                    self._needs_restart = True
                await self._stop(conn)
                self._conn = None
            if self._needs_restart:
                if self.restarts >= self.max_restarts:
                    self.unavailable_reason = (
                        f"MCP server `{self.name}` is unavailable: {self._last_loss}, and it has "
                        f"already been {'reconnected' if self.url else 'restarted'} "
                        f"{self.restarts} time(s) (max_restarts={self.max_restarts})"
                    )
                    return None, (
                        "Tool `{tool}` did not run: "
                        + _braces(self.unavailable_reason)
                        + ". Do not call its tools again; answer without them or explain the "
                        "failure to the user."
                    )
                self.restarts += 1
                log.info(
                    "restarting MCP server `%s` (restart %d of %d)",
                    self.name,
                    self.restarts,
                    self.max_restarts,
                )
            new, reason = await self._start()
            if new is None:
                self.unavailable_reason = reason
                self._last_loss = reason
                return None, (
                    "Tool `{tool}` did not run: could not restart it: "
                    + _braces(reason)
                    + ". Answer without this tool or explain the failure to the user."
                )
            self.unavailable_reason = None
            self._needs_restart = False
            return new, ""

    async def _start(self) -> tuple[_Connection | None, str]:
        """Start a connection; (connection, "") or (None, why it could not start)."""
        # The SDK's first import takes a second or so; not on the event loop, which the
        # widget shares.
        await asyncio.to_thread(_preload)
        self._generation += 1
        conn = _Connection(self._generation)
        if self.command:
            # Closed by the runner (or _stop); a file because Jupyter's sys.stderr has no fileno.
            conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        conn.task = asyncio.create_task(
            self._serve(conn), name=f"nbagent-mcp-{self.name}-{conn.generation}"
        )
        try:
            await asyncio.wait_for(asyncio.shield(conn.ready), self.start_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            conn.ready.cancel()
            await self._stop(conn)
            return None, self._start_failure(
                f"no MCP handshake within start_timeout={self.start_timeout:g} s", conn
            )
        except asyncio.CancelledError:
            conn.ready.cancel()
            await self._stop(conn)
            raise
        except Exception as exc:
            await self._stop(conn)
            return None, self._start_failure(self._describe_start_error(_unwrap(exc)), conn)
        self._conn = conn
        return conn, ""

    def _start_failure(self, cause: str, conn: _Connection) -> str:
        tail = conn.read_stderr_tail()
        text = f"cannot start MCP server `{self.name}` ({self.target}): {cause}"
        if tail:
            text += f"; its stderr ends with: {tail}"
        return text

    def _describe_start_error(self, exc: BaseException) -> str:
        if isinstance(exc, FileNotFoundError):
            missing = exc.filename or (self.command[0] if self.command else "")
            if self.cwd and not Path(self.cwd).is_dir():
                return f"the working directory {self.cwd} does not exist"
            return f"command not found: {missing}"
        if isinstance(exc, PermissionError):
            return f"permission denied running {exc.filename or self.command[0]}"
        if isinstance(exc, OSError):
            return exc.strerror or str(exc) or type(exc).__name__
        if self._is_connection_closed(exc):
            return "the server exited during startup" if self.command else "the connection closed"
        text = str(exc).strip() or type(exc).__name__
        return _one_line(f"{type(exc).__name__}: {text}" if self.url else text)

    async def _stop(self, conn: _Connection) -> None:
        """End a connection's runner and wait for it; closes its stderr capture."""
        task = conn.task
        try:
            if task is None or task.done() or conn.loop is not asyncio.get_running_loop():
                return
            if conn.lost:  # the runner is winding down by itself
                await asyncio.wait({task}, timeout=_SETTLE_AFTER_LOSS_S + _STOP_TIMEOUT_S)
            conn.stopping = True
            if not task.done() and conn.alive:
                conn.queue.put_nowait(_STOP)
                await asyncio.wait({task}, timeout=_STOP_TIMEOUT_S)
            if task.done():
                return
            task.cancel()
            await asyncio.wait({task}, timeout=_STOP_TIMEOUT_S)
        finally:
            if task is not None and task.done() and not task.cancelled():
                task.exception()  # retrieved: its failure was reported through `ready`
            if task is None or task.done():
                conn.close_errlog()

    # -- the session runner -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _transport(self, conn: _Connection) -> AsyncIterator[tuple[Any, Any]]:
        if self.url is not None:
            try:
                from mcp.client.streamable_http import streamable_http_client as http_client
            except ImportError:  # pragma: no cover - mcp 1.x
                from mcp.client.streamable_http import (  # type: ignore[attr-defined,no-redef]
                    streamablehttp_client as http_client,
                )
            async with http_client(self.url) as streams:
                yield streams[0], streams[1]
            return
        from mcp import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=self.env, cwd=self.cwd
        )
        errlog = cast("Any", conn.errlog)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams[0], streams[1]

    async def _serve(self, conn: _Connection) -> None:
        """The runner: owns the transport and session contexts from entry to exit."""
        from mcp import ClientSession

        try:
            async with self._transport(conn) as (read, write):
                send, receive = anyio.create_memory_object_stream[Any](0)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._pump, conn, read, send)
                    try:
                        async with ClientSession(receive, write) as session:
                            await session.initialize()
                            conn.alive = not conn.lost
                            if not conn.ready.done():
                                conn.ready.set_result(None)
                            await self._serve_requests(conn, session)
                    finally:
                        tg.cancel_scope.cancel()
            conn.end = conn.end or ("lost" if conn.lost else "stopped")
        except asyncio.CancelledError:
            conn.end = conn.end or ("stopped" if conn.stopping else "cancelled")
            if not conn.ready.done():
                conn.ready.cancel()
            raise
        except Exception as exc:
            conn.error = exc
            conn.end = conn.end or ("lost" if conn.lost else "failed")
            if not conn.ready.done():
                conn.ready.set_exception(exc)
            elif not conn.stopping:
                if not conn.loss:
                    self._set_loss(conn, repr(_unwrap(exc)))
                log.warning("MCP source `%s` stopped: %r", self.name, _unwrap(exc))
        finally:
            conn.alive = False
            conn.close_errlog()
            if conn.lost and not conn.loss:
                self._set_loss(conn)
            while not conn.queue.empty():
                item = conn.queue.get_nowait()
                if isinstance(item, _Request):
                    item.settle("lost" if conn.lost else "closed")

    async def _pump(self, conn: _Connection, read: Any, send: Any) -> None:
        """Forward server messages to the session, noticing when the server goes away."""
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            if conn.stopping:
                return
        # The server's output ended: it exited (stdio) or its stream closed (HTTP).
        self._mark_lost(conn)

    def _mark_lost(self, conn: _Connection, detail: str = "") -> None:
        if conn.stopping or conn.lost:
            return
        conn.lost = True
        conn.alive = False
        self._set_loss(conn, detail)
        conn.queue.put_nowait(_LOST)

    async def _serve_requests(self, conn: _Connection, session: Any) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                item = await conn.queue.get()
                if isinstance(item, str):
                    break
                if item.future.done():  # the caller gave up before it started
                    continue
                tg.start_soon(self._handle, conn, session, item)
            conn.alive = False
            if conn.lost:
                # In-flight calls are woken with "connection closed"; give them a moment.
                tg.cancel_scope.deadline = anyio.current_time() + _SETTLE_AFTER_LOSS_S
            else:
                tg.cancel_scope.cancel()

    async def _handle(self, conn: _Connection, session: Any, req: _Request) -> None:
        try:
            with anyio.CancelScope() as scope:
                req.scope = scope
                if req.future.done():
                    scope.cancel()
                try:
                    if req.kind == "list":
                        req.settle("ok", await self._list_all(session))
                    elif self.call_timeout is None:
                        req.settle("ok", await session.call_tool(req.name, req.arguments))
                    else:
                        with anyio.fail_after(self.call_timeout):
                            result = await session.call_tool(req.name, req.arguments)
                        req.settle("ok", result)
                except TimeoutError:
                    req.settle("timeout")
                except Exception as exc:
                    if self._is_connection_closed(exc):
                        # Over HTTP the session object outlives a dead server: a request that
                        # loses its stream is the only sign. Reconnect for the next batch.
                        self._mark_lost(conn, str(getattr(exc, "message", "") or exc))
                    req.settle("error", exc)
        finally:
            req.settle("lost" if conn.lost else "closed")

    @staticmethod
    async def _list_all(session: Any) -> list[Any]:
        from mcp import types

        tools: list[Any] = []
        result = await session.list_tools()
        for _ in range(100):
            tools.extend(result.tools)
            cursor = _attr(result, "next_cursor", "nextCursor")
            if not cursor:
                break
            result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        return tools

    # -- calls ----------------------------------------------------------------------------------

    async def _submit(self, conn: _Connection, req: _Request) -> tuple[str, Any]:
        if not conn.alive:
            return ("lost" if conn.lost else "closed"), None
        conn.queue.put_nowait(req)
        try:
            return await req.future
        except asyncio.CancelledError:
            if req.scope is not None:
                req.scope.cancel()
            raise

    async def _call_one(self, conn: _Connection, call: ToolCall) -> ToolOutcome:
        req = _Request("call", conn.loop.create_future(), call.name, dict(call.input))
        status, value = await self._submit(conn, req)
        if status == "ok":
            return self._to_outcome(call, value)
        text = self._describe_failure(conn, status, value, call.name)
        kind = {
            "timeout": "timeout",
            "lost": "server_exited",
            "closed": "source_closed",
        }.get(status, "mcp_error")
        if status == "error" and self._is_connection_closed(value):
            kind = "server_exited" if conn.lost else "source_closed"
        return ToolOutcome.failed(call.id, text, kind)

    def _is_connection_closed(self, exc: Any) -> bool:
        return isinstance(exc, _mcp_error_class()) and (
            getattr(exc, "code", None) == _connection_closed_code()
            or getattr(getattr(exc, "error", None), "code", None) == _connection_closed_code()
        )

    def _set_loss(self, conn: _Connection, detail: str = "") -> None:
        """Record what happened to a connection that went away: `conn.loss` says what,
        `conn.loss_detail` adds the evidence (the server's last words on stderr)."""
        if self.url:
            conn.loss = f"the connection to MCP server `{self.name}` ({self.target}) was lost"
            conn.loss_detail = _one_line(detail, 200)
        else:
            conn.loss = f"the MCP server `{self.name}` exited"
            tail = conn.read_stderr_tail()
            conn.loss_detail = f"its stderr ends with: {tail}" if tail else ""
        self._last_loss = conn.loss + (f" ({conn.loss_detail})" if conn.loss_detail else "")

    def _describe_failure(
        self, conn: _Connection, status: str, value: Any, tool: str | None = None
    ) -> str:
        what = f"Tool `{tool}`" if tool else "The request"
        if status == "timeout":
            return (
                f"{what} on MCP server `{self.name}` timed out after {self.call_timeout:g} s "
                "(call_timeout) and was cancelled. Try smaller input, a different tool, or "
                "explain the failure to the user."
            )
        lost = status == "lost" or (
            status == "error" and self._is_connection_closed(value) and conn.lost
        )
        if lost:
            if not conn.loss:
                self._set_loss(conn)
            note = f" ({conn.loss_detail})" if conn.loss_detail else ""
            left = self.max_restarts - self.restarts
            again = "reconnected" if self.url else "restarted"
            then = (
                f"It will be {again} for the next tool call ({left} attempt(s) left)."
                if left > 0
                else f"It will not be {again} again (max_restarts={self.max_restarts})."
            )
            return f"{what} did not finish: {conn.loss} while running this call{note}. {then}"
        if status in ("closed",) or (status == "error" and self._is_connection_closed(value)):
            return (
                f"{what} did not finish: the MCP source `{self.name}` was closed during the call."
            )
        exc = value if isinstance(value, BaseException) else None
        if exc is not None and isinstance(exc, _mcp_error_class()):
            code = getattr(exc, "code", None)
            code = code if code is not None else getattr(getattr(exc, "error", None), "code", "")
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            return (
                f"{what} failed: MCP server `{self.name}` answered with a protocol error "
                f"(code {code}): {_one_line(message, 1000)}. Fix the arguments, try a different "
                "tool, or explain the failure to the user."
            )
        detail = f"{type(exc).__name__}: {_one_line(str(exc), 1000)}" if exc else str(value)
        return (
            f"{what} failed on MCP server `{self.name}`: {detail}. Try a different tool or "
            "explain the failure to the user."
        )

    # -- conversions ----------------------------------------------------------------------------

    def _to_specs(self, tools: list[Any]) -> list[ToolSpec]:
        specs: list[ToolSpec] = []
        seen: set[str] = set()
        self.skipped_tools = {}
        for t in tools:
            name = str(getattr(t, "name", ""))
            if not _TOOL_NAME.match(name):
                self.skipped_tools[name] = (
                    "its name is not 1-64 letters, digits, '_' or '-', which model APIs require"
                )
                log.warning("MCP server `%s`: skipping tool %r: bad name", self.name, name)
                continue
            if name in seen:
                self.skipped_tools[name] = "the server listed it twice"
                continue
            seen.add(name)
            schema = _attr(t, "input_schema", "inputSchema", default={})
            schema = dict(schema) if isinstance(schema, dict) else {}
            schema.setdefault("type", "object")
            if schema.get("type") == "object":
                schema.setdefault("properties", {})
            description = str(getattr(t, "description", None) or _attr(t, "title") or "")
            specs.append(ToolSpec(name, description, schema))
        return specs

    def _to_outcome(self, call: ToolCall, result: Any) -> ToolOutcome:
        parts: list[TextBlock | ImageBlock] = []
        for item in _attr(result, "content", default=[]) or []:
            parts.extend(_content_part(item))
        structured = _attr(result, "structured_content", "structuredContent")
        if not parts and structured is not None:
            parts.append(TextBlock(json.dumps(structured, ensure_ascii=False, default=str)))
        is_error = bool(_attr(result, "is_error", "isError", default=False))
        if not parts:
            parts.append(TextBlock("(the tool reported an error)" if is_error else "(no output)"))
        return ToolOutcome(call.id, tuple(parts), is_error, "tool_error" if is_error else "")


_SECRET = re.compile(r"(key|token|secret|passw|auth|bearer|credential)", re.IGNORECASE)


def _redact_argv(argv: list[str]) -> list[str]:
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


def _redact_url(url: str) -> str:
    parsed = urlparse(url)
    netloc = parsed.netloc.rpartition("@")[2]
    query = "?***" if parsed.query else ""
    return f"{parsed.scheme}://{netloc}{parsed.path}{query}"


def _preload() -> None:
    import importlib

    for module in ("mcp", "mcp.client.stdio", "mcp.client.streamable_http", "jsonschema"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


def _braces(text: str) -> str:
    """Escape text for use inside a `str.format` template."""
    return text.replace("{", "{{").replace("}", "}}")


def _content_part(item: Any) -> list[TextBlock | ImageBlock]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextBlock(str(getattr(item, "text", "")))]
    if kind == "image":
        mime = _attr(item, "mime_type", "mimeType", default="image/png")
        return [ImageBlock(str(getattr(item, "data", "")), str(mime))]
    if kind == "audio":
        mime = _attr(item, "mime_type", "mimeType", default="audio")
        size = len(str(getattr(item, "data", ""))) * 3 // 4
        return [TextBlock(f"[audio content ({mime}, about {size} bytes) not shown]")]
    if kind == "resource":
        res = getattr(item, "resource", None)
        uri = str(getattr(res, "uri", ""))
        text = getattr(res, "text", None)
        if text is not None:
            return [TextBlock(f"[resource {uri}]\n{text}")]
        mime = _attr(res, "mime_type", "mimeType", default="binary")
        return [TextBlock(f"[resource {uri} ({mime}) not shown]")]
    if kind == "resource_link":
        uri = str(getattr(item, "uri", ""))
        name = str(getattr(item, "name", "") or "")
        return [TextBlock(f"[resource link {name}: {uri}]" if name else f"[resource link {uri}]")]
    dump = getattr(item, "model_dump", None)
    data = dump(mode="json", exclude_none=True) if callable(dump) else item
    return [TextBlock(json.dumps(data, ensure_ascii=False, default=str))]
