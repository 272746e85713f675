"""The notebook experience: a live timeline widget, its Stop button, and HTML export.

    widget = TimelineWidget()
    agent.events.subscribe(widget)          # or any EventBus
    display(make_view(widget, on_stop=handle.cancel))
    ...
    widget.export_html("run.html")          # the same picture, offline, in one file

`TimelineState` is the pure-Python part (events in, a JSON-able dict out) that the widget, the
export and the tests share.
"""

from __future__ import annotations

from .export import export_html
from .state import TimelineState
from .widget import AgentView, TimelineWidget, make_view

__all__ = [
    "AgentView",
    "TimelineState",
    "TimelineWidget",
    "export_html",
    "in_notebook",
    "make_view",
]


def in_notebook() -> bool:
    """True under an IPython kernel with a frontend (Jupyter, VS Code, Colab), not a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
