"""`plot_timeline`: the widget's timeline as a static figure, for a run, a session or a batch.

It speaks the widget's visual language (`nbagent._palette`, Okabe–Ito based): attempts green
when they got an answer and vermillion and crossed out when they failed, tool calls dark blue,
or dark wine and crossed out, compactions blue, the backoff after a failure in amber stripes and a
server's Retry-After in purple ones, with the widget's legend words. One row per run, labelled
by its prompt when the caller knows it; a row has a lane for each phase it used (requests, and
tools or compaction only when there were some). Long quiet stretches are drawn shorter and
marked "//" on the axis (`nbagent._axis`, the mapping the widget and the HTML report use too),
so short attempts stay visible next to a long wait; the ticks stay round, one step apart. The
attempt a run failed on is labelled beside its bar when the bar is too narrow for the words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .._axis import Axis, picture_axis
from .._palette import COLORS, FONT_SIZE, LABEL_FONT_SIZE, LEGEND, REASK_GLYPH, SWATCHES
from ._figures import bar_style, legend_patch, new_figure, nothing, style_axes, text_patch
from ._tables import frame, wait_kind
from ._timeaxis import apply_axis

_PHASES = ("request", "compaction", "tool")
_LANE_NAMES = {"request": "requests", "compaction": "compaction", "tool": "tools"}
_LANE_IN = 0.3  # inches per lane
_ROW_GAP = 0.5  # lanes of space between runs
_BAR = 0.78  # share of a lane a bar fills
_WAIT_LABELS = {"backoff": "backoff", "retry_after": "Retry-After", "paced": "paced"}
_LABEL = {"va": "center", "fontsize": LABEL_FONT_SIZE, "zorder": 5}  # words on the picture


def short_label(text: str, limit: int = 38) -> str:
    """One line of at most `limit` characters: a prompt as a row label."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


@dataclass
class _Rows:
    """Where each run's lanes sit: y of the top of each (run, phase) lane, y grows downward."""

    order: list[str]
    lanes: dict[tuple[str, str], float]
    height: float
    hidden: int


def _layout(run: np.ndarray[Any, Any], phase: np.ndarray[Any, Any], max_groups: int) -> _Rows:
    used: dict[str, set[str]] = {}  # the phases of each run, the runs in the order they began
    for r, p in zip(run, phase, strict=True):
        used.setdefault(r, set()).add(p)
    order = list(used)
    shown = order[: max(1, max_groups)]
    lanes: dict[tuple[str, str], float] = {}
    y = 0.0
    for r in shown:
        for p in [p for p in _PHASES if p in used[r]] or ["request"]:
            lanes[(r, p)] = y
            y += 1.0
        y += _ROW_GAP
    return _Rows(shown, lanes, max(y - _ROW_GAP, 1.0), len(order) - len(shown))


def _row_labels(order: list[str], labels: Mapping[str, str] | None) -> dict[str, str]:
    """The prompt, shortened; the run id only where needed (no prompt, or the same prompt
    asked twice)."""
    known = dict(labels or {})
    out = {r: short_label(known[r]) if known.get(r) else short_label(r, 20) for r in order}
    seen = Counter(out.values())
    for r in order:
        if seen[out[r]] > 1 and known.get(r):
            out[r] = f"{short_label(known[r], 28)} · {r[:8]}"
    return out


def _swatch_key(phase: str, outcome: str, action: str = "") -> str:
    if outcome == "cancelled":
        return "cancelled"
    if action == "reask":
        return "reask"  # a structured answer asked for again: dotted, not crossed out
    if phase == "tool":
        return "tool_ok" if outcome == "ok" else "tool_error"
    if phase == "compaction":
        return "compaction" if outcome == "ok" else "failed"
    return "ok" if outcome == "ok" else "failed"


def _bar_text(row: pd.Series[Any], phase: str) -> str:
    if phase == "tool":
        name = row["tool_name"]
        return str(name) if isinstance(name, str) else "tool"
    if phase == "compaction":
        return "compaction"
    if row["outcome"] == "ok":
        attempt = row["attempt"]
        return f"#{int(attempt)}" if not pd.isna(attempt) else ""
    if row["action"] == "reask":
        return f"{REASK_GLYPH} reask"
    code = row["status_code"]
    kind = None if pd.isna(row["error_kind"]) else str(row["error_kind"])
    if kind in ("OutputInvalid", "OutputTruncated") or pd.isna(code):
        text = kind or "error"  # an answer that came (200) and was refused: say why
    else:
        text = str(int(code))
    if row["action"] in ("fail", "compact", "fallback"):
        text += f" → {row['action']}"
    return text


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 10 else f"{value:.0f}s"


@dataclass
class _Picture:
    """The rows of a frame placed on lanes and a time axis: what gets drawn, and where."""

    df: pd.DataFrame
    rows: _Rows
    axis: Axis
    phase: np.ndarray[Any, Any]
    start: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    lane_y: np.ndarray[Any, Any]
    bar_y: np.ndarray[Any, Any]
    bar_h: np.ndarray[Any, Any]
    bars: np.ndarray[Any, Any]
    delay: np.ndarray[Any, Any]
    kinds: np.ndarray[Any, Any]
    keys: np.ndarray[Any, Any]

    def legend_keys(self) -> list[str]:
        """The widget's legend entries for what is drawn (ok and failed always)."""
        present = set(self.keys[self.bars]) | {k for k in self.kinds if isinstance(k, str)}
        shown = (*LEGEND, "paced", "reask")
        return [k for k in shown if k in present or k in ("ok", "failed")]


def _picture(df: pd.DataFrame, max_groups: int, compress: bool) -> _Picture | str:
    """Place the rows; a string says why there is nothing to draw."""
    df = frame(df)
    if len(df) == 0:
        return "no attempts"
    start = df["started_at"].to_numpy(dtype=float).copy()
    end = df["ended_at"].to_numpy(dtype=float).copy()
    dur = df["duration_s"].to_numpy(dtype=float)
    # rows that lack a start (an end without its start event) are drawn as instants
    start = np.where(np.isnan(start), end - np.nan_to_num(dur), start)
    end = np.where(np.isnan(end), start + np.nan_to_num(dur), end)
    valid = ~np.isnan(start)
    if not valid.any():
        return "no attempts with times"
    df, start, end = df[valid], start[valid], end[valid]
    t0 = float(np.min(start))
    start, end = start - t0, end - t0

    order = np.argsort(start, kind="stable")
    run = df["run_id"].astype(object).fillna("").astype(str).to_numpy()[order]
    phase = df["phase"].astype(object).fillna("request").astype(str).to_numpy()[order]
    df, start, end = df.iloc[order], start[order], end[order]
    rows = _layout(run, phase, max_groups)
    keep = np.array([(r, p) in rows.lanes for r, p in zip(run, phase, strict=True)], dtype=bool)
    df, start, end, run, phase = df[keep], start[keep], end[keep], run[keep], phase[keep]

    delay = np.nan_to_num(df["delay_s"].to_numpy(dtype=float))
    bars = ~(df["action"] == "paced").to_numpy(dtype=bool)
    span = float(max(np.max(end), np.max(end + delay)))
    # quiet stretches are shortened only when a linear axis would shrink a typical bar to a
    # sliver: the rule (and the mapping) the widget and the HTML report use too
    busy = [(float(s), float(e)) for s, e in zip(start[bars], end[bars], strict=True)]
    axis = picture_axis(busy, span, compress)
    lane_y = np.array([rows.lanes[(r, p)] for r, p in zip(run, phase, strict=True)])
    bar_y, bar_h = _stack_overlaps(phase, run, start, end, lane_y + (1 - _BAR) / 2, _BAR)
    outcome = df["outcome"].astype(object).fillna("error").astype(str).to_numpy()
    action = df["action"].astype(object).fillna("").astype(str).to_numpy()
    keys = np.array([_swatch_key(p, o, a) for p, o, a in zip(phase, outcome, action, strict=True)])
    return _Picture(
        df,
        rows,
        axis,
        phase,
        start,
        end,
        lane_y,
        bar_y,
        bar_h,
        bars,
        delay,
        wait_kind(df).to_numpy(),
        keys,
    )


def _draw(ax: Any, pic: _Picture, labels: Mapping[str, str] | None, lane_height: float) -> None:
    """Lanes, bars, waits and row labels on `ax` (no title, legend or bar labels)."""
    style_axes(ax, grid="x")
    axis = pic.axis
    apply_axis(axis, ax)
    # everything is drawn in the axis' positions, not in seconds
    at = np.vectorize(axis.at, otypes=[float])
    min_w = axis.width * 0.006  # instants stay visible
    for kind in ("backoff", "retry_after", "paced"):  # the waits, behind the bars
        sel = (pic.kinds == kind) & (pic.delay > 0)
        if sel.any():
            end = pic.end[sel]
            style = bar_style(SWATCHES[kind])
            _boxes(
                ax,
                at(end),
                at(end + pic.delay[sel]),
                pic.lane_y[sel] + 0.19,
                0.62,
                zorder=2,
                **style,
            )
    for key in dict.fromkeys(pic.keys[pic.bars]):  # the attempts and tool calls
        sel = pic.bars & (pic.keys == key)
        left = at(pic.start[sel])
        right = np.maximum(at(pic.end[sel]), left + min_w)
        swatch = SWATCHES[key]
        _boxes(
            ax,
            left,
            right,
            pic.bar_y[sel],
            pic.bar_h[sel],
            zorder=3,
            facecolor=swatch.face,
            edgecolor="white",
            linewidth=0.4,
            hatch=swatch.mark or None,  # failures are crossed out, not only red
        )
    for i in np.flatnonzero((pic.df["action"] == "fallback").to_numpy(dtype=bool)):
        y = pic.lane_y[i]
        ax.plot([at(pic.end[i])] * 2, [y, y + 1], color=COLORS["retry_after"], lw=2, zorder=4)

    rows = pic.rows
    ticks, names, is_run = [], [], []
    row_text = _row_labels(rows.order, labels)
    for r in rows.order:
        for k, (p, y) in enumerate((p, y) for (rr, p), y in rows.lanes.items() if rr == r):
            ticks.append(y + 0.5)
            names.append(row_text[r] if k == 0 else _LANE_NAMES[p])
            is_run.append(k == 0)
    every = max(1, round(LABEL_FONT_SIZE * 1.3 / 72 / lane_height))  # labels must not overlap
    ax.set_yticks(ticks[::every], labels=names[::every])
    for tick, first in zip(ax.get_yticklabels(), is_run[::every], strict=True):
        if first:
            tick.set(color=COLORS["fg"], fontsize=FONT_SIZE)
        else:
            tick.set(color=COLORS["muted"], fontsize=LABEL_FONT_SIZE, fontstyle="italic")
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(rows.height + 0.15, -0.15)
    margin = axis.width * 0.01
    ax.set_xlim(-margin, axis.width + margin)
    note = "; // marks a stretch drawn shorter" if axis.breaks else ""
    ax.set_xlabel(f"seconds from the first attempt{note}")


def draw_timeline(ax: Any, df: pd.DataFrame, *, max_groups: int, lane_height: float) -> None:
    """`plot_timeline`'s picture on an existing Axes: the playground composes its own figure,
    of a simulation's frame, which always holds attempts with times."""
    pic = _picture(df, max_groups, compress=True)
    assert not isinstance(pic, str), pic
    _draw(ax, pic, None, lane_height)


def plot_timeline(
    df: pd.DataFrame,
    *,
    labels: Mapping[str, str] | None = None,
    max_groups: int = 40,
    annotate: bool | None = None,
    title: str | None = None,
    compress: bool = True,
) -> Figure:
    """Gantt-style, in the widget's colours: one row per run (labelled by `labels[run_id]`,
    e.g. the prompts), a lane per phase the run used, a bar per attempt or tool call, and the
    wait after a failed attempt striped (amber backoff, purple Retry-After, grey paced).

    Only the first `max_groups` runs are drawn. Times are seconds from the first attempt;
    with `compress` (the default) quiet stretches longer than a few attempts are drawn shorter
    and marked "//" on the axis. `annotate` writes status codes, attempt numbers, tool names
    and wait lengths where they fit (default: when there are at most 120 rows).

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.
        labels: A row label per `run_id` (the prompts, say); None for the run ids.
        max_groups: The most runs drawn.
        annotate: Whether to write codes, numbers and lengths on the bars; None for when there are
            at most 120 rows.
        title: The figure's title; None for none.
        compress: Whether to draw long quiet stretches shorter.

    Returns:
        A matplotlib figure (not shown; a notebook shows it as the cell's value). An empty frame
            gives a small figure that says so, never an exception.
    """
    pic = _picture(df, max_groups, compress)
    if isinstance(pic, str):
        return nothing(pic)
    fig = new_figure(10.0, 1.5 + _LANE_IN * pic.rows.height)
    ax = fig.add_subplot()
    _draw(ax, pic, labels, _LANE_IN)
    head = title or "Attempt timeline"
    if pic.rows.hidden:
        head += f" (first {len(pic.rows.order)} of {len(pic.rows.order) + pic.rows.hidden} runs)"
    fig.suptitle(head, x=0.01, ha="left", fontsize=FONT_SIZE + 1, color=COLORS["fg"])
    legend = pic.legend_keys()
    fig.legend(
        handles=[legend_patch(k) for k in legend],
        loc="outside lower center",
        ncol=len(legend),
        fontsize=LABEL_FONT_SIZE,
        frameon=False,
        handlelength=1.6,
        columnspacing=1.4,
    )
    if annotate if annotate is not None else len(pic.df) <= 120:
        _annotate(fig, ax, pic)
    return fig


def _annotate(fig: Figure, ax: Any, pic: _Picture) -> None:
    """Write labels inside the shapes they name, only where they fit (measured, not guessed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    fig.draw_without_rendering()
    axis, df = pic.axis, pic.df

    placed: list[Any] = []

    def place(a: float, b: float, y: float, text: str, **style: Any) -> bool:
        """Text centred between seconds `a` and `b`, kept only if it fits between them."""
        a, b = axis.at(a), axis.at(b)
        label = ax.text((a + b) / 2, y, text, ha="center", clip_on=True, **_LABEL, **style)
        room = abs(ax.transData.transform((b, 0))[0] - ax.transData.transform((a, 0))[0])
        box = label.get_window_extent(renderer)
        if box.width + 4 <= room and not any(box.overlaps(other) for other in placed):
            placed.append(box)  # words never cover words ("#1" under "paced 0.0s")
            return True
        label.remove()
        return False

    def beside(a: float, b: float, y: float, text: str) -> None:
        """Text next to the bar between seconds `a` and `b`: after it where the axes have room,
        else before it."""
        left, right = axis.at(a), axis.at(b)
        style = {**_LABEL, "color": COLORS["error_dark"]}
        label = ax.text(right, y, f" {text}", ha="left", **style)
        box = label.get_window_extent(renderer)
        if box.x1 > ax.get_window_extent(renderer).x1:
            label.remove()
            ax.text(left, y, f"{text} ", ha="right", **style)

    for i in range(len(df)):
        if pic.bars[i]:
            row = df.iloc[i]
            text = _bar_text(row, pic.phase[i])
            middle_y = pic.bar_y[i] + pic.bar_h[i] / 2
            if text:
                swatch = SWATCHES[pic.keys[i]]
                style: dict[str, Any] = {"color": swatch.ink}
                if swatch.mark:  # words on a crossed-out bar sit on a patch of its plain face
                    style["bbox"] = text_patch(swatch.face, "round,pad=0.2")
                fits = place(pic.start[i], pic.end[i], middle_y, text, **style)
                if not fits and row["action"] == "fail":  # how the run ended: never unsaid
                    kind = row["error_kind"]
                    named = isinstance(kind, str) and kind not in text
                    words = text.replace(" → fail", f" {kind} → fail") if named else text
                    beside(pic.start[i], pic.end[i], middle_y, words)
        kind, delay = pic.kinds[i], pic.delay[i]
        if isinstance(kind, str) and delay > 0:
            colour = {"retry_after": "retry_after_text", "backoff": "backoff_text"}.get(kind, "fg")
            wait_style = {
                "color": COLORS[colour],
                "bbox": text_patch("white", "round,pad=0.15", alpha=0.85),
            }
            a, b, y = pic.end[i], pic.end[i] + delay, pic.lane_y[i] + 0.5
            if not place(a, b, y, f"{_WAIT_LABELS[kind]} {_seconds(delay)}", **wait_style):
                place(a, b, y, _seconds(delay), **wait_style)


def _boxes(
    ax: Any,
    left: np.ndarray[Any, Any],
    right: np.ndarray[Any, Any],
    bottom: np.ndarray[Any, Any],
    height: Any,
    **style: Any,
) -> None:
    """Rectangles as one collection: a batch of 1,000 attempts draws in milliseconds, where
    one patch per bar takes most of a second."""
    from matplotlib.collections import PolyCollection

    top = bottom + height
    # each row: the corners (left, bottom), (left, top), (right, top), (right, bottom)
    verts = np.stack([left, bottom, left, top, right, top, right, bottom], axis=1)
    ax.add_collection(PolyCollection(list(verts.reshape(-1, 4, 2)), **style))


def _stack_overlaps(
    phase: np.ndarray[Any, Any],
    run: np.ndarray[Any, Any],
    start: np.ndarray[Any, Any],
    end: np.ndarray[Any, Any],
    y: np.ndarray[Any, Any],
    height: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Tool calls that run at the same time share their lane in thinner sub-lanes."""
    bar_y = y.astype(float).copy()
    bar_h = np.full(len(y), height)
    tools = np.flatnonzero(phase == "tool")
    for r in dict.fromkeys(run[tools]):
        idx = tools[run[tools] == r]
        idx = idx[np.argsort(start[idx], kind="stable")]
        lane_end: list[float] = []
        sub = np.zeros(len(idx), dtype=int)
        for k, i in enumerate(idx):
            for j, free_at in enumerate(lane_end):
                if free_at <= start[i]:
                    sub[k] = j
                    lane_end[j] = end[i]
                    break
            else:
                sub[k] = len(lane_end)
                lane_end.append(end[i])
        if len(lane_end) > 1:
            h = height / len(lane_end)
            bar_h[idx] = h
            bar_y[idx] = y[idx] + sub * h
    return bar_y, bar_h
