"""Summaries and figures from attempt frames (`agent.attempts`, or a simulation's frame).

Every plot returns a `matplotlib.figure.Figure` built without pyplot: nothing pops up, nothing
is registered globally, nothing leaks when a notebook re-runs a cell. The figures render
themselves as PNG in Jupyter (`_repr_png_`) and can be saved with `fig.savefig(...)`.
An empty frame gives a figure that says "no attempts" rather than an exception.

The figures use the live widget's colours, hatches and legend words (`nbagent._palette`).
"""

from __future__ import annotations

from .._core._policy import format_duration
from .._loop._durable_read import read_attempts
from .._palette import COLORS as _COLORS
from .._palette import SWATCHES as _SWATCHES
from ._tables import success_rate_by_attempt, summary, wait_kind
from ._timeline import plot_timeline
from ._waits import plot_backoff, plot_delays
from ._what_if import plot_what_if

__all__ = [
    "ACTION_COLORS",
    "OUTCOME_COLORS",
    "WAIT_STYLES",
    "format_duration",
    "plot_backoff",
    "plot_delays",
    "plot_timeline",
    "plot_what_if",
    "read_attempts",
    "success_rate_by_attempt",
    "summary",
    "wait_kind",
]

OUTCOME_COLORS: dict[str, str] = {
    "ok": _COLORS["ok"],
    "error": _COLORS["error"],
    "cancelled": _COLORS["cancelled"],
}
"""The fill of an attempt by outcome, as in the widget."""

ACTION_COLORS: dict[str, str] = {
    "none": _COLORS["fg"],
    "retry": _COLORS["backoff"],
    "compact": _COLORS["compaction"],
    "tool_result": _COLORS["error"],
    "fallback": _COLORS["retry_after"],
    "fail": _COLORS["error_dark"],
    "paced": _COLORS["paced"],
}
"""A colour for each action, taken from what the widget draws for it."""

WAIT_STYLES: dict[str, tuple[str, str, str, str]] = {
    kind: (_SWATCHES[kind].word, _SWATCHES[kind].face, _SWATCHES[kind].edge, _SWATCHES[kind].hatch)
    for kind in ("backoff", "retry_after", "paced")
}
"""wait kind -> (legend word, face colour, edge colour, matplotlib hatch)."""
