"""The seam through which a run is shown while it runs.

The core knows that a run may be shown, not how: the notebook package registers a `Presenter`
(the live timeline widget with its Stop button) when nbagent is imported, and the agent asks it
for a view when it runs in a notebook. Nothing below the notebook layer imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ._event_types import Event


class LiveView(Protocol):
    """A view of one run: a subscriber to its events, closed when the run ends."""

    def __call__(self, event: Event) -> None: ...

    def close(self) -> None:
        """The run ended: show what is still pending. The view stays on screen."""
        ...


class Presenter(Protocol):
    def active(self) -> bool:
        """True where a run can be shown (a notebook with a frontend), False in a terminal."""
        ...

    def open(self, on_stop: Callable[[], None] | None = None) -> LiveView:
        """Show an empty view now, under the current cell; `on_stop` is its Stop button."""
        ...


_current: list[Presenter] = []  # filled by `import nbagent`, before anything can run


def set_presenter(p: Presenter) -> None:
    """Register how runs are shown (the notebook package does, at `import nbagent`)."""
    _current[:] = [p]


def presenter() -> Presenter:
    return _current[0]
