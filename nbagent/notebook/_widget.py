"""The live timeline: an anywidget fed by events, plus the Stop button around it.

A reply streams thousands of deltas; sending each to the browser would flood the kernel's comm
channel and the notebook. `TimelineWidget` therefore coalesces: it pushes the state at most once
per `min_interval` (0.1 s, about ten syncs a second). An event that arrives too early marks the
state dirty and, when an event loop is running, schedules a flush with `loop.call_later`, so the
last change is shown even if nothing follows it for a while. `RunFinished` always flushes at
once: the final picture is complete. No threads are involved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import traitlets

from ..events import Event, RunFinished
from ._state import TimelineState

_HERE = Path(__file__).parent


class Coalescer:
    """Calls `push` at most once per `min_interval` seconds: a change that comes too early is
    pushed by a trailing call scheduled on the running event loop (with no loop, by the next
    change or `flush`), so the last change always shows. Used by every live view."""

    def __init__(
        self, push: Callable[[], None], min_interval: float, now: Callable[[], float]
    ) -> None:
        self.push = push
        self.min_interval = min_interval
        self.count = 0
        self._now = now
        self._last = -float("inf")
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None

    def changed(self, force: bool = False) -> None:
        """Something changed: push now if the last push is old enough (or `force`), else soon."""
        elapsed = self._now() - self._last
        if force or elapsed >= self.min_interval:
            self.flush()
            return
        self._dirty = True
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: the next change (or the final one) pushes
            return
        self._timer = loop.call_later(max(self.min_interval - elapsed, 0.0), self._on_timer)

    def flush(self) -> None:
        """Push now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._dirty = False
        self._last = self._now()
        self.count += 1
        self.push()

    def _on_timer(self) -> None:
        self._timer = None
        if self._dirty:
            self.flush()


class LiveWidget(anywidget.AnyWidget):
    """What every live view shares: the synced `state` the front end draws, its Stop control
    (`on_stop` called once when it is pressed), pushes coalesced by a `Coalescer` (the
    subclass's `_push` sends the state), and text for frontends that cannot run widgets
    (`_fallback`).

    Args:
        state: The first state.
        on_stop: Called once when Stop is pressed; None for no Stop control.
        min_interval: The least seconds between two pushes.
        now: The monotonic clock (injectable for tests).
        **kwargs: Passed to anywidget's `AnyWidget`.

    Attributes:
        state: The synced state the front end draws.
        stop_requested: Set by the front end when Stop is pressed.
        show_stop: Whether the front end draws its own Stop control.
    """

    state = traitlets.Dict().tag(sync=True)
    stop_requested = traitlets.Bool(False).tag(sync=True)
    show_stop = traitlets.Bool(True).tag(sync=True)

    def __init__(
        self,
        state: dict[str, Any],
        on_stop: Callable[[], None] | None,
        min_interval: float,
        now: Callable[[], float],
        **kwargs: Any,
    ) -> None:
        super().__init__(state=state, **kwargs)
        self.on_stop = on_stop
        self._pushes = Coalescer(self._push, min_interval, now)
        self._stopped = False
        self.observe(self._stop_changed, names="stop_requested")

    def _push(self) -> None:
        raise NotImplementedError

    def _fallback(self) -> dict[str, str]:
        raise NotImplementedError

    def _stop_changed(self, change: dict[str, Any]) -> None:
        if change["new"] and not self._stopped:
            self._stopped = True
            if self.on_stop is not None:
                self.on_stop()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return _with_fallback(super()._repr_mimebundle_(**kwargs), self._fallback())


class TimelineWidget(LiveWidget):
    """Shows a run as it happens. Subscribe it to the agent's events (`bus.subscribe(widget)`).

    `on_stop` is called once when the user presses a Stop control (the ipywidgets button of
    `make_view`, or the small one the front end draws when it is shown alone).

    Args:
        on_stop: Called once when Stop is pressed; None for no Stop control.
        min_interval: The least seconds between two redraws while events stream.
        now: The monotonic clock (injectable for tests).
        wall: The wall clock (injectable for tests).
        **kwargs: Passed to anywidget's `AnyWidget`.

    Attributes:
        state: The synced state the front end draws (`TimelineState.snapshot()`).
        stop_requested: Set by the front end when Stop is pressed.
        show_stop: Whether the front end draws its own Stop control.
    """

    _esm = _HERE / "timeline.js"
    _css = _HERE / "timeline.css"

    def __init__(
        self,
        *,
        on_stop: Callable[[], None] | None = None,
        min_interval: float = 0.1,
        now: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        **kwargs: Any,
    ) -> None:
        self.timeline = TimelineState(wall=wall)
        super().__init__(self.timeline.snapshot(), on_stop, min_interval, now, **kwargs)

    def __call__(self, event: Event) -> None:
        self.timeline(event)
        self._pushes.changed(force=isinstance(event, RunFinished))

    def flush(self) -> None:
        """Push the current state to the browser now."""
        self._pushes.flush()

    def _push(self) -> None:
        snapshot = self.timeline.snapshot()
        with self.hold_sync():
            self.state = snapshot

    def close(self) -> None:
        """The run ended: push what is pending (the presenter seam's `LiveView.close`)."""
        self.flush()

    def request_stop(self) -> None:
        """What the Stop controls do: record the wish (synced to the browser) and call on_stop."""
        self.stop_requested = True

    def export_html(self, path: str | Path | None = None, *, title: str = "nbagent run") -> str:
        """The run so far as one self-contained HTML file (see `nbagent.notebook.export_html`).

        Args:
            path: Where to write the page; None to only return it.
            title: The page's title.

        Returns:
            The page's HTML.
        """
        from ._export import export_html

        return export_html(self.timeline.snapshot(), path, title=title)

    def _fallback(self) -> dict[str, str]:
        return _static_texts(self.timeline.snapshot())


class AgentView(ipywidgets.VBox):  # type: ignore[misc]
    """The Stop button above the timeline. `timeline` is the `TimelineWidget` to subscribe.

    Args:
        timeline: The `TimelineWidget` to subscribe.
        **kwargs: Passed to ipywidgets' `VBox`.
    """

    def __init__(self, timeline: TimelineWidget, **kwargs: Any) -> None:
        self.timeline = timeline
        self.stop_button = ipywidgets.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            tooltip="Cancel the run (the conversation stays as it was before the current step)",
            layout=ipywidgets.Layout(width="auto", align_self="flex-start"),
        )
        self.stop_button.on_click(lambda _button: timeline.request_stop())
        timeline.show_stop = False  # this button replaces the front end's own
        timeline.observe(self._update_button, names=["state", "stop_requested"])
        super().__init__(children=[self.stop_button, timeline], **kwargs)
        self._update_button()

    def __call__(self, event: Event) -> None:
        self.timeline(event)

    def _update_button(self, _change: object = None) -> None:
        state = self.timeline.state
        finished = bool(state.get("runs")) and not state.get("active")
        if finished:
            self.stop_button.disabled = True
            self.stop_button.description = "Finished"
            self.stop_button.button_style = ""
        elif self.timeline.stop_requested:
            self.stop_button.disabled = True
            self.stop_button.description = "Stopping…"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        return _with_fallback(bundle, _static_texts(self.timeline.timeline.snapshot()))


def make_view(
    widget: TimelineWidget | None = None, *, on_stop: Callable[[], None] | None = None
) -> AgentView:
    """The notebook display for a run: a Stop button and the live timeline.

    `on_stop` (e.g. the run handle's `cancel`) is called once when Stop is pressed.

    Args:
        widget: The timeline to show; None for a new one.
        on_stop: Called once when Stop is pressed.

    Returns:
        The view (Stop button and timeline); subscribe it to the agent's events.
    """
    timeline = widget if widget is not None else TimelineWidget()
    if on_stop is not None:
        timeline.on_stop = on_stop
    return AgentView(timeline)


def _static_texts(snapshot: dict[str, Any]) -> dict[str, str]:
    """A run's text and static HTML, for frontends that cannot render widgets."""
    from ._export import render_static_html, render_text

    return {"text/plain": render_text(snapshot), "text/html": render_static_html(snapshot)}


def _with_fallback(bundle: Any, texts: dict[str, str]) -> Any:
    """Add `texts` for frontends that cannot render widgets (nbconvert, GitHub, a terminal)."""
    data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
    if not isinstance(data, dict):
        return bundle
    return {**data, **texts}, metadata
