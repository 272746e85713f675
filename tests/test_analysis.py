from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_attempts import scripted_frame

from nbagent._core._retry import RetryPolicy
from nbagent._loop._attempt_log import AttemptLog
from nbagent._loop._frame import coerce, empty_frame
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
