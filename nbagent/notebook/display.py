"""Showing a run in a notebook: the timeline widget under the cell, wired to the agent's events.

The widget is a subscriber like any other; the Stop button cancels the task running the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import Aborted
from ..messages import Message
from .widget import TimelineWidget, make_view

if TYPE_CHECKING:
    from ..agent import Agent, RunResult

__all__ = ["attach", "show_run"]


def attach(
    agent: Agent, on_stop: Callable[[], None] | None = None
) -> tuple[TimelineWidget, Callable[[], None]]:
    """Display a timeline under the current cell and subscribe it; returns (widget, detach)."""
    from IPython.display import display

    widget = TimelineWidget()
    detach = agent.subscribe(widget)
    display(make_view(widget, on_stop=on_stop))  # type: ignore[no-untyped-call]
    return widget, detach


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
