"""Tools: `@tool`, tool sources, and the dispatcher that turns every tool failure into a result.

A failed tool is a message for the model, not an exception for the developer: an unknown tool,
arguments that are not JSON or break the schema, a handler that raises or times out, a call
outside the allowed set, a tool source whose whole batch failed: each becomes a
`ToolResultBlock(is_error=True)` the model can read and recover from. Only failures that mean the
host itself is in trouble (`HostError`, `MemoryError`, cancellation) stop the run.

Calls of one assistant message run concurrently; results come back in call order, one per call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._core._messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from ..errors import Action, ConfigError, classify
from ..events import Event, ToolCallFinished, ToolCallStarted
from ..providers._base import ToolSpec
from ._schema import ArgumentCheck, BadArguments, ToolSignature, signature_of

__all__ = [
    "Tool",
    "ToolCall",
    "ToolOutcome",
    "ToolSource",
    "Toolbox",
    "tool",
]

_ADVICE = "You may fix the arguments, try a different tool, or explain the failure to the user."
ResultParts = tuple[TextBlock | ImageBlock, ...]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. `raw_input` is set when the arguments did not decode."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    raw_input: str | None = None
    truncated: bool = False  # the reply was cut off by max_tokens

    @classmethod
    def from_block(cls, block: ToolUseBlock, *, truncated: bool = False) -> ToolCall:
        return cls(block.id, block.name, dict(block.input), block.raw_input, truncated)


@dataclass(frozen=True)
class ToolOutcome:
    """What a call produced. `error` names why it failed (unknown_tool, invalid_json, ...)."""

    call_id: str
    content: ResultParts
    is_error: bool = False
    error: str = ""

    @classmethod
    def failed(cls, call_id: str, text: str, error: str) -> ToolOutcome:
        return cls(call_id, (TextBlock(text),), True, error)

    def block(self) -> ToolResultBlock:
        return ToolResultBlock(self.call_id, self.content, self.is_error)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextBlock))


@dataclass
class Tool:
    """A Python function the model can call.

    Made by `@tool`, it carries the `signature` its schema came from, and the model's JSON
    arguments are converted to the parameters' types before the function runs. A `Tool` built
    by hand with its own `input_schema` gets the arguments as they came.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = None
    signature: ToolSignature | None = field(default=None, repr=False, compare=False)
    _check: ArgumentCheck | None = field(default=None, init=False, repr=False, compare=False)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def argument_problems(self, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with the arguments, for the model; empty when the tool can run."""
        if self._check is None or self._check.schema is not self.input_schema:
            self._check = ArgumentCheck(self.input_schema)  # compiled once per schema
        problems = self._check.problems(arguments)
        if not problems and self.signature is not None:
            try:
                self.signature.bind(arguments)
            except BadArguments as exc:
                problems = exc.problems
        return problems

    async def __call__(self, **kwargs: Any) -> Any:
        if self.signature is not None:
            kwargs = self.signature.bind(kwargs)
        if self.is_async:
            return await self.fn(**kwargs)
        # Sync handlers run in a worker thread so a slow one does not freeze the widget.
        return await asyncio.to_thread(functools.partial(self.fn, **kwargs))


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Any:
    """Make a function a tool; its schema comes from the signature, its description from the
    docstring (with Google-style `Args:` for parameter descriptions)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        if not callable(f):
            raise ConfigError(f"@tool needs a function, not {type(f).__name__}")
        tname = name or getattr(f, "__name__", "")
        if not tname or not tname.replace("_", "a").replace("-", "a").isalnum():
            raise ConfigError(
                f"tool name {tname!r} must be letters, digits, '_' or '-'; pass name=..."
            )
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0
        ):
            raise ConfigError(f"tool `{tname}`: timeout must be a positive number of seconds")
        sig = signature_of(f, tname)
        return Tool(tname, description or sig.description, sig.input_schema, f, timeout, sig)

    if fn is not None:
        return wrap(fn)
    return wrap


@runtime_checkable
class ToolSource(Protocol):
    """A set of tools from outside Python functions (an MCP server, say).

    `call_batch` returns one `ToolOutcome` (or exception) per call, in order; raising means the
    whole batch failed, and every call in it gets an error result naming the cause.
    """

    name: str

    async def list_tools(self) -> list[ToolSpec]: ...

    async def call_batch(
        self, calls: Sequence[ToolCall]
    ) -> Sequence[ToolOutcome | BaseException]: ...


def to_parts(value: Any) -> ResultParts:
    """A handler's return value as result content."""
    if isinstance(value, ToolOutcome):
        return value.content
    if value is None:
        return (TextBlock("(no output)"),)
    if isinstance(value, (TextBlock, ImageBlock)):
        return (value,)
    if isinstance(value, str):
        return (TextBlock(value),)
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (TextBlock, ImageBlock)) for v in value)
    ):
        return tuple(value)
    try:
        return (TextBlock(json.dumps(value, ensure_ascii=False, default=str)),)
    except (TypeError, ValueError):
        return (TextBlock(str(value)),)


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"file not found: {exc.filename}"
    return text or type(exc).__name__


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
        if default_timeout is not None and (
            not isinstance(default_timeout, (int, float))
            or isinstance(default_timeout, bool)
            or not default_timeout > 0
        ):
            raise ConfigError("tool_timeout must be a positive number of seconds")
        self.default_timeout = default_timeout
        self._source_specs: dict[str, tuple[ToolSource, ToolSpec]] = {}
        self._pending: list[ToolSource] = list(self.sources)  # not listed yet
        self.unavailable: dict[str, str] = {}  # source name -> why it offers no tools
        self._checks: dict[str, ArgumentCheck] = {}  # a source tool's schema, compiled once

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
                self.unavailable[src.name] = _exc_text(exc)
                continue
            if not listed:
                reason = getattr(src, "unavailable_reason", None)
                if reason:
                    self.unavailable[src.name] = str(reason)
            for spec in listed:
                if spec.name not in self.tools:
                    self._source_specs[spec.name] = (src, spec)
        out = [t.spec() for t in self.tools.values()]
        out += [spec for _, spec in self._source_specs.values()]
        return [s for s in out if self.allowed is None or s.name in self.allowed]

    @property
    def names(self) -> list[str]:
        names = list(self.tools) + list(self._source_specs)
        return [n for n in names if self.allowed is None or n in self.allowed]

    def _precheck(self, call: ToolCall) -> ToolOutcome | None:
        """Failures found before anything runs."""
        if call.raw_input is not None:
            snippet = call.raw_input if len(call.raw_input) <= 200 else call.raw_input[:200] + "…"
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
        schema = self._source_specs[call.name][1].input_schema
        check = self._checks.get(call.name)
        if check is None or check.schema is not schema:  # (a source listed again)
            check = self._checks[call.name] = ArgumentCheck(schema)
        return check.problems(call.input)

    async def _run_function(self, call: ToolCall) -> ToolOutcome:
        t = self.tools[call.name]
        timeout = t.timeout if t.timeout is not None else self.default_timeout
        try:
            if timeout is None:
                value = await t(**call.input)
            else:
                value = await asyncio.wait_for(t(**call.input), timeout)
        except asyncio.TimeoutError:
            return ToolOutcome.failed(
                call.id,
                f"Tool `{call.name}` timed out after {timeout:g} s. "
                "Try smaller input, a different tool, or explain the failure to the user.",
                "timeout",
            )
        except BaseException as exc:
            if classify(exc, phase="tool") is Action.FAIL:
                raise
            return ToolOutcome.failed(
                call.id,
                f"Tool execution failed for `{call.name}`: {_exc_text(exc)}. {_ADVICE}",
                "raised",
            )
        return ToolOutcome(call.id, to_parts(value))

    async def _run_source_batch(self, src: ToolSource, calls: list[ToolCall]) -> list[ToolOutcome]:
        try:
            got = list(await src.call_batch(calls))
        except BaseException as exc:
            if classify(exc, phase="tool") is Action.FAIL:
                raise
            text = _exc_text(exc)
            return [
                ToolOutcome.failed(
                    c.id,
                    f"Tool source `{src.name}` failed for the whole batch, so `{c.name}` did not "
                    f"run: {text}. {_ADVICE}",
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
                if classify(item, phase="tool") is Action.FAIL:
                    raise item
                out.append(
                    ToolOutcome.failed(
                        c.id,
                        f"Tool execution failed for `{c.name}`: {_exc_text(item)}. {_ADVICE}",
                        "raised",
                    )
                )
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
        for c in calls:
            started[c.id] = now()
            emit(
                ToolCallStarted(
                    call_id=c.id,
                    name=c.name,
                    arguments=dict(c.input),
                    source=self.source_of(c.name),
                )
            )
            pre = self._precheck(c)
            if pre is not None:
                outcomes[c.id] = pre
            else:
                runnable.append(c)

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
