"""Tools: `@tool`, a call and its outcome, and the protocol of tool sources.

The dispatcher that runs calls and turns every failure into a result is `_toolbox.Toolbox`.
A tool's argument check is compiled off the event loop from the moment the tool is made
(`_checks`), so the first call costs what later ones cost.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._core._messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from .._core._numbers import is_positive
from ..errors import ConfigError
from ..providers._base import ToolSpec
from ._checks import PendingCheck, builder
from ._schema import BadArguments, ToolSignature, signature_of

ADVICE = "You may fix the arguments, try a different tool, or explain the failure to the user."
ResultParts = tuple[TextBlock | ImageBlock, ...]
"""A tool result's content: text and image blocks, in order."""


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for, as a tool source receives it.

    Attributes:
        id: The provider's id of the call; the result must carry it back.
        name: The tool's name.
        input: The decoded arguments.
        raw_input: The arguments' text when it did not decode as JSON, else None.
        truncated: Whether the reply was cut off by max_tokens (the arguments may be cut too).
    """

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    raw_input: str | None = None
    truncated: bool = False  # the reply was cut off by max_tokens

    @classmethod
    def from_block(cls, block: ToolUseBlock, *, truncated: bool = False) -> ToolCall:
        """The call a message's tool-use block asks for.

        Args:
            block: The block.
            truncated: Whether the reply it came in was cut off by max_tokens.

        Returns:
            The call.
        """
        return cls(block.id, block.name, dict(block.input), block.raw_input, truncated)


@dataclass(frozen=True)
class ToolOutcome:
    """What a call produced; a tool source returns one per call.

    Attributes:
        call_id: The id of the call it answers.
        content: The result's content, text and images.
        is_error: Whether it is an error result (the model reads it and may try again).
        error: Why it failed ("unknown_tool", "invalid_json", "raised", ...), "" when it did
            not; the attempt log's `error_kind` for the tool row.
    """

    call_id: str
    content: ResultParts
    is_error: bool = False
    error: str = ""

    @classmethod
    def failed(cls, call_id: str, text: str, error: str) -> ToolOutcome:
        """An error result of one text block.

        Args:
            call_id: The id of the call it answers.
            text: What the model reads: what went wrong and what it may do about it.
            error: Why it failed, as a short word ("timeout").

        Returns:
            The outcome.
        """
        return cls(call_id, (TextBlock(text),), True, error)

    def block(self) -> ToolResultBlock:
        """The outcome as the tool-result block the conversation holds.

        Returns:
            The block.
        """
        return ToolResultBlock(self.call_id, self.content, self.is_error)

    @property
    def text(self) -> str:
        """The result's text blocks, joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextBlock))


@dataclass
class Tool:
    """A Python function the model can call.

    Made by `@tool`, it carries the `signature` its schema came from, and the model's JSON
    arguments are converted to the parameters' types before the function runs. A `Tool` built
    by hand with its own `input_schema` gets the arguments as they came.

    Attributes:
        name: The name the model calls it by.
        description: What the model reads about it.
        input_schema: The JSON Schema of its arguments, sent to the model and checked before
            every call (arguments that break it get an error result, not a call).
        fn: The function run for a call (a sync one runs on a worker thread, so a slow tool
            does not freeze the widget).
        timeout: Seconds a call may take before it gets a "timed out" error result; None for
            the agent's `tool_timeout`.
        signature: What `@tool` read from the function (None for a tool made by hand).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = None
    signature: ToolSignature | None = field(default=None, repr=False, compare=False)
    _check: PendingCheck | None = field(default=None, init=False, repr=False, compare=False)

    def check(self) -> PendingCheck:
        """The argument check of the current schema, compiled once per schema by the builder
        thread: asked for when an agent takes the tool, so it is ready by the first call.

        Returns:
            The check, compiled or being compiled.
        """
        if self._check is None or self._check.schema is not self.input_schema:
            self._check = builder.submit(self.input_schema)
        return self._check

    def spec(self) -> ToolSpec:
        """What a provider is told about the tool.

        Returns:
            Its name, description and input schema.
        """
        return ToolSpec(self.name, self.description, self.input_schema)

    @property
    def is_async(self) -> bool:
        """Whether `fn` is an async function (awaited on the event loop, not on a thread)."""
        return inspect.iscoroutinefunction(self.fn)

    def argument_problems(self, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with the arguments, in words the model can act on.

        Args:
            arguments: The decoded arguments of a call.

        Returns:
            One sentence per problem (schema and type conversion); empty when the tool can run.
        """
        problems = self.check().result().problems(arguments)
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
    """Make a function a tool: `@tool` or `@tool(name=..., timeout=...)`.

    Its schema comes from the signature (pydantic reads the annotations), its description from
    the docstring, the parameters' descriptions from a Google-style `Args:` section. The
    model's JSON arguments are converted to the annotated types before the function runs.

    Args:
        fn: The function (when used as `@tool` without parentheses).
        name: The name the model calls it by; the function's name by default. Letters,
            digits, "_" and "-".
        description: What the model reads about it; the docstring's text by default.
        timeout: Seconds a call may take before it gets a "timed out" error result; None for
            the agent's `tool_timeout`.

    Returns:
        The `Tool`; or, without `fn`, a decorator that makes one.

    Raises:
        ConfigError: `fn` is not a function, the name is not allowed, the timeout is not a
            positive number, or an annotation cannot become a JSON Schema.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        if not callable(f):
            raise ConfigError(f"@tool needs a function, not {type(f).__name__}")
        tname = name or getattr(f, "__name__", "")
        if not tname or not tname.replace("_", "a").replace("-", "a").isalnum():
            raise ConfigError(
                f"tool name {tname!r} must be letters, digits, '_' or '-'; pass name=..."
            )
        if timeout is not None and not is_positive(timeout):
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

    Attributes:
        name: The source's name (events and the attempt log show it as the tool's `source`).
    """

    name: str

    async def list_tools(self) -> list[ToolSpec]:
        """The tools it offers now (asked at the start of every run).

        Returns:
            Their names, descriptions and input schemas.
        """
        ...

    async def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[ToolOutcome | BaseException]:
        """Run the calls of one reply that go to this source.

        Args:
            calls: The calls, in the order the model made them.

        Returns:
            One outcome per call, in order; an exception in place of an outcome gives that call
            an error result naming it. Raising instead fails the whole batch the same way.
        """
        ...


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


def exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"file not found: {exc.filename}"
    return text or type(exc).__name__
