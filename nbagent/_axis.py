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
        x0, x1 = xs[i], xs[i + 1]  # x0 <= t < x1: never a zero-length stretch
        return ys[i] + (ys[i + 1] - ys[i]) * (t - x0) / (x1 - x0)

    def labelled_ticks(self) -> list[tuple[float, str]]:
        """Round times to label, with their words (all with the decimals their step needs,
        "0.25s"): all multiples of one round step (0.25 s, 1 s, 5 s, …) of the true time,
        placed where the axis draws them: across a shortened stretch they sit closer together,
        which its "//" mark explains, but they read as one even count. Never closer together
        than about a thirteenth of the drawn width nor under a "//" sign; the coarser multiples
        are kept first, and the step is made finer until there are at least three. No tick
        falls inside a shortened stretch: between two "//" the scale is linear."""
        step = _nice_step(self.span / 7)  # the span is positive: `compressed` makes no empty axis
        best: tuple[list[float], float] = ([0.0], step)
        # where the "//" signs sit (the middle of each shortened stretch): no tick under one
        marks = [(self.at(a) + self.at(b)) / 2 for a, b in self.breaks]

        # nor inside a shortened stretch, where a second is drawn shorter than elsewhere: ticks
        # with no "//" between them are then as far apart as their times say (a linear scale)
        def outside(t: float) -> bool:
            return all(not (a + 1e-9 < t < b - 1e-9) for a, b in self.breaks)

        for _ in range(8):  # finer steps find room in the busy stretches between breaks
            count = int(self.span / step + 1e-9)
            # every fourth multiple first, then every second, then the rest
            order = sorted(range(count + 1), key=lambda k: (k % 4 != 0, k % 2 != 0, k))
            chosen: list[float] = []
            for k in order:
                if not outside(k * step):
                    continue
                u = self.at(k * step)
                clear = all(abs(u - m) >= _TICK_SPACING * self.width / 2 for m in marks)
                if clear and all(abs(u - self.at(c)) >= _TICK_SPACING * self.width for c in chosen):
                    chosen.append(k * step)
            if len(chosen) > len(best[0]):
                best = (chosen, step)
            if len(chosen) >= 3:
                break
            step = _nice_step(step / 2.01)
        ticks, step = best
        return [(t, tick_label(t, self.span, step)) for t in sorted(ticks)]

    def as_state(self, t0: float) -> dict[str, Any]:
        """The JSON the widget draws with: knots, breaks and labelled ticks, in seconds from
        `t0` on the agent's clock."""
        return {
            "t0": t0,
            "times": [round(t, 6) for t in self.times],
            "positions": [round(u, 6) for u in self.positions],
            "breaks": [[round(a, 6), round(b, 6)] for a, b in self.breaks],
            "ticks": [[round(t, 6), label] for t, label in self.labelled_ticks()],
        }


def tick_label(t: float, span: float, step: float) -> str:
    """A tick's words: as many decimals as the ticks' (positive) step needs, minutes past
    two."""
    if span >= 120:
        minutes, seconds = divmod(round(t), 60)
        return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    digits = next((d for d in range(7) if abs(round(step, d) - step) < step * 1e-6), 6)
    return f"{t:.{digits}f}s"


def _nice_step(raw: float) -> float:
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
    """The axis a picture of `busy` bars over `span` seconds (which end within it) is drawn
    on: compressed only when a linear axis would shrink a typical bar (the median) to a
    sliver, else linear."""
    lengths = [e - s for s, e in busy if e - s > 0]
    typical = statistics.median(lengths) if lengths else 0.0
    if compress and typical < span * _SLIVER:
        return compressed(busy, span)
    return compressed([(0.0, span)], span)
