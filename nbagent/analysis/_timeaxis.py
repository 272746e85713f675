"""The compressed time axis on a matplotlib Axes: numpy positions, ticks and break signs.

The mapping itself (which quiet stretches are drawn shorter, and how much) is `nbagent._axis`,
shared with the live widget and the HTML report so that the three pictures agree; this module
turns it into arrays and draws its marks: round times as ticks and "//" on the axis line for
each shortened stretch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._axis import Axis, compressed, picture_axis
from .._palette import COLORS, LABEL_FONT_SIZE

__all__ = ["TimeAxis", "compressed_axis", "picture_time_axis"]


@dataclass(frozen=True)
class TimeAxis:
    """Seconds (from the first attempt) to drawn position, and the stretches shortened."""

    times: np.ndarray[Any, Any]
    positions: np.ndarray[Any, Any]
    breaks: tuple[tuple[float, float], ...] = field(default=())

    @classmethod
    def of(cls, axis: Axis) -> TimeAxis:
        return cls(np.array(axis.times), np.array(axis.positions), axis.breaks)

    @property
    def span(self) -> float:
        return float(self.times[-1])

    @property
    def width(self) -> float:
        return float(self.positions[-1])

    def forward(self, t: Any) -> Any:
        """Where seconds `t` (a number or an array) are drawn."""
        return _interp(np.asarray(t, dtype=float), self.times, self.positions)

    def apply(self, ax: Any) -> None:
        """Label `ax`'s x axis, which is drawn in positions (`forward` of the seconds), with
        round times, and mark each shortened stretch with a break sign ("//" on the axis line,
        as on a hand-drawn broken axis). Drawing in positions keeps the axis linear: a
        matplotlib function scale would transform every bar of a batch on every draw."""
        from matplotlib.transforms import blended_transform_factory

        on_axis = blended_transform_factory(ax.transData, ax.transAxes)
        for start, end in self.breaks:
            ax.text(
                float(self.forward(start) + self.forward(end)) / 2,
                0.0,
                "//",
                transform=on_axis,
                ha="center",
                va="center",
                fontsize=LABEL_FONT_SIZE + 1,
                fontweight="bold",
                color=COLORS["muted"],
                bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none"},
                clip_on=False,
                zorder=6,
            )
        ticks = self._shared().labelled_ticks()
        ax.set_xticks(self.forward([t for t, _ in ticks]), labels=[label for _, label in ticks])

    def ticks(self) -> list[float]:
        """Round times to label (`nbagent._axis.Axis.ticks`)."""
        return self._shared().ticks()

    def _shared(self) -> Axis:
        return Axis(
            tuple(float(t) for t in self.times),
            tuple(float(u) for u in self.positions),
            self.breaks,
        )


def _interp(x: np.ndarray[Any, Any], xs: np.ndarray[Any, Any], ys: np.ndarray[Any, Any]) -> Any:
    """np.interp, continued with slope 1 beyond both ends (axis margins live there)."""
    out = np.interp(x, xs, ys)
    out = np.where(x < xs[0], ys[0] + (x - xs[0]), out)
    return np.where(x > xs[-1], ys[-1] + (x - xs[-1]), out)


def compressed_axis(busy: Sequence[tuple[float, float]], span: float) -> TimeAxis:
    """The axis for bars at `busy` (seconds from 0) on a picture `span` seconds long
    (`nbagent._axis.compressed`)."""
    return TimeAxis.of(compressed([(float(s), float(e)) for s, e in busy], float(span)))


def picture_time_axis(
    busy: Sequence[tuple[float, float]], span: float, compress: bool = True
) -> TimeAxis:
    """The axis a picture is drawn on: compressed when a linear one would make slivers
    (`nbagent._axis.picture_axis`, the widget's rule too)."""
    pairs = [(float(s), float(e)) for s, e in busy]
    return TimeAxis.of(picture_axis(pairs, float(span), compress))
