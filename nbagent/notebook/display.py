"""Showing a run in a notebook: the timeline widget under the cell, wired to the agent's events.

The widget is a subscriber like any other; the Stop button cancels the task running the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..errors import Aborted
from ..messages import Message
from .widget import AgentView, TimelineWidget, make_view

if TYPE_CHECKING:
    from ..agent import Agent, RunHandle, RunResult

__all__ = ["attach", "display_view", "show_run", "start_shown"]


def display_view(on_stop: Callable[[], None] | None = None) -> AgentView:
    """Display a Stop button and an empty timeline under the current cell (not subscribed)."""
    from IPython.display import display

    view = make_view(TimelineWidget(), on_stop=on_stop)
    display(view)  # type: ignore[no-untyped-call]
    return view


def attach(
    agent: Agent, on_stop: Callable[[], None] | None = None
) -> tuple[TimelineWidget, Callable[[], None]]:
    """Display a timeline under the current cell and subscribe it; returns (widget, detach)."""
    widget = display_view(on_stop).timeline
    return widget, agent.subscribe(widget)


def start_shown(
    agent: Agent,
    prompt: str | Message,
    *,
    before: Callable[[], Awaitable[None]] | None = None,
) -> tuple[RunHandle, AgentView]:
    """Show the timeline now and run in a background task; Stop cancels the task.

    The view is displayed by the caller (the cell), not by the task: a task runs after the
    cell has finished, when ipykernel no longer routes its display output to any cell. The
    widget subscribes when the run begins, after `before()` (e.g. waiting for a queued run).
    """
    from ..agent import RunHandle

    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[RunResult]] = []

    def stop() -> None:
        for task in tasks:
            task.cancel()

    view = display_view(stop)
    widget = view.timeline

    async def go() -> RunResult:
        if before is not None:
            await before()
        detach = agent.subscribe(widget)
        try:
            return await agent.run(prompt, show=False)
        finally:
            detach()
            widget.flush()

    task = loop.create_task(go())
    task.add_done_callback(_retrieve)
    tasks.append(task)
    return RunHandle(task), view


def _retrieve(task: asyncio.Task[RunResult]) -> None:
    """Mark a failure as seen (the timeline shows it; awaiting the handle raises it)."""
    if not task.cancelled():
        task.exception()


async def show_run(agent: Agent, prompt: str | Message) -> RunResult:
    """Run with the live widget shown; Stop cancels this run and raises `Aborted`."""
    task = asyncio.current_task()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        if task is not None:
            task.cancel()

    widget, detach = attach(agent, stop)
    try:
        return await agent._run_guarded(prompt)
    except asyncio.CancelledError:
        if not stopped:
            raise
        if task is not None and hasattr(task, "uncancel"):
            task.uncancel()
        raise Aborted("the run was stopped with the Stop button") from None
    finally:
        detach()
        widget.flush()
