"""Running an agent: one run set up from the agent's configuration, and the three ways to call
it (awaited, in the background, from synchronous code), each with the live view where a notebook
can show it.

`Agent.run`, `Agent.start` and `Agent.run_sync` are the doors (their signatures, overloads and
docstrings are in `_agent.py`); what they do is here, so the agent's module holds what it is
configured with and this one how a run is put together from it. A run is shown in a notebook
through the core's presenter seam (the notebook package registers the live widget), so neither
knows anything of widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .._core._messages import Message
from .._core._presenter import LiveView, presenter
from ..errors import Aborted, ConfigError
from ..events import RunStarted
from ._output_schema import OutputSchema
from ._output_step import StructuredOutput
from ._parts import AgentParts, RunState
from ._results import RunHandle, RunResult
from ._run import Run


async def run_shown(
    agent: AgentParts, prompt: str | Message, show: bool | None, output: Any
) -> RunResult[Any]:
    """`agent.run`: one run, in the live view where it is shown; its Stop button cancels it."""
    task = asyncio.current_task()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        if task is not None:
            task.cancel()

    try:
        with _watched(agent, _view(show, stop)):
            return await run_once(agent, prompt, output)
    except asyncio.CancelledError:
        if not stopped:
            raise
        if task is not None and hasattr(task, "uncancel"):  # Python 3.11+
            task.uncancel()
        raise Aborted("the run was stopped with the Stop button") from None


def run_in_background(
    agent: AgentParts, prompt: str | Message, show: bool | None, output: Any
) -> RunHandle[Any]:
    """`agent.start`: one run in a task of the running loop."""
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[RunResult[Any]]] = []

    def stop() -> None:
        for t in tasks:
            t.cancel()

    # The view is opened here, from the calling cell: output a task displays after the
    # cell has finished reaches no cell. Its Stop button cancels the task.
    view = _view(show, stop)

    async def shown() -> RunResult[Any]:
        with _watched(agent, view):
            return await run_once(agent, prompt, output)

    task = loop.create_task(shown())
    if view is not None:
        task.add_done_callback(_mark_retrieved)
    tasks.append(task)
    return RunHandle(task)


def run_synchronously(
    agent: AgentParts, prompt: str | Message, show: bool | None, output: Any
) -> RunResult[Any]:
    """`agent.run_sync`: one run on a loop of its own (a worker thread's inside a notebook)."""
    from ._blocking import run_blocking

    async def once() -> RunResult[Any]:
        try:
            return await run_once(agent, prompt, output)
        finally:
            # This loop ends with the run: close the connections opened on it (the next
            # run_sync gets a new loop and a new client), or their sockets leak.
            await agent.aclose()

    # The view is opened from this (the cell's) thread; the run goes to a worker thread.
    with _watched(agent, _view(show)):
        return run_blocking(once)


def _view(show: bool | None, stop: Callable[[], None] | None = None) -> LiveView | None:
    """The run's live view, opened now (None where it is not shown); `stop` is its Stop button.
    `show=None` means: show the run where a presenter can (in a notebook)."""
    shown = presenter().active() if show is None else show
    return presenter().open(stop) if shown else None


@contextlib.contextmanager
def _watched(agent: AgentParts, view: LiveView | None) -> Iterator[None]:
    """`view` sees the agent's events until the block ends, and is closed then."""
    if view is None:
        yield
        return
    detach = agent.subscribe(view)
    try:
        yield
    finally:
        detach()
        view.close()


async def run_once(agent: AgentParts, prompt: str | Message, output: Any = None) -> RunResult[Any]:
    """One run: check the prompt, set the run up from the current configuration, run it."""
    if agent._run is not None:
        raise ConfigError(
            "this agent is already running; await the running call, or use another Agent"
        )
    if not isinstance(prompt, (str, Message)):
        raise ConfigError(
            f"a prompt is a string or a Message.user(...), not {type(prompt).__name__}"
        )
    user = Message.user(prompt) if isinstance(prompt, str) else prompt
    if user.role != "user":
        raise ConfigError("a prompt must be a user message")
    schema = agent.output if output is None else OutputSchema.of(output)
    structured = None
    if schema is not None:  # each model's mode, its dialect, the output tool's name: now
        tools = [*agent.toolbox.tools, *(t.name for t in await agent.toolbox.specs())]
        structured = structured_output(agent, schema, list(dict.fromkeys(tools)))
    now = agent.clock.now()
    deadline = now + agent.budget.max_wall_s if agent.budget.max_wall_s else None
    state = RunState(uuid.uuid4().hex[:8], now, deadline)
    agent._run = state
    agent.toolbox.retry_unavailable()  # a server that could not start may be up by now
    try:
        run = Run(agent, state, structured)
        run.emit(RunStarted(prompt=user.text, model=agent.models[0], agent_id=agent.agent_id))
        return await run(user)
    finally:
        agent._run = None


def structured_output(
    agent: AgentParts, schema: OutputSchema | None, tools: list[str]
) -> StructuredOutput | None:
    """The run's structured answer for `schema` across the model chain (ConfigError now
    for a mode or a schema a model cannot take)."""
    if schema is None:
        return None
    return StructuredOutput(
        schema,
        mode=agent.output_mode,
        validators=agent._validators,
        retries=agent.output_retries,
        providers=agent._providers,
        tools=tools,
    )


def _mark_retrieved(task: asyncio.Task[RunResult[Any]]) -> None:
    """A background run's failure is shown in its view and raised by awaiting its handle; mark
    it retrieved so asyncio does not also log it as never retrieved."""
    if not task.cancelled():
        task.exception()
