"""Showing a run in a notebook: the timeline widget under the cell, wired to the agent's events.

`NotebookPresenter` fills the core's presenter seam: `import nbagent` registers it, and the agent
asks it for a view when it runs in a notebook. The widget is a subscriber like any other; the
Stop button calls back into whoever started the run (it cancels the task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .._core._messages import Message
from .._loop._agent import Agent
from .._loop._results import RunHandle, RunResult
from ._widget import AgentView, TimelineWidget, make_view


def in_notebook() -> bool:
    """True under an IPython kernel with a frontend (Jupyter, VS Code, Colab), not a terminal.

    Returns:
        Whether output goes to a notebook.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def display_view(on_stop: Callable[[], None] | None = None) -> AgentView:
    """Display a Stop button and an empty timeline under the current cell (not subscribed).

    Args:
        on_stop: Called once when Stop is pressed.

    Returns:
        The view, displayed.
    """
    from IPython.display import display

    view = make_view(TimelineWidget(), on_stop=on_stop)
    display(view)  # type: ignore[no-untyped-call]
    return view


class NotebookPresenter:
    """Runs are shown as the live timeline widget, under the cell that started them."""

    def active(self) -> bool:
        """Whether a run can be shown here: under a notebook's kernel.

        Returns:
            True in a notebook.
        """
        return in_notebook()

    def open(self, on_stop: Callable[[], None] | None = None) -> TimelineWidget:
        """Show a Stop button and a timeline under the current cell.

        Args:
            on_stop: Called once when Stop is pressed.

        Returns:
            The timeline, to subscribe to the run's events.
        """
        return display_view(on_stop).timeline


def start_shown(
    agent: Agent,
    prompt: str | Message,
    *,
    before: Callable[[], Awaitable[None]] | None = None,
    output: Any = None,
) -> tuple[RunHandle, AgentView]:
    """Show the timeline now and run in a background task once `before()` has returned.

    For callers that queue runs (the `%%agent` magic): the view is displayed by the caller (the
    cell), not by the task, because a task runs after the cell has finished, when ipykernel no
    longer routes its display output to any cell. The widget subscribes when the run begins.

    Args:
        agent: The agent to run.
        prompt: The prompt.
        before: Awaited first (the previous queued run, say); None for nothing.
        output: The run's schema for a structured answer (`Agent.run(output=...)`), or None.

    Returns:
        The run's handle.
    """
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[RunResult[Any]]] = []

    def stop() -> None:
        for task in tasks:
            task.cancel()

    view = display_view(stop)
    widget = view.timeline

    async def go() -> RunResult[Any]:
        if before is not None:
            await before()
        detach = agent.subscribe(widget)
        try:
            result: RunResult[Any] = await agent.run(prompt, show=False, output=output)
            return result
        finally:
            detach()
            widget.close()

    task = loop.create_task(go())
    task.add_done_callback(_retrieve)
    tasks.append(task)
    return RunHandle(task), view


def _retrieve(task: asyncio.Task[RunResult]) -> None:
    """Mark a failure as seen (the timeline shows it; awaiting the handle raises it)."""
    if not task.cancelled():
        task.exception()
