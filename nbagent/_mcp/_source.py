"""MCP servers as tool sources: every failure of a server becomes a tool result the model reads.

`MCPSource` speaks to one MCP server, started as a subprocess over stdio (`command=`) or reached
over streamable HTTP (`url=`, with `headers=` such as a bearer token). The model is offered the
server's tools with their JSON input schemas; calls run over one session, concurrently within a
batch.

What can go wrong, and what the model (or the developer) sees:

- the tool answers with `isError`: an error result with the server's own content;
- a call outlives `call_timeout`: an error result naming the timeout;
- the server answers with a JSON-RPC error: an error result with its message and code;
- the server process dies mid-batch: every call it was running gets an error result naming the
  cause (with the last lines it wrote to stderr); the next batch restarts the server, at most
  `max_restarts` times, after which calls get an error result saying the server is unavailable;
- the server cannot start at all (command not found, exits at start, no handshake within
  `start_timeout`, a URL that refuses the credentials): `list_tools()` returns no tools and
  `unavailable_reason` says why, or, with `strict=True`, a `ConfigError` names the cause.

The parts: `_session` (one connection and the task that owns it), `_convert` (listings and
results), `_describe` (failures as sentences), `_redact` (secrets out of every text). This
module holds the lifecycle: first start, restarts, closing, and one call batch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

from .._core._numbers import is_positive, is_whole
from .._loop._tools import ToolCall, ToolOutcome
from ..errors import ConfigError
from ..providers._base import ToolSpec
from ._compat import preload, unwrap
from ._convert import to_outcome, to_specs
from ._describe import describe_failure, describe_start_error, start_failure
from ._redact import guard_logs, header_secrets, redact_argv, redact_url
from ._session import SETTLE_AFTER_LOSS_S, STOP, Connection, Endpoint, Request

log = logging.getLogger("nbagent._mcp")

_STOP_TIMEOUT_S = 15.0  # the SDK's own stdio shutdown is bounded at about 5 s
# the `ToolOutcome.error` code of a call that came back with this status (else "mcp_error")
_ERROR_CODES = {"timeout": "timeout", "lost": "server_exited", "closed": "source_closed"}
_GIVE_UP = ". Do not call its tools again; answer without them or explain the failure to the user."


class MCPSource:
    """The tools of one MCP server, for `Agent(tools=[...])`.

    `MCPSource([sys.executable, "server.py"])` runs a stdio server (a list, or one string split
    like a shell would); `MCPSource(url="http://127.0.0.1:8000/mcp")` reaches a streamable HTTP
    server, and `headers={"Authorization": "Bearer ..."}` are sent with each of its requests
    (their values are treated as secrets: masked in every message, log line and repr). The
    server starts on the first `list_tools()`; close it with `await source.aclose()` or
    `async with MCPSource(...) as source:`.

    Args:
        command: The stdio server's command line (a list, or one string split like a shell
            would); give it or `url`, not both.
        url: A streamable HTTP server's URL.
        headers: Headers for each request to an HTTP server (their values are secrets).
        name: The source's name in events and the attempt log; None for one made from the
            command or URL.
        env: Environment variables for a stdio server (how it takes its secrets).
        cwd: The folder a stdio server runs in.
        call_timeout: Seconds a tool call may take before it gets a "timed out" error
            result; None for no limit.
        start_timeout: Seconds the server may take to start and list its tools.
        max_restarts: How often a server that died is started again.
        strict: False (the default): a server that cannot start offers no tools and the run
            goes on (a `ToolSourceUnavailable` event says why). True: `list_tools` raises.

    Attributes:
        name: The source's name.
        env: The stdio server's environment variables, or None.
        cwd: The stdio server's folder, or None.
        call_timeout: Seconds a call may take, or None.
        start_timeout: Seconds the server may take to start.
        max_restarts: How often a dead server is restarted.
        strict: Whether a server that cannot start raises.
        restarts: How often it was restarted.

    Raises:
        ConfigError: Both or neither of `command` and `url`, a header on a stdio server, or
            a timeout or restart count out of range.
    """

    def __init__(
        self,
        command: Sequence[str] | str | None = None,
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
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
        argv: list[str] = []
        if command is not None:
            argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
            if not argv or not argv[0]:
                raise ConfigError("MCPSource(command=...) needs a program to run")
        else:
            parsed = urlparse(str(url))
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ConfigError(
                    f"MCPSource(url={redact_url(str(url))!r}) needs an http:// or https:// URL, "
                    "e.g. http://127.0.0.1:8000/mcp"
                )
        if headers is not None and url is None:
            raise ConfigError(
                "MCPSource headers= are sent to a streamable HTTP server; pass url=... with them "
                "(a stdio server takes its secrets through env=)"
            )
        sent = _check_headers(headers)
        if call_timeout is not None and not is_positive(call_timeout):
            raise ConfigError("MCPSource call_timeout must be a positive number of seconds or None")
        if not is_positive(start_timeout):
            raise ConfigError("MCPSource start_timeout must be a positive number of seconds")
        if not is_whole(max_restarts) or max_restarts < 0:
            raise ConfigError("MCPSource max_restarts must be a whole number >= 0")
        self.command = argv
        self.url = str(url) if url is not None else None
        self.name = name or _default_name(argv, self.url)
        self.env = dict(env) if env else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.call_timeout = call_timeout
        self.start_timeout = float(start_timeout)
        self.max_restarts = max_restarts
        self.strict = strict
        self._endpoint = Endpoint(
            name=self.name,
            target=redact_url(self.url) if self.url else shlex.join(redact_argv(argv)),
            command=tuple(argv),
            url=self.url,
            headers=sent,
            env=self.env,
            cwd=self.cwd,
            call_timeout=call_timeout,
            secrets=header_secrets(sent),
        )

        self.unavailable_reason: str | None = None
        self.restarts = 0
        self.skipped_tools: dict[str, str] = {}  # tool name -> why it is not offered
        self._specs: list[ToolSpec] | None = None
        self._conn: Connection | None = None
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
        """Whether the server is up now (started and not dead)."""
        conn = self._conn
        return conn is not None and conn.alive

    @property
    def target(self) -> str:
        """The command line or URL, for messages, with anything that looks secret masked."""
        return self._endpoint.target

    @property
    def headers(self) -> dict[str, str]:
        """The header names sent to the server, their values masked."""
        return dict.fromkeys(self._endpoint.headers, "***")

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
        """The server's tools (started on first use).

        Returns:
            The tools; none when the server cannot start (see `unavailable_reason`).

        Raises:
            ConfigError: With `strict=True`, the server cannot start.
        """
        async with self._get_lock():
            if self._specs is None and self.unavailable_reason is None:
                await self._first_start()
            if self.unavailable_reason is not None and self._specs is None:
                if self.strict:
                    raise ConfigError(self.unavailable_reason)
                return []
            return list(self._specs or [])

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        """Run the calls concurrently over one session.

        Args:
            calls: The calls of one reply that go to this server.

        Returns:
            One outcome per call, in order; each gets an error result when the server is
            unavailable.
        """
        if not calls:
            return []
        conn, problem = await self._connection_for_batch()
        if conn is None:
            return [
                ToolOutcome.failed(c.id, f"Tool `{c.name}` {problem}", "unavailable") for c in calls
            ]
        conn.mark_stderr()
        return list(await asyncio.gather(*(self._call_one(conn, c) for c in calls)))

    async def aclose(self) -> None:
        """Stop the server (or end the HTTP session) and wait until everything is released."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._stop(conn)

    # -- starting and restarting --------------------------------------------------------------

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
        status, value = await conn.submit(Request("list", conn.loop.create_future()))
        if status != "ok":
            await self._stop(conn)
            self._conn = None
            why = describe_failure(conn, status, value, None, self.restarts, self.max_restarts)
            self.unavailable_reason = (
                f"MCP server `{self.name}` ({self.target}) started but did not list its tools: "
                f"{why}"
            )
            log.warning("%s", self.unavailable_reason)
            return
        self._specs = self._to_specs(value)

    async def _connection_for_batch(self) -> tuple[Connection | None, str]:
        """A live connection, restarting the server if it went away; else why there is none.

        The reason is the error result's sentence after "Tool `name` ".
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
                    why = self.unavailable_reason or "the MCP server did not start"
                    return None, f"is unavailable: {why}{_GIVE_UP}"
                conn = self._conn
                if conn is not None and conn.alive:
                    return conn, ""
            if conn is not None:
                if conn.lost or conn.failed:
                    self._needs_restart = True
                await self._stop(conn)
                self._last_loss = conn.loss_summary or self._last_loss
                self._conn = None
            if self._needs_restart:
                if self.restarts >= self.max_restarts:
                    self.unavailable_reason = (
                        f"MCP server `{self.name}` is unavailable: {self._last_loss}, and it has "
                        f"already been {'reconnected' if self.url else 'restarted'} "
                        f"{self.restarts} time(s) (max_restarts={self.max_restarts})"
                    )
                    return None, f"did not run: {self.unavailable_reason}{_GIVE_UP}"
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
                tail = ". Answer without this tool or explain the failure to the user."
                return None, f"did not run: could not restart it: {reason}{tail}"
            self.unavailable_reason = None
            self._needs_restart = False
            return new, ""

    async def _start(self) -> tuple[Connection | None, str]:
        """Start a connection; (connection, "") or (None, why it could not start)."""
        # The SDK's first import takes a second or so; not on the event loop, which the
        # widget shares.
        await asyncio.to_thread(preload)
        guard_logs(self._endpoint.secrets)  # (after the SDK's loggers exist)
        self._generation += 1
        conn = Connection(self._endpoint, self._generation)
        if self.command:
            # Closed by the runner (or _stop); a file because Jupyter's sys.stderr has no fileno.
            conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        conn.task = asyncio.create_task(
            conn.serve(), name=f"nbagent-mcp-{self.name}-{conn.generation}"
        )
        try:
            await asyncio.wait_for(asyncio.shield(conn.ready), self.start_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            conn.ready.cancel()
            await self._stop(conn)
            return None, start_failure(
                conn, f"no MCP handshake within start_timeout={self.start_timeout:g} s"
            )
        except asyncio.CancelledError:
            conn.ready.cancel()
            await self._stop(conn)
            raise
        except Exception as exc:
            await self._stop(conn)
            cause = describe_start_error(self._endpoint, unwrap(exc), conn.http_status)
            return None, start_failure(conn, cause)
        self._conn = conn
        return conn, ""

    async def _stop(self, conn: Connection) -> None:
        """End a connection's runner and wait for it; closes its stderr capture."""
        task = conn.task
        try:
            if task is None or task.done() or conn.loop is not asyncio.get_running_loop():
                return
            if conn.lost:  # the runner is winding down by itself
                await asyncio.wait({task}, timeout=SETTLE_AFTER_LOSS_S + _STOP_TIMEOUT_S)
            conn.stopping = True
            if not task.done() and conn.alive:
                conn.queue.put_nowait(STOP)
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

    # -- one call -------------------------------------------------------------------------------

    async def _call_one(self, conn: Connection, call: ToolCall) -> ToolOutcome:
        req = Request("call", conn.loop.create_future(), call.name, dict(call.input))
        status, value = await conn.submit(req)
        if status == "ok":
            return to_outcome(call, value, self._endpoint.secrets)
        text = describe_failure(conn, status, value, call.name, self.restarts, self.max_restarts)
        return ToolOutcome.failed(call.id, text, _ERROR_CODES.get(status, "mcp_error"))

    def _to_specs(self, tools: list[Any]) -> list[ToolSpec]:
        specs, self.skipped_tools = to_specs(tools, self.name)
        return specs


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Headers as a plain dict of strings; a wrong kind is a one-sentence `ConfigError` that
    never quotes a value (it is likely a credential)."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ConfigError(
            "MCPSource headers= takes a dict such as {'Authorization': 'Bearer ...'}, "
            f"not a {type(headers).__name__}"
        )
    out: dict[str, str] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(
                f"MCPSource headers= needs text names and values; {key!r} has a "
                f"{type(value).__name__} value"
                if isinstance(key, str)
                else "MCPSource headers= needs text names and values"
            )
        if "\n" in value or "\r" in value or "\n" in key or "\r" in key:
            raise ConfigError(f"MCPSource header {key!r} holds a line break, which HTTP forbids")
        out[key] = value
    return out


def _default_name(argv: list[str], url: str | None) -> str:
    if url:
        return urlparse(url).netloc.rpartition("@")[2] or "mcp"
    argv = [a for a in redact_argv(argv) if "***" not in a]
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
