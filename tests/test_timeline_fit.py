"""What `plot_timeline` writes fits where it is written, and its axis reads as a ruler.

Measured on the drawn figure (matplotlib's Agg renderer, pixel positions through transData):
every word inside a bar or a wait fits between its ends, and ticks with no "//" between them are
as far apart as their seconds say, at the same pixels per second as the bars (issue 37: "atte",
"Stre" and an axis whose 0→0.25 s and 1.00→1.25 s differed by a factor of two).
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text

from nbagent._loop._frame import frame_from_records
from nbagent.analysis import plot_timeline


def row(run: str, phase: str, start: float, end: float, **fields: object) -> dict[str, object]:
    return {
        "run_id": run,
        "turn": 1,
        "phase": phase,
        "started_at": start,
        "ended_at": end,
        "duration_s": end - start,
        "outcome": "ok",
        "action": "none",
        "attempt": 1,
        **fields,
    }


def demo_frame() -> pd.DataFrame:
    """The shape of `nbagent demo`'s session: a 429 whose Retry-After is a second, a 503 with a
    backoff, a broken stream, then many attempts and tool calls of a few milliseconds."""
    failed = {"outcome": "error", "action": "retry"}
    rows = [
        row("a", "request", 0.0, 0.384, **failed, status_code=429, error_kind="RateLimited",
            delay_s=1.0, retry_after_s=1.0),
        row("a", "request", 1.45, 1.503, **failed, attempt=2, status_code=503,
            error_kind="ServerError", delay_s=0.15),
        row("a", "request", 1.678, 1.760, attempt=3, status_code=200),
        row("a", "tool", 1.802, 1.803, tool_name="calculator"),
        row("a", "request", 1.804, 1.840, turn=2, status_code=200),
        row("b", "request", 1.841, 1.878, status_code=200),
        row("b", "tool", 1.878, 1.882, tool_name="read_file"),
        row("b", "request", 1.883, 1.912, **failed, error_kind="StreamInterrupted",
            delay_s=0.33),
        row("b", "request", 2.242, 2.268, attempt=2, status_code=200),
        row("c", "request", 2.269, 2.312, status_code=200),
        row("c", "tool", 2.312, 2.3121, tool_name="delete_everything", outcome="error",
            error_kind="unknown_tool", action="tool_result"),
        row("c", "request", 2.313, 2.354, status_code=200),
        row("d", "request", 2.390, 2.395, status_code=400, outcome="error", action="compact",
            error_kind="ContextOverflow"),
        row("d", "compaction", 2.396, 2.401, status_code=200),
        row("d", "request", 2.401, 2.406, attempt=2, status_code=200),
        row("e", "request", 2.407, 2.431, status_code=429, outcome="error", action="fail",
            error_kind="QuotaExceeded"),
    ]  # fmt: skip
    return frame_from_records(rows)


def drawn(fig: Figure) -> Any:
    fig.draw_without_rendering()
    (ax,) = fig.axes
    return ax


def px(ax: Any, x: float) -> float:
    return float(ax.transData.transform((x, 0))[0])


def shapes(ax: Any) -> list[tuple[float, float, float, float]]:
    """Every bar and wait drawn, as (left, right, bottom, top) in pixels."""
    out = []
    for collection in ax.collections:
        for path in collection.get_paths():
            (x0, y0), (x1, y1) = ax.transData.transform(path.vertices[[0, 2]])
            out.append((min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)))
    return out


def test_every_word_inside_a_bar_or_a_wait_fits_between_its_ends() -> None:
    fig = plot_timeline(demo_frame())
    ax = drawn(fig)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    inside = [t for t in ax.texts if t.get_ha() == "center" and t.get_text() != "//"]
    assert inside, "the demo's bars carry words"
    boxes = shapes(ax)
    for text in inside:
        extent = text.get_window_extent(renderer)
        cx, cy = (extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2
        holders = [b for b in boxes if b[0] <= cx <= b[1] and b[2] <= cy <= b[3]]
        assert holders, text.get_text()
        # the narrowest shape under the words' centre is the one they name
        left, right, _, _ = min(holders, key=lambda b: b[1] - b[0])
        assert left - 0.5 <= extent.x0 and extent.x1 <= right + 0.5, (
            text.get_text(),
            (extent.x0, extent.x1),
            (left, right),
        )


def tick_seconds(ax: Any) -> list[tuple[float, float]]:
    """(seconds the tick says, its pixel x)."""
    labels: list[Text] = ax.get_xticklabels()
    return [
        (float(t.get_text().removesuffix("s")), px(ax, x))
        for t, x in zip(labels, ax.get_xticks(), strict=True)
    ]


def test_between_two_breaks_the_axis_is_linear_at_the_bars_scale() -> None:
    df = demo_frame()
    ax = drawn(plot_timeline(df))
    marks = [px(ax, t.get_position()[0]) for t in ax.texts if t.get_text() == "//"]
    assert len(marks) >= 2, "the demo's quiet stretches are drawn shorter"
    ticks = tick_seconds(ax)
    assert ticks[0][0] == 0.0, ticks
    # the bars keep their true proportions: the first one (the 429, 0.384 s from 0 s) gives the
    # pixels per second the ticks must keep too
    first = min((b for b in shapes(ax) if abs(b[0] - ticks[0][1]) < 1), key=lambda b: b[2])
    bar = (first[1] - first[0]) / 0.384
    assert len(ticks) >= 3, ticks
    pairs = [
        (a, b) for a, b in itertools.pairwise(ticks) if not any(a[1] < m < b[1] for m in marks)
    ]
    assert pairs, ticks  # some ticks with no "//" between them
    for (t0, x0), (t1, x1) in pairs:
        scale = (x1 - x0) / (t1 - t0)
        assert abs(scale / bar - 1) < 0.02, (t0, t1, scale, bar)


def test_words_on_crossed_out_bars_sit_on_a_plain_patch_and_no_words_overlap() -> None:
    from test_palette_access import contrast

    from nbagent._palette import SWATCHES

    df = demo_frame()
    df.loc[2, "action"] = "reask"  # a "↻ reask" on its dotted bar, as notebook 12 draws one
    df.loc[2, ["outcome", "error_kind"]] = ["error", "OutputInvalid"]
    # a paced wait right after an attempt (notebook 12's "#1" under "paced 0.0s")
    df.loc[4, ["action", "delay_s"]] = ["paced", 0.02]
    fig = plot_timeline(df)
    ax = drawn(fig)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    marked = {s.face: s for s in SWATCHES.values() if s.mark}
    words = [t for t in ax.texts if t.get_text().strip() and t.get_text() != "//"]
    on_marks = 0
    for text in words:
        patch = text.get_bbox_patch()
        if patch is not None and to_hex(patch.get_facecolor()) in marked:
            on_marks += 1
            face = to_hex(patch.get_facecolor())
            assert patch.get_alpha() in (None, 1.0), text.get_text()
            assert contrast(to_hex(text.get_color()), face) >= 4.5, text.get_text()
    assert on_marks >= 2, [t.get_text() for t in words]  # the 429 and the reask at least
    boxes = [t.get_window_extent(renderer) for t in words]
    for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
        assert not a.overlaps(b), (words[i].get_text(), words[j].get_text())
