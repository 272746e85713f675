"""The live view of a batch (`nbagent.map`, either backend): counts, pace, one lane per agent.

It reads a plain snapshot (`BatchProgress.snapshot()`: done / running / waiting / failed, the
shared limiter's pace, retries per minute, one letter per lane) and knows nothing of how the
batch runs, so the local and the Ray backend show the same picture. Lanes are a row per agent
for small batches and a heat-strip of cells when there are hundreds.

Pushes are coalesced as in `TimelineWidget`: at most one per `min_interval` (0.1 s, about ten a
second); an early one schedules a trailing push on the running loop, so the last change shows.
The colours are in `COLOURS`, the one place that names them (the front end gets them with the
state).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._core._words import counted
from .._palette import COLORS, DARK_COLORS
from ._widget import LiveWidget

_ROLES = {
    "queued": "border",
    "running": "running",
    "waiting": "backoff",
    "ok": "ok",
    "failed": "error",
    "cancelled": "cancelled",
}

COLOURS: dict[str, str] = {state: COLORS[role] for state, role in _ROLES.items()}
"""Lane state → colour, from the shared palette (`nbagent._palette`, colour-blind safe)."""

DARK_COLOURS: dict[str, str] = {state: DARK_COLORS[role] for state, role in _ROLES.items()}
"""The same in a dark theme."""

_HERE = Path(__file__).parent

LANE_ROWS_UP_TO = 48
"""Up to this many agents each get a labelled row; more become a heat-strip of cells."""


_CSS = (_HERE / "batch_view.css").read_text(encoding="utf-8")
for _role in ("muted", "panel"):
    _CSS = _CSS.replace(f"%({_role})s", COLORS[_role])
    _CSS = _CSS.replace(f"%(dark_{_role})s", DARK_COLORS[_role])


class BatchView(LiveWidget):
    """The live batch view. `update(snapshot)` with `BatchProgress.snapshot()` dicts."""

    _esm = _HERE / "batch_view.js"
    _css = _CSS

    def __init__(
        self,
        snapshot: dict[str, Any],
        *,
        on_stop: Callable[[], None] | None = None,
        min_interval: float = 0.1,
        now: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ) -> None:
        kwargs["show_stop"] = on_stop is not None
        super().__init__(_dress(snapshot), on_stop, min_interval, now, **kwargs)
        self._latest = snapshot
        self._finished = False

    @property
    def pushes(self) -> int:
        """How many times the state was sent to the browser."""
        return self._pushes.count

    def update(self, snapshot: dict[str, Any], force: bool = False) -> None:
        """Show `snapshot`: now if the last push is old enough (or `force`), else shortly."""
        self._latest = snapshot
        self._pushes.changed(force)

    def finished(self) -> None:
        """The batch is over: no more Stop button, the last picture stays."""
        self._finished = True
        self._latest = dict(self.state)
        self._pushes.flush()

    def _push(self) -> None:
        self.state = _dress(self._latest, finished=self._finished)

    def _fallback(self) -> dict[str, str]:
        return {"text/plain": render_text(self.state)}


def _dress(snapshot: dict[str, Any], finished: bool = False) -> dict[str, Any]:
    return {
        **snapshot,
        "colours": COLOURS,
        "colours_dark": DARK_COLOURS,
        "rows_up_to": LANE_ROWS_UP_TO,
        "finished": finished,
    }


def render_text(state: dict[str, Any]) -> str:
    """The view as one line of text, for front ends without widgets."""
    rate = (state.get("pace") or {}).get("rate")
    pace = f", pace {rate:.1f}/s" if isinstance(rate, (int, float)) else ""
    batches = state.get("batches") or []
    open_ = sum(1 for b in batches if not b.get("collected"))
    provider = (
        f", {counted(len(batches), 'provider batch', 'provider batches')} ({open_} open)"
        if batches
        else ""
    )
    return (
        f"nbagent.map: {state.get('done', 0)}/{state.get('total', 0)} done, "
        f"{state.get('running', 0)} running, {state.get('waiting', 0)} waiting, "
        f"{state.get('failed', 0)} failed, {state.get('retries_per_min', 0)} retries/min{pace}"
        + (f", {state['reasked']} reasked" if state.get("reasked") else "")
        + f"{provider}"
    )


def show_batch_view(
    snapshot: dict[str, Any], on_stop: Callable[[], None] | None = None
) -> BatchView:
    """Display a batch view under the current cell (with a Stop button when `on_stop`)."""
    from IPython.display import display

    view = BatchView(snapshot, on_stop=on_stop)
    display(view)  # type: ignore[no-untyped-call]
    return view
