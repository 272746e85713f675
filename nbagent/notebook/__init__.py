"""The notebook experience: a live timeline widget, its Stop button, and HTML export.

    widget = TimelineWidget()
    agent.events.subscribe(widget)          # or any EventBus
    display(make_view(widget, on_stop=handle.cancel))
    ...
    widget.export_html("run.html")          # the same picture, offline, in one file

`TimelineState` is the pure-Python part (events in, a JSON-able dict out) that the widget, the
export and the tests share. `playground()` is the retry-policy playground of notebook 3.
"""

from __future__ import annotations

from ._batch_view import BatchView as BatchView
from ._batch_view import show_batch_view as show_batch_view
from ._display import NotebookPresenter, display_view, in_notebook, start_shown
from ._export import export_html
from ._playground import Playground, playground
from ._state import TimelineState
from ._widget import AgentView, TimelineWidget, make_view

__all__ = [
    "AgentView",
    "NotebookPresenter",
    "Playground",
    "TimelineState",
    "TimelineWidget",
    "display_view",
    "export_html",
    "in_notebook",
    "make_view",
    "playground",
    "start_shown",
]
