"""The dispatcher: one assistant message's tool calls run, every failure turned into a result.

A failed tool is a message for the model, not an exception for the developer: an unknown tool,
arguments that are not JSON or break the schema, a handler that raises or times out, a call
outside the allowed set, a tool source whose whole batch failed: each becomes a
`ToolResultBlock(is_error=True)` the model can read and recover from. Only failures that mean the
host itself is in trouble (`HostError`, `MemoryError`, cancellation) stop the run.

Calls of one assistant message run concurrently; results come back in call order, one per call.
Arguments are checked before a call starts, so a tool's duration and timeout cover the tool alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from .._core._messages import ToolResultBlock
from .._core._numbers import is_positive
from .._core._words import shortened
from ..errors import Action, ConfigError, classify
from ..events import Event, ToolCallFinished, ToolCallStarted
from ..providers._base import ToolSpec
from ._checks import PendingCheck, builder
from ._tools import ADVICE, Tool, ToolCall, ToolOutcome, ToolSource, exc_text, to_parts, tool


class Toolbox:
    """The tools of one agent: functions and sources, filtered by `allowed_tools`."""

    def __init__(
        self,
        tools: Iterable[Tool | ToolSource | Callable[..., Any]] = (),
        *,
        allowed_tools: Iterable[str] | None = None,
        default_timeout: float | None = None,
    ) -> None:
        self.tools: dict[str, Tool] = {}
        self.sources: list[ToolSource] = []
        if isinstance(tools, (Tool, ToolSource, str, bytes)) or callable(tools):
            raise ConfigError("tools= takes a list of tools, e.g. tools=[calculator]")
        for t in tools:
            if isinstance(t, Tool):
                item = t
            elif isinstance(t, ToolSource):
                self.sources.append(t)
                continue
            elif callable(t):
                item = tool(t)
            else:
                raise ConfigError(f"tools= takes @tool functions or tool sources, not {t!r}")
            if item.name in self.tools:
                raise ConfigError(f"two tools are named `{item.name}`; give one another name")
            self.tools[item.name] = item
        if isinstance(allowed_tools, (str, bytes)):
            raise ConfigError(
                "allowed_tools= takes a list of tool names, e.g. "
                f"allowed_tools=[{allowed_tools!r}], not a single string"
            )
        self.allowed = None if allowed_tools is None else frozenset(allowed_tools)
        if default_timeout is not None and not is_positive(default_timeout):
            raise ConfigError("tool_timeout must be a positive number of seconds")
        self.default_timeout = default_timeout
        # a source's tool: its source, its spec, and its argument check (compiled off the loop
        # from the moment it is listed, before the model asks for a call)
        self._source_specs: dict[str, tuple[ToolSource, ToolSpec, PendingCheck]] = {}
        self._pending: list[ToolSource] = list(self.sources)  # not listed yet
        self.unavailable: dict[str, str] = {}  # source name -> why it offers no tools
        for t in self.tools.values():
            t.check()  # compiled off the loop from now on, before the model asks for a call

    def retry_unavailable(self) -> None:
        """List the sources that offered nothing again (at the next `specs()`): a server that
        could not start may be there by the next run."""
        names = set(self.unavailable)
        self._pending += [s for s in self.sources if s.name in names and s not in self._pending]
        self.unavailable.clear()

    async def specs(self) -> list[ToolSpec]:
        """What the model is offered: allowed functions, then the tools each source lists.

        A source that cannot list its tools offers none; `unavailable` says why (a tool source
        failing is the model's problem to work around, not a reason to stop the run).
        """
        while self._pending:
            src = self._pending.pop(0)
            try:
                listed = await src.list_tools()
            except BaseException as exc:
                if classify(exc, phase="tool") is Action.FAIL:
                    self._pending.insert(0, src)
                    raise
                self.unavailable[src.name] = exc_text(exc)
                continue
            if not listed:
                reason = getattr(src, "unavailable_reason", None)
                if reason:
                    self.unavailable[src.name] = str(reason)
            for spec in listed:
                if spec.name not in self.tools:
                    self._source_specs[spec.name] = (src, spec, builder.submit(spec.input_schema))
        out = [t.spec() for t in self.tools.values()]
        out += [spec for _, spec, _ in self._source_specs.values()]
        return [s for s in out if self.allowed is None or s.name in self.allowed]

    @property
    def names(self) -> list[str]:
        names = list(self.tools) + list(self._source_specs)
        return [n for n in names if self.allowed is None or n in self.allowed]

    def _precheck(self, call: ToolCall) -> ToolOutcome | None:
        """Failures found before anything runs."""
        if call.raw_input is not None:
            snippet = shortened(call.raw_input, 201)
            why = (
                "were cut off because the reply hit max_tokens"
                if call.truncated
                else "are not a valid JSON object"
            )
            return ToolOutcome.failed(
                call.id,
                f"Tool call to `{call.name}` failed: its arguments {why}: {snippet!r}. "
                "Send the complete arguments as one JSON object.",
                "truncated_json" if call.truncated else "invalid_json",
            )
        if self.allowed is not None and call.name not in self.allowed:
            return ToolOutcome.failed(
                call.id,
                f"Tool `{call.name}` is not allowed in this run. Allowed tools: "
                f"{', '.join(sorted(self.allowed)) or 'none'}. "
                "Use one of those or answer directly.",
                "not_allowed",
            )
        if call.name not in self.tools and call.name not in self._source_specs:
            available = ", ".join(self.names) or "none"
            return ToolOutcome.failed(
                call.id,
                f"Unknown tool `{call.name}`. Available tools: {available}. "
                "Call one of these, or answer without a tool.",
                "unknown_tool",
            )
        problems = self._argument_problems(call)
        if problems:
            return ToolOutcome.failed(
                call.id,
                f"Invalid arguments for `{call.name}`: {'; '.join(problems)}. "
                "Fix the arguments and call the tool again.",
                "invalid_arguments",
            )
        return None

    def _argument_problems(self, call: ToolCall) -> list[str]:
        if call.name in self.tools:
            return self.tools[call.name].argument_problems(call.input)
        return self._source_specs[call.name][2].result().problems(call.input)

    async def _checks_ready(self, calls: Sequence[ToolCall]) -> None:
        """Wait (without blocking the loop) for the checks these calls need, if the builder
        thread has not compiled them yet: the first call of a fresh process may come first."""
        for c in calls:
            if c.name in self.tools:
                await self.tools[c.name].check().wait()
            elif c.name in self._source_specs:
                await self._source_specs[c.name][2].wait()

    async def _run_function(self, call: ToolCall) -> ToolOutcome:
        t = self.tools[call.name]
        timeout = t.timeout if t.timeout is not None else self.default_timeout
        try:
            value = await asyncio.wait_for(t(**call.input), timeout)  # None: no timeout
        except asyncio.TimeoutError:
            return ToolOutcome.failed(
                call.id,
                f"Tool `{call.name}` timed out after {timeout:g} s. "
                "Try smaller input, a different tool, or explain the failure to the user.",
                "timeout",
            )
        except BaseException as exc:
            return _raised(call, exc)
        return ToolOutcome(call.id, to_parts(value))

    async def _run_source_batch(self, src: ToolSource, calls: list[ToolCall]) -> list[ToolOutcome]:
        try:
            got = list(await src.call_batch(calls))
        except BaseException as exc:
            if classify(exc, phase="tool") is Action.FAIL:
                raise
            text = exc_text(exc)
            return [
                ToolOutcome.failed(
                    c.id,
                    f"Tool source `{src.name}` failed for the whole batch, so `{c.name}` did not "
                    f"run: {text}. {ADVICE}",
                    "batch_failed",
                )
                for c in calls
            ]
        out: list[ToolOutcome] = []
        for i, c in enumerate(calls):
            item: ToolOutcome | BaseException | None = got[i] if i < len(got) else None
            if isinstance(item, ToolOutcome):
                out.append(ToolOutcome(c.id, item.content, item.is_error, item.error))
            elif isinstance(item, BaseException):
                out.append(_raised(c, item))
            else:
                out.append(
                    ToolOutcome.failed(
                        c.id,
                        f"Tool source `{src.name}` returned no result for `{c.name}`.",
                        "missing",
                    )
                )
        return out

    def source_of(self, name: str) -> str:
        entry = self._source_specs.get(name)
        return entry[0].name if entry and name not in self.tools else ""

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        emit: Callable[[Event], None],
        now: Callable[[], float] = time.monotonic,
    ) -> list[ToolResultBlock]:
        """Run one assistant message's calls concurrently; one result per call, in call order.

        `emit` receives ToolCallStarted/Finished, one pair per call, in call order.
        """

        outcomes: dict[str, ToolOutcome] = {}
        started: dict[str, float] = {}
        runnable: list[ToolCall] = []
        # the arguments are checked before any call starts: a tool's duration and timeout
        # cover the tool alone, never the check (nor the wait for its compilation)
        await self._checks_ready(calls)
        for c in calls:
            pre = self._precheck(c)
            if pre is not None:
                outcomes[c.id] = pre
            else:
                runnable.append(c)
            started[c.id] = now()
            emit(
                ToolCallStarted(
                    call_id=c.id,
                    name=c.name,
                    arguments=dict(c.input),
                    source=self.source_of(c.name),
                )
            )

        jobs: list[Awaitable[list[ToolOutcome]]] = []
        by_source: dict[int, tuple[ToolSource, list[ToolCall]]] = {}
        for c in runnable:
            if c.name in self.tools:
                jobs.append(self._single(c))
            else:
                src = self._source_specs[c.name][0]
                by_source.setdefault(id(src), (src, []))[1].append(c)
        for src, group in by_source.values():
            jobs.append(self._run_source_batch(src, group))
        for batch in await _gather_or_fail(jobs):
            for o in batch:
                outcomes[o.call_id] = o

        results: list[ToolResultBlock] = []
        for c in calls:
            o = outcomes[c.id]
            emit(
                ToolCallFinished(
                    call_id=c.id,
                    name=c.name,
                    is_error=o.is_error,
                    content=o.text[:2000],
                    duration_s=max(0.0, now() - started[c.id]),
                    error=o.error,
                    source=self.source_of(c.name),
                )
            )
            results.append(o.block())
        return results

    async def _single(self, call: ToolCall) -> list[ToolOutcome]:
        return [await self._run_function(call)]


def _raised(call: ToolCall, exc: BaseException) -> ToolOutcome:
    """What a tool that raised `exc` answers; a failure of the host itself is raised again."""
    if classify(exc, phase="tool") is Action.FAIL:
        raise exc
    return ToolOutcome.failed(
        call.id, f"Tool execution failed for `{call.name}`: {exc_text(exc)}. {ADVICE}", "raised"
    )


async def _gather_or_fail(jobs: list[Awaitable[list[ToolOutcome]]]) -> list[list[ToolOutcome]]:
    """Run jobs concurrently; if one raises (a hard failure), cancel the rest and re-raise."""
    if not jobs:
        return []
    tasks = [asyncio.ensure_future(j) for j in jobs]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        return [t.result() for t in tasks]
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
