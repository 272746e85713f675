"""The compressed time axis, computed once for the PNG, the live widget and the HTML report.

A session's picture is mostly waiting: one Retry-After of a second dwarfs the twenty attempts
around it, each a few milliseconds long, and a linear axis turns them into slivers. Every
stretch in which nothing runs (a wait, or idle time between runs) longer than a threshold is
drawn shorter, growing only with the logarithm of its length, and is marked with a break sign
("//"). Everything that runs keeps its true proportions. The mapping is monotonic and piecewise
linear, given by its knots (`times` → `positions`).

This module is the one source of truth: `nbagent.analysis` draws the static figures with it,
and `nbagent.notebook` ships the knots, breaks and ticks in the widget's state, where
timeline.js only interpolates between them. Pure Python, no imports of nbagent.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Axis", "compressed", "picture_axis", "tick_label"]

# a quiet stretch is shortened when it is longer than this share of the busy time
_THRESHOLD_SHARE = 0.15
# ... and never below this share of the whole span (a session of instants)
_MIN_THRESHOLD_SHARE = 0.01
# ticks closer than this share of the drawn width are dropped
_TICK_SPACING = 0.075
# shorten only when a linear axis would draw a typical bar narrower than this share of the span
_SLIVER = 0.015


@dataclass(frozen=True)
class Axis:
    """Seconds (from the first item) to drawn position, and the stretches shortened."""

    times: tuple[float, ...]
    positions: tuple[float, ...]
    breaks: tuple[tuple[float, float], ...] = field(default=())

    @property
    def span(self) -> float:
        return self.times[-1]

    @property
    def width(self) -> float:
        return self.positions[-1]

    def at(self, t: float) -> float:
        """Where second `t` is drawn (continued with slope 1 beyond both ends)."""
        xs, ys = self.times, self.positions
        if t <= xs[0]:
            return ys[0] + (t - xs[0])
        if t >= xs[-1]:
            return ys[-1] + (t - xs[-1])
        i = bisect.bisect_right(xs, t) - 1
        x0, x1 = xs[i], xs[i + 1]
        if x1 == x0:
            return ys[i + 1]
        return ys[i] + (ys[i + 1] - ys[i]) * (t - x0) / (x1 - x0)

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
            u = self.at(t)
            if all(abs(u - self.at(c)) >= _TICK_SPACING * width for c in chosen):
                chosen.append(t)
        return sorted(chosen)

    def as_state(self, t0: float) -> dict[str, Any]:
        """The JSON the widget draws with: knots, breaks and labelled ticks, in seconds from
        `t0` on the agent's clock."""
        return {
            "t0": t0,
            "times": [round(t, 6) for t in self.times],
            "positions": [round(u, 6) for u in self.positions],
            "breaks": [[round(a, 6), round(b, 6)] for a, b in self.breaks],
            "ticks": [[round(t, 6), tick_label(t, self.span)] for t in self.ticks()],
        }


def tick_label(t: float, span: float) -> str:
    """A tick's words: as many decimals as the span needs, minutes past two."""
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


def compressed(busy: Sequence[tuple[float, float]], span: float) -> Axis:
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
    return Axis(tuple(times), tuple(positions), tuple(breaks))


def picture_axis(busy: Sequence[tuple[float, float]], span: float, compress: bool = True) -> Axis:
    """The axis a picture of `busy` bars over `span` seconds is drawn on: compressed only when
    a linear axis would shrink a typical bar (the median) to a sliver, else linear."""
    lengths = [e - s for s, e in busy if e - s > 0]
    typical = statistics.median(lengths) if lengths else 0.0
    span = max(span, max((e for _, e in busy), default=0.0))
    if compress and typical < span * _SLIVER:
        return compressed(busy, span)
    return compressed([(0.0, span)], span)
