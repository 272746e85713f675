from __future__ import annotations

import io
import itertools
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text
from test_attempts import scripted_frame

from nbagent._core._retry import RetryPolicy
from nbagent._loop._attempt_log import AttemptLog
from nbagent._loop._frame import coerce, empty_frame, frame_from_records
from nbagent._palette import COLORS, SWATCHES
from nbagent.analysis import (
    plot_backoff,
    plot_delays,
    plot_timeline,
    success_rate_by_attempt,
    summary,
    wait_kind,
)
from nbagent.events import AttemptFailed, AttemptStarted, AttemptSucceeded, RetryScheduled
from nbagent.simulate import simulate_contention, simulate_retries

ARTIFACTS = Path(__file__).parent / "artifacts"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    assert data.startswith(PNG_MAGIC)
    return data


def test_summary_groups_by_error_kind_and_action() -> None:
    s = summary(scripted_frame())
    assert list(s.columns[:4]) == ["error_kind", "action", "count", "retries"]
    rows = {(r.error_kind, r.action): r for r in s.itertuples()}
    assert rows[("ok", "none")].count == 3  # the request, a tool call, the compaction
    over = rows[("Overloaded", "retry")]
    assert over.count == 1 and over.retries == 1 and over.wait_total_s == 1.25
    rate = rows[("RateLimited", "retry")]
    assert rate.retry_after_waits == 1 and rate.wait_mean_s == 2.0
    assert rows[("ok", "paced")].wait_total_s == 0.75
    assert rows[("raised", "tool_result")].count == 1
    assert rows[("ContextOverflow", "compact")].retries == 0
    assert int(s["count"].sum()) == 8
    assert len(summary(empty_frame())) == 0


def test_success_rate_by_attempt() -> None:
    log = AttemptLog()
    # three requests: ok at 1; ok at 2; failed at 1, 2, 3 (gave up)
    script = [("a", [True]), ("b", [False, True]), ("c", [False, False, False])]
    t = 0.0
    for run, outcomes in script:
        for n, ok in enumerate(outcomes, start=1):
            log(
                AttemptStarted(
                    phase="request", model="", run_id=run, time=t, attempt=n, max_attempts=3
                )
            )
            t += 1
            if ok:
                log(
                    AttemptSucceeded(
                        phase="request", model="", run_id=run, time=t, attempt=n, max_attempts=3
                    )
                )
            else:
                log(
                    AttemptFailed(
                        phase="request",
                        max_attempts=1,
                        model="",
                        error="",
                        message="",
                        run_id=run,
                        time=t,
                        attempt=n,
                        action="retry",
                    )
                )
                log(
                    RetryScheduled(
                        phase="request",
                        next_attempt=2,
                        max_attempts=1,
                        model="",
                        policy_delay_s=0.0,
                        error="",
                        message="",
                        run_id=run,
                        time=t,
                        attempt=n,
                        delay_s=0.5,
                    )
                )
    r = success_rate_by_attempt(log.frame())
    assert list(r.index) == [1, 2, 3]
    assert list(r["attempts"]) == [3, 2, 1]
    assert list(r["succeeded"]) == [1, 1, 0]
    assert list(r["success_rate"]) == [1 / 3, 1 / 2, 0.0]
    assert list(r["share"]) == [1 / 3, 1 / 3, 0.0]
    assert r["cumulative_share"].iloc[-1] == pytest.approx(2 / 3)
    assert len(success_rate_by_attempt(empty_frame())) == 0


def test_wait_kind() -> None:
    kinds = list(wait_kind(scripted_frame()))
    assert kinds == ["backoff", "retry_after", None, None, None, None, "paced", None]


def test_plots_render_headless() -> None:
    df = scripted_frame()
    policy = RetryPolicy(max_attempts=4, initial_delay=0.5, seed=1)
    sim = simulate_retries(policy, 0.5, 30, seed=3)
    figures = [
        plot_timeline(df),
        plot_backoff(df, policy),
        plot_delays(df),
        plot_timeline(sim, max_groups=10),
        plot_backoff(sim, policy, logy=True),
        plot_delays(sim),
    ]
    for fig in figures:
        assert isinstance(fig, Figure)
        assert len(png(fig)) > 10_000
    # never registered with pyplot: nothing to close, nothing leaks
    if "matplotlib.pyplot" in sys.modules:
        from matplotlib import _pylab_helpers

        assert all(
            m.canvas.figure not in figures for m in _pylab_helpers.Gcf.get_all_fig_managers()
        )


def test_empty_frames_say_so() -> None:
    policy = RetryPolicy()
    for fig in (
        plot_timeline(empty_frame()),
        plot_backoff(empty_frame(), policy),
        plot_delays(empty_frame()),
    ):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert "no attempts" in texts
        assert png(fig)
    only_ok = simulate_retries(policy, 0.0, 3, seed=0)
    assert png(plot_backoff(only_ok, policy))
    assert png(plot_delays(only_ok))


def test_repr_png_for_jupyter() -> None:
    fig = plot_delays(scripted_frame())
    data = fig._repr_png_()  # type: ignore[attr-defined]
    assert data.startswith(PNG_MAGIC)


def test_plots_accept_a_frame_read_back_from_csv() -> None:
    buf = io.StringIO()
    scripted_frame().to_csv(buf, index=False)
    buf.seek(0)
    raw = pd.read_csv(buf)
    assert len(png(plot_timeline(raw))) > 10_000
    pd.testing.assert_frame_equal(summary(raw), summary(coerce(raw)))


def test_timeline_artifact() -> None:
    frames = [scripted_frame(), simulate_contention(8, "full", seed=0)]
    ARTIFACTS.mkdir(exist_ok=True)
    plot_timeline(frames[0], title="Scripted run").savefig(ARTIFACTS / "timeline.png")
    plot_timeline(frames[1], title="8 clients, full jitter").savefig(
        ARTIFACTS / "timeline_contention.png"
    )
    for name in ("timeline.png", "timeline_contention.png"):
        data = (ARTIFACTS / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


# -- the timeline in the widget's visual language ---------------------------------------------

PROMPTS = {"run-a": "What is 17 * 23 + 4?", "run-b": "Read the file notes.txt and tell me"}


def session_frame() -> pd.DataFrame:
    """Two runs in 40 ms of work around one 1 s Retry-After: the demo's shape."""

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
            **fields,
        }

    return frame_from_records(
        [
            row(
                "run-a",
                "request",
                0.0,
                0.01,
                attempt=1,
                outcome="error",
                status_code=429,
                error_kind="RateLimited",
                action="retry",
                delay_s=1.0,
                retry_after_s=1.0,
            ),
            row("run-a", "request", 1.01, 1.02, attempt=2),
            row(
                "run-a",
                "tool",
                1.02,
                1.022,
                tool_name="read_file",
                outcome="error",
                error_kind="raised",
                action="tool_result",
            ),
            row("run-a", "request", 1.022, 1.03, attempt=1, turn=2),
            row("run-b", "request", 1.03, 1.04, attempt=1),
        ]
    )


def boxes(fig: Figure) -> list[tuple[str, float, float]]:
    """Every rectangle drawn on the timeline: (fill colour, left, right) in data units."""
    (ax,) = fig.axes
    out = []
    for collection in ax.collections:
        colours = collection.get_facecolor()
        for i, path in enumerate(collection.get_paths()):
            x = path.vertices[:, 0]
            out.append((to_hex(colours[i % len(colours)]), float(x.min()), float(x.max())))
    return out


def bar_widths_px(fig: Figure, colour: str) -> list[float]:
    """The drawn width of each bar of `colour`, as a share of the plot's width."""
    fig.draw_without_rendering()
    (ax,) = fig.axes
    widths = []
    for face, x0, x1 in boxes(fig):
        if face == colour:
            px = ax.transData.transform([(x0, 0), (x1, 0)])
            widths.append(float(px[1][0] - px[0][0]) / ax.get_window_extent().width)
    return widths


def test_timeline_rows_are_prompts_with_only_the_lanes_they_used() -> None:
    fig = plot_timeline(session_frame(), labels=PROMPTS)
    (ax,) = fig.axes
    rows = [t.get_text() for t in ax.get_yticklabels()]
    # run-b made no tool call: no empty "tools" lane for it; no run ids where prompts are known
    assert rows == ["What is 17 * 23 + 4?", "tools", "Read the file notes.txt and tell me"]
    # without prompts the run id says which run it is; the same prompt twice is told apart
    rows = [t.get_text() for t in plot_timeline(session_frame()).axes[0].get_yticklabels()]
    assert rows == ["run-a", "tools", "run-b"]
    same = {"run-a": "hello", "run-b": "hello"}
    rows = [
        t.get_text() for t in plot_timeline(session_frame(), labels=same).axes[0].get_yticklabels()
    ]
    assert rows == ["hello · run-a", "tools", "hello · run-b"]


def test_a_long_wait_is_drawn_shorter_so_short_attempts_stay_visible() -> None:
    ok = SWATCHES["ok"].face
    shortened = plot_timeline(session_frame(), labels=PROMPTS)
    linear = plot_timeline(session_frame(), labels=PROMPTS, compress=False)
    # an 8-10 ms attempt next to a 1 s wait: a sliver on a linear axis, a bar here
    assert max(bar_widths_px(linear, ok)) < 0.012
    assert min(bar_widths_px(shortened, ok)) > 0.05
    marks = [t.get_text() for t in shortened.axes[0].texts]
    assert "//" in marks and "//" not in [t.get_text() for t in linear.axes[0].texts]
    assert "Retry-After 1.0s" in marks  # the wait keeps its true length in words
    assert "shorter" in shortened.axes[0].get_xlabel()


def test_timeline_text_is_readable_at_the_notebook_size() -> None:
    fig = plot_timeline(session_frame(), labels=PROMPTS)
    fig.draw_without_rendering()
    texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert texts
    assert min(t.get_fontsize() for t in texts) >= 9
    assert fig.get_figwidth() <= 10.5  # fits a notebook column without shrinking the text


def test_plot_legends_speak_the_widgets_words_and_colours() -> None:
    fig = plot_timeline(session_frame(), labels=PROMPTS)
    (legend,) = fig.legends
    words = {swatch.word: swatch for swatch in SWATCHES.values()}
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["ok", "failed", "server's Retry-After", "tool error"]
    for handle, label in zip(legend.legend_handles, labels, strict=True):
        swatch = words[label]
        assert to_hex(handle.get_facecolor()) == swatch.face
        if swatch.hatch:  # stripes are drawn in the edge colour, as the CSS draws them
            assert to_hex(handle.get_edgecolor()) == swatch.edge
        assert handle.get_hatch() == (swatch.hatch or swatch.mark or None)
    # the tool error has a fill of its own (not the failed attempts'), crossed out like them
    assert to_hex(words["tool error"].face) == COLORS["tool_error"] != COLORS["error"]
    assert words["tool error"].mark == words["failed"].mark != ""
    fills = {face for face, _, _ in boxes(fig)}
    assert COLORS["error"] in fills and "#000000" not in fills
    # backoff and Retry-After waits in the other plots use the same two colours
    sim = simulate_retries(RetryPolicy(seed=1), 0.5, 20, seed=1, retry_after_s=0.3)
    sim = pd.concat([sim, simulate_retries(RetryPolicy(seed=1), 0.5, 20, seed=2)])
    (hist, _cdf) = plot_delays(sim).axes
    colours = {to_hex(p.get_facecolor()) for p in hist.patches}
    assert colours == {SWATCHES["backoff"].face, SWATCHES["retry_after"].face}


def test_the_ticks_of_a_compressed_axis_are_one_round_step_apart() -> None:
    # the demo's shape: a second of Retry-After among attempts of milliseconds, drawn shorter
    fig = plot_timeline(session_frame(), labels=PROMPTS)
    (ax,) = fig.axes
    words = [t.get_text() for t in ax.get_xticklabels()]
    assert len(words) >= 3 and words[0].startswith("0")
    values = [float(w.removesuffix("s")) for w in words]
    step = min(b - a for a, b in itertools.pairwise(values))
    # every tick a multiple of one step, written with the same decimals (not 1.05, 1.21, 1.58)
    assert all(abs(v / step - round(v / step)) < 1e-6 for v in values), words
    assert len({len(w.split(".")[-1]) for w in words}) == 1, words
    # and still in order where the axis draws them
    positions = list(ax.get_xticks())
    assert positions == sorted(positions)


def test_the_attempt_a_run_failed_on_is_labelled_even_when_its_bar_is_thin() -> None:
    df = session_frame()
    last = df.index[-1]
    df.loc[last, ["outcome", "status_code", "error_kind", "action"]] = [
        "error",
        429,
        "QuotaExceeded",
        "fail",
    ]
    df.loc[last, ["started_at", "ended_at", "duration_s"]] = [1.0395, 1.04, 0.0005]
    fig = plot_timeline(df, labels=PROMPTS)
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert "429 QuotaExceeded → fail" in texts, texts
