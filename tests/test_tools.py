"""@tool schemas and the dispatcher: every tool failure becomes a result the model can read."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pytest

from nbagent import VirtualClock
from nbagent import errors as E
from nbagent._core._messages import TextBlock
from nbagent._loop._schema import ArgumentCheck
from nbagent._loop._toolbox import Toolbox
from nbagent._loop._tools import Tool, ToolCall, ToolOutcome, tool
from nbagent.events import Event, ToolCallFinished, ToolCallStarted
from nbagent.providers._base import ToolSpec


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@tool
def read_file(path: str, max_lines: int = 100) -> str:
    """Read a text file.

    Args:
        path: Path of the file, relative to the project.
        max_lines: Stop after this many lines.
    """
    raise FileNotFoundError(2, "No such file or directory", path)


@tool(timeout=0.05)
async def slow(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "woke"


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    await asyncio.sleep(0.01)
    return a + b


def run(calls: list[ToolCall], box: Toolbox) -> tuple[list[Any], list[Event]]:
    events: list[Event] = []

    def emit(event: Event) -> None:
        events.append(event)

    async def main() -> list[Any]:
        await box.specs()
        return await box.run_batch(calls, emit)

    return asyncio.run(main()), events


def test_schema_from_signature_and_docstring() -> None:
    assert isinstance(read_file, Tool)
    assert read_file.description == "Read a text file."
    assert read_file.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path of the file, relative to the project."},
            "max_lines": {
                "type": "integer",
                "description": "Stop after this many lines.",
                "default": 100,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_schema_for_richer_types() -> None:
    @tool
    def paint(
        color: Color,
        tags: list[str],
        mode: Literal["fast", "slow"] = "fast",
        note: str | None = None,
        extra: dict[str, int] | None = None,
    ) -> None:
        """Paint."""

    props = paint.input_schema["properties"]
    assert props["color"] == {"enum": ["red", "blue"], "type": "string"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert props["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert paint.input_schema["required"] == ["color", "tags"]


@pytest.mark.parametrize(
    ("make", "fix"),
    [
        (lambda: tool(lambda *args: None, name="v"), "name each parameter"),
        (lambda: tool(_takes_opaque), "has type _Opaque, which has no JSON schema"),
        (lambda: tool(_takes_callback), "has type .*Callable.*, which has no JSON schema"),
        (lambda: tool(lambda x: x, name="bad name!"), "letters, digits"),
        (lambda: tool(add.fn, timeout=-1), "timeout must be a positive"),
    ],
)
def test_unsupported_signatures_say_what_to_change(make: Any, fix: str) -> None:
    with pytest.raises(E.ConfigError, match=fix):
        make()


class _Opaque:
    """A class with no JSON form."""


def _takes_opaque(x: _Opaque) -> None:
    """Nope."""


def _takes_callback(x: Callable[[int], int]) -> None:
    """Nope."""


def test_calls_run_concurrently_and_results_keep_call_order() -> None:
    from nbagent import VirtualClock

    clock = VirtualClock(auto_advance=False)  # sleeps wait until the test moves time
    finished: list[str] = []

    @tool
    async def wait(seconds: float, label: str) -> str:
        """Wait."""
        await clock.sleep(seconds)
        finished.append(label)
        return label

    box = Toolbox([wait])
    calls = [
        ToolCall("1", "wait", {"seconds": 0.2, "label": "first"}),
        ToolCall("2", "wait", {"seconds": 0.01, "label": "second"}),
        ToolCall("3", "wait", {"seconds": 0.1, "label": "third"}),
    ]
    events: list[Event] = []

    async def main() -> list[Any]:
        await box.specs()
        await wait.check().wait()  # compiled, as it is by the time a model asks for a call
        batch = asyncio.create_task(box.run_batch(calls, events.append))
        for _ in range(100):  # let the calls start; a serial dispatcher would have one asleep
            await asyncio.sleep(0)
        assert clock.sleepers == 3  # all three are waiting at once
        clock.advance(0.2)  # 0.2 s covers them all: together, not 0.31 s in a row
        return await batch

    results = asyncio.run(main())
    assert finished == ["second", "third", "first"]
    assert [r.tool_use_id for r in results] == ["1", "2", "3"]
    assert [r.text for r in results] == ["first", "second", "third"]
    assert [type(e).__name__ for e in events] == ["ToolCallStarted"] * 3 + ["ToolCallFinished"] * 3


def test_every_kind_of_tool_failure_is_an_error_result_and_successes_survive() -> None:
    box = Toolbox([read_file, slow, add])
    calls = [
        ToolCall("a", "add", {"a": 2, "b": 3}),
        ToolCall("b", "read_file", {"path": "src/foo.py"}),
        ToolCall("c", "delete_everything", {}),
        ToolCall("d", "read_file", {}, raw_input='{"path": "src/'),
        ToolCall("e", "add", {"a": "two", "b": 3}),
        ToolCall("f", "slow", {"seconds": 5}),
        ToolCall("g", "add", {"a": 1, "b": 2, "c": 3}),
    ]
    results, events = run(calls, box)
    assert [r.tool_use_id for r in results] == list("abcdefg")
    assert not results[0].is_error and results[0].text == "5"
    assert all(r.is_error for r in results[1:])
    texts = [r.text for r in results]
    assert texts[1] == (
        "Tool execution failed for `read_file`: file not found: src/foo.py. You may fix the "
        "arguments, try a different tool, or explain the failure to the user."
    )
    assert texts[2] == (
        "Unknown tool `delete_everything`. Available tools: read_file, slow, add. "
        "Call one of these, or answer without a tool."
    )
    assert "not a valid JSON object" in texts[3] and "src/" in texts[3]
    assert texts[4].startswith("Invalid arguments for `add`: 'a' must be integer, not a string")
    assert "timed out after 0.05 s" in texts[5]
    assert "'c' is not a parameter (parameters: a, b)" in texts[6]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.error for e in finished] == [
        "",
        "raised",
        "unknown_tool",
        "invalid_json",
        "invalid_arguments",
        "timeout",
        "invalid_arguments",
    ]


def test_truncated_arguments_say_max_tokens_cut_them() -> None:
    box = Toolbox([read_file])
    results, _ = run([ToolCall("a", "read_file", {}, raw_input='{"pa', truncated=True)], box)
    assert results[0].is_error and "cut off because the reply hit max_tokens" in results[0].text


def test_calls_outside_allowed_tools_are_refused_as_results() -> None:
    box = Toolbox([read_file, add], allowed_tools=["add"])
    results, _ = run([ToolCall("a", "read_file", {"path": "x"})], box)
    assert results[0].is_error
    assert results[0].text.startswith(
        "Tool `read_file` is not allowed in this run. Allowed tools: add"
    )

    async def offered() -> list[str]:
        return [s.name for s in await box.specs()]

    assert asyncio.run(offered()) == ["add"]


def test_sync_tools_run_off_the_event_loop() -> None:
    import threading

    seen: list[str] = []

    @tool
    def where() -> str:
        """Which thread."""
        seen.append(threading.current_thread().name)
        return "ok"

    results, _ = run([ToolCall("a", "where", {})], Toolbox([where]))
    assert results[0].text == "ok"
    assert seen and seen[0] != threading.main_thread().name


def test_a_tools_duration_and_timeout_cover_the_tool_alone_not_its_argument_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call of a fresh process used to import jsonschema inside the tool's timed
    window: a 0.5 s timeout showed a 1.3 s bar. Here the check takes 2 s of the agent's clock."""
    clock = VirtualClock()
    order: list[str] = []
    original = ArgumentCheck.problems

    def slow_check(self: ArgumentCheck, arguments: Any) -> list[str]:
        order.append("check")
        clock.advance(2.0)
        return original(self, arguments)

    monkeypatch.setattr(ArgumentCheck, "problems", slow_check)

    @tool(timeout=0.5)
    async def lookup(key: str) -> str:
        """Look a key up."""
        order.append("tool")
        await clock.sleep(0.25)
        return key.upper()

    events: list[Event] = []

    def emit(event: Event) -> None:
        events.append(event)
        if isinstance(event, ToolCallStarted):
            order.append("started")

    async def main() -> list[Any]:
        return await Toolbox([lookup]).run_batch(
            [ToolCall("a", "lookup", {"key": "k"})], emit, clock.now
        )

    results = asyncio.run(main())
    assert results[0].text == "K" and not results[0].is_error  # not "timed out after 0.5 s"
    assert order == ["check", "started", "tool"]
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert finished.duration_s == pytest.approx(0.25)  # the tool's own time, not 2.25 s


def test_a_tools_argument_check_is_compiled_when_an_agent_takes_the_tool() -> None:
    @tool
    def fresh(n: int) -> int:
        """A tool made just now."""
        return n

    assert fresh._check is None  # making a tool costs nothing more
    Toolbox([fresh])
    check = fresh._check
    assert check is not None
    check.result()  # the builder thread compiles it without any call having been made
    assert check._future.done()
    assert fresh.check() is check  # the same schema: compiled once


@pytest.mark.parametrize("exc", [E.HostError("save failed"), MemoryError()])
def test_host_trouble_in_a_tool_hard_fails(exc: BaseException) -> None:
    @tool
    async def boom() -> None:
        """Boom."""
        raise exc

    with pytest.raises(type(exc)):
        run(
            [ToolCall("a", "boom", {}), ToolCall("b", "add", {"a": 1, "b": 1})],
            Toolbox([boom, add]),
        )


class Source:
    """A fake tool source: one tool ok, or the whole batch failing."""

    name = "fake"

    def __init__(self, fail_batch: bool = False) -> None:
        self.fail_batch = fail_batch
        self.batches: list[list[str]] = []

    async def list_tools(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        return [ToolSpec("search", "Search.", schema), ToolSpec("lookup", "Look up.", schema)]

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        self.batches.append([c.id for c in calls])
        if self.fail_batch:
            raise ConnectionError("server went away")
        out: list[ToolOutcome | BaseException] = []
        for c in calls:
            if c.name == "lookup":
                out.append(ValueError("no such entry"))
            else:
                out.append(ToolOutcome(c.id, (TextBlock("found"),)))
        return out


def test_tool_source_batch_results_and_per_call_errors() -> None:
    src = Source()
    box = Toolbox([add, src])
    calls = [
        ToolCall("1", "search", {"q": "x"}),
        ToolCall("2", "add", {"a": 1, "b": 1}),
        ToolCall("3", "lookup", {"q": "y"}),
        ToolCall("4", "search", {}),
    ]
    results, events = run(calls, box)
    assert [r.tool_use_id for r in results] == ["1", "2", "3", "4"]
    assert [r.is_error for r in results] == [False, False, True, True]
    assert "no such entry" in results[2].text
    assert src.batches == [["1", "3"]]  # one batch for the source; the invalid call never sent
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.source for e in started] == ["fake", "", "fake", "fake"]


def test_a_whole_batch_failure_maps_to_every_call_of_the_batch() -> None:
    box = Toolbox([add, Source(fail_batch=True)])
    calls = [
        ToolCall("1", "search", {"q": "x"}),
        ToolCall("2", "add", {"a": 1, "b": 1}),
        ToolCall("3", "lookup", {"q": "y"}),
    ]
    results, _ = run(calls, box)
    assert [r.is_error for r in results] == [True, False, True]
    for r in (results[0], results[2]):
        assert "Tool source `fake` failed for the whole batch" in r.text
        assert "server went away" in r.text


def test_duplicate_tool_names_are_a_config_error() -> None:
    with pytest.raises(E.ConfigError, match="two tools are named `add`"):
        Toolbox([add, add])


class _Flaky:
    """A source that cannot list its tools the first time, and can the second."""

    name = "flaky"

    def __init__(self) -> None:
        self.listings = 0
        self.unavailable_reason: str | None = None

    async def list_tools(self) -> list[ToolSpec]:
        self.listings += 1
        if self.listings == 1:
            self.unavailable_reason = "the server exited at start"
            return []
        self.unavailable_reason = None
        return [ToolSpec("ping", "Ping.", {"type": "object", "properties": {}})]

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        return [ToolOutcome(c.id, (TextBlock("pong"),)) for c in calls]


class _Broken:
    name = "broken"

    async def list_tools(self) -> list[ToolSpec]:
        raise ConnectionRefusedError("connection refused")

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        raise AssertionError("never called")


def test_a_source_that_cannot_list_offers_nothing_and_says_why() -> None:
    box = Toolbox([add, _Broken(), _Flaky()])

    async def offered() -> list[str]:
        return [s.name for s in await box.specs()]

    assert asyncio.run(offered()) == ["add"]
    assert box.unavailable == {
        "broken": "connection refused",
        "flaky": "the server exited at start",
    }
    assert asyncio.run(offered()) == ["add"]  # not listed again within the run
    box.retry_unavailable()  # the next run tries again
    assert asyncio.run(offered()) == ["add", "ping"]
    assert box.unavailable == {"broken": "connection refused"}


def test_the_agent_reports_an_unavailable_source_once_per_run() -> None:
    from nbagent import Agent, ScriptedModel, VirtualClock
    from nbagent.events import ToolSourceUnavailable

    events: list[Event] = []
    source = _Flaky()
    agent = Agent(
        ScriptedModel(["a", "b"]), tools=[source], clock=VirtualClock(), subscribers=[events.append]
    )
    asyncio.run(agent.run("one", show=False))
    (event,) = [e for e in events if isinstance(e, ToolSourceUnavailable)]
    assert (event.source, event.reason) == ("flaky", "the server exited at start")
    asyncio.run(agent.run("two", show=False))  # listed again: now it works
    assert len([e for e in events if isinstance(e, ToolSourceUnavailable)]) == 1
    assert agent._providers[0].requests[-1].tools[0].name == "ping"  # type: ignore[attr-defined]
