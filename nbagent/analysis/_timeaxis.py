"""A time axis that shortens long quiet stretches, so a 10 ms attempt next to a 1 s wait shows.

A session's picture is mostly waiting: one Retry-After of a second dwarfs the twenty attempts
around it, each a few milliseconds long, and a linear axis turns them into slivers. Here every
stretch in which nothing runs (a wait, or idle time between runs) longer than a threshold is
drawn shorter, growing only with the logarithm of its length, and is marked on the axis with a
break sign. Everything that runs keeps its true proportions. The mapping is monotonic and
piecewise linear; the plot draws in its positions and labels the axis in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._palette import COLORS, LABEL_FONT_SIZE

__all__ = ["TimeAxis", "compressed_axis"]

# a quiet stretch is shortened when it is longer than this share of the busy time
_THRESHOLD_SHARE = 0.15
# ... and never below this share of the whole span (a session of instants)
_MIN_THRESHOLD_SHARE = 0.01
# ticks closer than this share of the drawn width are dropped
_TICK_SPACING = 0.075


@dataclass(frozen=True)
class TimeAxis:
    """Seconds (from the first attempt) to drawn position, and the stretches shortened."""

    times: np.ndarray[Any, Any]
    positions: np.ndarray[Any, Any]
    breaks: tuple[tuple[float, float], ...] = field(default=())

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
        ticks = self.ticks()
        ax.set_xticks(self.forward(ticks), labels=[_tick_label(t, self.span) for t in ticks])

    def ticks(self) -> list[float]:
        """Round times to label: the start, the end of each shortened stretch, and round steps
        in between, never closer together than about a thirteenth of the drawn width."""
        width = self.width if self.width > 0 else 1.0
        step = _nice_step(width / 7)
        candidates: list[tuple[float, int]] = [(0.0, 0)]
        candidates += [(end, 1) for _, end in self.breaks]
        edges = [0.0, *[x for gap in self.breaks for x in gap], self.span]
        for a, b in zip(edges[::2], edges[1::2], strict=False):
            k = math.ceil(a / step - 1e-9)
            while k * step <= b + 1e-9:
                candidates.append((k * step, 2))
                k += 1
        chosen: list[float] = []
        # break ends first (they say where time jumps), then the round steps that still fit
        for t, _ in sorted(candidates, key=lambda c: (c[1], c[0])):
            u = float(self.forward(t))
            if all(abs(u - float(self.forward(c))) >= _TICK_SPACING * width for c in chosen):
                chosen.append(t)
        return sorted(chosen)


def _interp(x: np.ndarray[Any, Any], xs: np.ndarray[Any, Any], ys: np.ndarray[Any, Any]) -> Any:
    """np.interp, continued with slope 1 beyond both ends (axis margins live there)."""
    out = np.interp(x, xs, ys)
    out = np.where(x < xs[0], ys[0] + (x - xs[0]), out)
    return np.where(x > xs[-1], ys[-1] + (x - xs[-1]), out)


def _tick_label(t: float, span: float) -> str:
    if span >= 120:
        minutes, seconds = divmod(round(t), 60)
        return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    digits = 0 if span >= 20 else 1 if span >= 2 else 2 if span >= 0.2 else 3
    return f"{t:.{digits}f}s"


def _nice_step(raw: float) -> float:
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    unit = 10.0 ** math.floor(math.log10(raw))
    return next(m * unit for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * unit >= raw * (1 - 1e-12))


def _merge(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def compressed_axis(busy: Sequence[tuple[float, float]], span: float) -> TimeAxis:
    """The axis for bars at `busy` (seconds from 0) on a picture `span` seconds long.

    Quiet stretches longer than the threshold T (15 % of the busy time, at least 1 % of the
    span) are drawn T·(1 + log10(length / T)) long: a second becomes about two T, a minute
    about four, and the order of lengths is kept.
    """
    span = max(span, max((e for _, e in busy), default=0.0), 0.0)
    merged = _merge([(max(0.0, s), max(s, e)) for s, e in busy])
    total_busy = sum(e - s for s, e in merged)
    threshold = max(total_busy * _THRESHOLD_SHARE, span * _MIN_THRESHOLD_SHARE, 1e-9)
    quiet: list[tuple[float, float]] = []
    cursor = 0.0
    for start, end in merged:
        if start > cursor:
            quiet.append((cursor, start))
        cursor = max(cursor, end)
    if span > cursor:
        quiet.append((cursor, span))
    times, positions, breaks = [0.0], [0.0], []
    for start, end in quiet:
        length = end - start
        if length <= threshold:
            continue
        drawn = threshold * (1 + math.log10(length / threshold))
        u_start = positions[-1] + (start - times[-1])
        times += [start, end]
        positions += [u_start, u_start + drawn]
        breaks.append((start, end))
    if span > times[-1]:
        positions.append(positions[-1] + (span - times[-1]))
        times.append(span)
    if len(times) == 1:  # nothing at all: a unit axis
        times.append(max(span, 1.0))
        positions.append(max(span, 1.0))
    return TimeAxis(np.array(times), np.array(positions), tuple(breaks))
