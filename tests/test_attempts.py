from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import nbagent._loop._attempt_log as attempts_mod
from nbagent._core._budget import Usage
from nbagent._loop._attempt_log import AttemptLog
from nbagent._loop._frame import ACTIONS, COLUMNS, DTYPES, coerce, empty_frame, frame_from_records
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    CompactionFinished,
    CompactionStarted,
    Event,
    EventBus,
    FallbackStarted,
    Handlers,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    SDKRetryScheduled,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

DESIGN_COLUMNS = [  # DESIGN.md's list, with `reask` (issue 37) after `turn`
    "run_id",
    "turn",
    "reask",
    "phase",
    "attempt",
    "max_attempts",
    "model",
    "started_at",
    "ended_at",
    "duration_s",
    "ttft_s",
    "outcome",
    "error_kind",
    "status_code",
    "action",
    "policy_delay_s",
    "retry_after_s",
    "delay_s",
    "request_id",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "discarded_chars",
    "tool_name",
    "message",
]
INTS = ["turn", "reask", "attempt", "max_attempts", "status_code", "input_tokens", "output_tokens"]
INTS += ["cache_read_tokens", "cache_write_tokens", "discarded_chars"]
FLOATS = ["started_at", "ended_at", "duration_s", "ttft_s", "policy_delay_s", "retry_after_s"]
FLOATS += ["delay_s", "cost_usd"]
STRINGS = ["run_id", "model", "error_kind", "request_id", "tool_name", "message"]


def check_schema(df: pd.DataFrame) -> None:
    assert list(df.columns) == DESIGN_COLUMNS
    for c in INTS:
        assert str(df[c].dtype) == "Int64", c
    for c in FLOATS:
        assert df[c].dtype == "float64", c
    for c in STRINGS:
        assert pd.api.types.is_string_dtype(df[c].dtype), c
    assert list(df["phase"].cat.categories) == ["request", "compaction", "tool"]
    assert list(df["outcome"].cat.categories) == ["ok", "error", "cancelled"]
    assert list(df["action"].cat.categories) == [
        "none",
        "retry",
        "compact",
        "tool_result",
        "fallback",
        "fail",
        "paced",
        "reask",
    ]


R = "run-1"


def scripted_events() -> list[Event]:
    """One run: overloaded, then rate limited with Retry-After, then ok; two tool calls;
    a stub compaction; a context overflow in turn 2 answered by compaction; a paced wait."""
    return [
        RunStarted(run_id=R, time=0.0, prompt="hi", model="demo"),
        AttemptStarted(
            phase="request", run_id=R, time=0.0, turn=1, attempt=1, max_attempts=4, model="demo"
        ),
        TextDelta(attempt=1, run_id=R, time=0.2, turn=1, text="partial"),
        AttemptFailed(
            phase="request",
            run_id=R,
            time=0.5,
            turn=1,
            attempt=1,
            max_attempts=4,
            model="demo",
            error="Overloaded",
            message="overloaded_error",
            status_code=529,
            request_id="req_1",
            action="retry",
            ttft_s=0.1,
            discarded_text="partial",
            discarded_thinking="hmm",
        ),
        RetryScheduled(
            phase="request",
            model="",
            message="",
            run_id=R,
            time=0.5,
            turn=1,
            attempt=1,
            next_attempt=2,
            max_attempts=4,
            delay_s=1.25,
            policy_delay_s=1.25,
            error="Overloaded",
            status_code=529,
        ),
        AttemptStarted(
            phase="request", run_id=R, time=1.75, turn=1, attempt=2, max_attempts=4, model="demo"
        ),
        AttemptFailed(
            phase="request",
            run_id=R,
            time=2.0,
            turn=1,
            attempt=2,
            max_attempts=4,
            model="demo",
            error="RateLimited",
            message="rate limited",
            status_code=429,
            retry_after_s=2.0,
            action="retry",
        ),
        RetryScheduled(
            phase="request",
            model="",
            message="",
            run_id=R,
            time=2.0,
            turn=1,
            attempt=2,
            next_attempt=3,
            max_attempts=4,
            delay_s=2.0,
            policy_delay_s=0.7,
            retry_after_s=2.0,
            error="RateLimited",
            status_code=429,
        ),
        AttemptStarted(
            phase="request", run_id=R, time=4.0, turn=1, attempt=3, max_attempts=4, model="demo"
        ),
        AttemptSucceeded(
            phase="request",
            run_id=R,
            time=5.0,
            turn=1,
            attempt=3,
            max_attempts=4,
            model="demo",
            request_id="req_3",
            ttft_s=0.25,
            input_tokens=100,
            output_tokens=20,
            cost_usd=0.003,
            stop_reason="tool_use",
        ),
        ToolCallStarted(run_id=R, time=5.0, turn=1, call_id="c1", name="read", source="fs"),
        ToolCallStarted(run_id=R, time=5.0, turn=1, call_id="c2", name="add"),
        ToolCallFinished(
            run_id=R,
            time=5.5,
            turn=1,
            call_id="c1",
            name="read",
            source="fs",
            is_error=True,
            content="E" * 2000,
            error="raised",
            duration_s=0.5,
        ),
        ToolCallFinished(
            is_error=False,
            duration_s=0.0,
            run_id=R,
            time=5.25,
            turn=1,
            call_id="c2",
            name="add",
            content="3",
        ),
        CompactionStarted(
            reason="overflow", run_id=R, time=6.0, turn=2, tokens_before=48210, strategy="stub"
        ),
        CompactionFinished(
            removed=0,
            ok=True,
            run_id=R,
            time=6.5,
            turn=2,
            tokens_before=48210,
            tokens_after=12400,
            strategy="stub",
        ),
        PacedWait(run_id=R, time=6.5, turn=2, delay_s=0.75, model="demo", reason="rpm limit"),
        AttemptStarted(
            phase="request", run_id=R, time=7.25, turn=2, attempt=1, max_attempts=4, model="demo"
        ),
        AttemptFailed(
            phase="request",
            run_id=R,
            time=7.5,
            turn=2,
            attempt=1,
            max_attempts=4,
            model="demo",
            error="ContextOverflow",
            message="prompt is too long",
            status_code=400,
            action="compact",
        ),
        RunFinished(
            usage=Usage(),
            model="",
            run_id=R,
            time=8.0,
            turn=2,
            end_reason="error",
            error="ContextOverflow",
        ),
    ]


def scripted_frame() -> pd.DataFrame:
    log = AttemptLog()
    for ev in scripted_events():
        log(ev)
    return log.frame()


def test_columns_are_design_columns() -> None:
    assert list(COLUMNS) == DESIGN_COLUMNS
    assert list(DTYPES) == DESIGN_COLUMNS
    df = empty_frame()
    assert len(df) == 0
    check_schema(df)
    check_schema(AttemptLog().frame())


def test_scripted_sequence_rows() -> None:
    df = scripted_frame()
    check_schema(df)
    assert len(df) == 8
    assert list(df["phase"]) == ["request"] * 3 + ["tool"] * 2 + ["compaction"] + ["request"] * 2
    assert list(df["outcome"]) == ["error", "error", "ok", "error", "ok", "ok", "ok", "error"]
    assert list(df["action"]) == [
        "retry",
        "retry",
        "none",
        "tool_result",
        "none",
        "none",
        "paced",
        "compact",
    ]
    assert list(df["run_id"]) == [R] * 8
    assert list(df["turn"]) == [1, 1, 1, 1, 1, 2, 2, 2]

    first, second, ok, tool_err, tool_ok, comp, paced, overflow = (df.iloc[i] for i in range(8))
    # attempt 1: overloaded, partial output discarded, backoff 1.25 s after it
    assert first["attempt"] == 1 and first["max_attempts"] == 4 and first["model"] == "demo"
    assert first["started_at"] == 0.0 and first["ended_at"] == 0.5 and first["duration_s"] == 0.5
    assert first["error_kind"] == "Overloaded" and first["status_code"] == 529
    assert first["discarded_chars"] == len("partial") + len("hmm")
    assert first["delay_s"] == 1.25 and first["policy_delay_s"] == 1.25
    assert math.isnan(first["retry_after_s"])
    assert first["ttft_s"] == 0.1 and first["request_id"] == "req_1"
    assert first["message"] == "overloaded_error"
    # attempt 2: the server's wish replaced the policy's 0.7 s
    assert second["attempt"] == 2 and second["status_code"] == 429
    assert second["delay_s"] == 2.0 and second["policy_delay_s"] == 0.7
    assert second["retry_after_s"] == 2.0
    # attempt 3: ok, with usage
    assert ok["attempt"] == 3 and ok["started_at"] == 4.0 and ok["duration_s"] == 1.0
    assert ok["input_tokens"] == 100 and ok["output_tokens"] == 20
    assert ok["cost_usd"] == 0.003 and ok["ttft_s"] == 0.25 and ok["request_id"] == "req_3"
    assert pd.isna(ok["error_kind"]) and math.isnan(ok["delay_s"])
    # tools
    assert tool_err["tool_name"] == "fs:read" and tool_err["error_kind"] == "raised"
    assert tool_err["duration_s"] == 0.5
    assert tool_err["message"].startswith("EEE") and 400 <= len(tool_err["message"]) <= 501
    assert pd.isna(tool_err["attempt"])
    assert tool_ok["tool_name"] == "add" and tool_ok["duration_s"] == 0.25
    assert pd.isna(tool_ok["message"])
    # a compaction that made no request of its own
    assert comp["message"] == "stub: 48,210 → 12,400 tokens"
    assert comp["started_at"] == 6.0 and comp["ended_at"] == 6.5
    # the rate limiter's hold
    assert paced["delay_s"] == 0.75 and paced["duration_s"] == 0.0
    assert paced["message"] == "rpm limit"
    assert overflow["error_kind"] == "ContextOverflow" and overflow["status_code"] == 400


def test_subscribes_to_event_bus() -> None:
    log = AttemptLog()
    bus = EventBus()
    unsubscribe = bus.subscribe(log)
    for ev in scripted_events():
        bus.emit(ev)
    unsubscribe()
    assert len(log) == 8
    pd.testing.assert_frame_equal(log.frame(), scripted_frame())


def test_frame_is_cached_until_rows_change(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = attempts_mod.build_frame

    def counting(cols: list[object], *args: object, **kwargs: object) -> pd.DataFrame:
        calls.append(1)
        return real(cols, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(attempts_mod, "build_frame", counting)
    log = AttemptLog()
    events = scripted_events()
    for ev in events[:4]:
        log(ev)
    a = log.frame()
    b = log.frame()
    assert len(calls) == 1
    assert a.equals(b)
    log(events[4])  # the RetryScheduled changes row 0
    c = log.frame()
    assert len(calls) == 2
    assert c.loc[0, "delay_s"] == 1.25
    assert math.isnan(a.loc[0, "delay_s"])  # a frame handed out earlier does not change
    log(TextDelta(attempt=1, run_id=R, text="x"))  # not a row
    log.frame()
    assert len(calls) == 2


def test_fallback_marks_last_failed_request() -> None:
    log = AttemptLog()
    log(RunStarted(prompt="", run_id="r", model="a"))
    log(AttemptStarted(phase="request", model="", run_id="r", time=0.0, attempt=1, max_attempts=1))
    log(
        AttemptFailed(
            phase="request",
            max_attempts=1,
            model="",
            message="",
            action="fail",
            run_id="r",
            time=1.0,
            attempt=1,
            error="ModelNotFound",
            status_code=404,
        )
    )
    log(FallbackStarted(error="", message="", run_id="r", time=1.0, from_model="a", to_model="b"))
    log(AttemptStarted(phase="request", run_id="r", time=1.0, attempt=1, max_attempts=1, model="b"))
    log(
        AttemptSucceeded(
            phase="request", run_id="r", time=2.0, attempt=1, max_attempts=1, model="b"
        )
    )
    df = log.frame()
    assert list(df["action"]) == ["fallback", "none"]
    assert list(df["model"]) == ["a", "b"]  # the run's model when the attempt names none


def test_cancellation() -> None:
    log = AttemptLog()
    log(AttemptStarted(phase="request", model="", run_id="r", time=0.0, attempt=1, max_attempts=3))
    log(
        AttemptFailed(
            phase="request",
            max_attempts=1,
            model="",
            message="",
            action="fail",
            run_id="r",
            time=0.5,
            attempt=1,
            error="Aborted",
            cancelled=True,
        )
    )
    log(AttemptStarted(phase="request", model="", run_id="r", time=1.0, attempt=1, max_attempts=3))
    log(ToolCallStarted(run_id="s", time=1.0, call_id="t", name="slow"))
    log(RunFinished(usage=Usage(), model="", run_id="r", time=2.0, end_reason="cancelled"))
    log(RunFinished(usage=Usage(), model="", run_id="s", time=3.0, end_reason="cancelled"))
    df = log.frame()
    assert list(df["outcome"]) == ["cancelled", "cancelled", "cancelled"]
    assert list(df["action"]) == ["fail", "fail", "fail"]
    assert list(df["ended_at"]) == [0.5, 2.0, 3.0]
    assert df.loc[1, "duration_s"] == 1.0
    assert df.loc[2, "phase"] == "tool" and df.loc[2, "tool_name"] == "slow"


def test_compaction_with_its_own_request_makes_no_extra_row() -> None:
    log = AttemptLog()
    log(
        CompactionStarted(
            reason="overflow", run_id="r", time=0.0, tokens_before=2000, strategy="summary"
        )
    )
    log(
        AttemptStarted(
            model="", run_id="r", time=0.0, phase="compaction", attempt=1, max_attempts=2
        )
    )
    log(
        AttemptFailed(
            max_attempts=1,
            model="",
            message="",
            run_id="r",
            time=1.0,
            phase="compaction",
            attempt=1,
            error="ServerError",
            action="retry",
        )
    )
    log(
        RetryScheduled(
            next_attempt=2,
            max_attempts=1,
            model="",
            policy_delay_s=0.0,
            error="",
            message="",
            run_id="r",
            time=1.0,
            phase="compaction",
            attempt=1,
            delay_s=0.5,
        )
    )
    log(
        AttemptStarted(
            model="", run_id="r", time=1.5, phase="compaction", attempt=2, max_attempts=2
        )
    )
    log(
        AttemptSucceeded(
            model="", run_id="r", time=2.0, phase="compaction", attempt=2, max_attempts=2
        )
    )
    log(
        CompactionFinished(
            strategy="",
            removed=0,
            ok=True,
            run_id="r",
            time=2.0,
            tokens_before=2000,
            tokens_after=300,
        )
    )
    df = log.frame()
    assert list(df["phase"]) == ["compaction", "compaction"]
    assert list(df["delay_s"].fillna(-1)) == [0.5, -1]
    assert df.loc[1, "message"] == "summary: 2,000 → 300 tokens"


def test_events_without_their_start_still_make_rows() -> None:
    log = AttemptLog()
    log(
        AttemptSucceeded(phase="request", max_attempts=1, model="", run_id="r", time=2.0, attempt=1)
    )
    log(
        RetryScheduled(
            phase="request",
            next_attempt=2,
            max_attempts=1,
            model="",
            policy_delay_s=0.0,
            message="",
            run_id="q",
            time=3.0,
            attempt=1,
            delay_s=1.0,
            error="ServerError",
        )
    )
    log(
        ToolCallFinished(
            is_error=False, content="", run_id="r", time=4.0, call_id="x", name="f", duration_s=0.5
        )
    )
    log(
        CompactionFinished(
            strategy="", removed=0, run_id="r", time=5.0, tokens_before=10, tokens_after=5, ok=False
        )
    )
    df = log.frame()
    assert list(df["outcome"]) == ["ok", "error", "ok", "error"]
    assert math.isnan(df.loc[0, "started_at"])
    assert df.loc[1, "action"] == "retry" and df.loc[1, "delay_s"] == 1.0
    assert df.loc[2, "started_at"] == 3.5
    assert df.loc[3, "action"] == "fail"


def test_unknown_action_is_kept() -> None:
    log = AttemptLog()
    log(AttemptStarted(phase="request", max_attempts=1, model="", run_id="r", attempt=1))
    log(
        AttemptFailed(
            phase="request",
            max_attempts=1,
            model="",
            error="",
            message="",
            run_id="r",
            attempt=1,
            action="something_new",
        )
    )
    df = log.frame()
    assert df.loc[0, "action"] == "something_new"
    assert list(df["action"].cat.categories)[: len(ACTIONS)] == list(ACTIONS)


def test_csv_and_parquet_round_trip(tmp_path: Path) -> None:
    df = scripted_frame()
    path = tmp_path / "a.parquet"
    df.to_parquet(path)
    pd.testing.assert_frame_equal(pd.read_parquet(path), df)
    csv = tmp_path / "a.csv"
    df.to_csv(csv, index=False)
    back = coerce(pd.read_csv(csv))
    check_schema(back)
    pd.testing.assert_frame_equal(back, df)
    pd.testing.assert_frame_equal(coerce(empty_frame()), empty_frame())


def test_the_rows_a_sink_is_told_make_the_same_frame() -> None:
    told: dict[int, dict[str, object]] = {}  # the last word on each row, as the durable log keeps
    log = AttemptLog(on_row=told.__setitem__)
    for ev in scripted_events():
        log(ev)
    rows = [told[i] for i in sorted(told)]
    pd.testing.assert_frame_equal(frame_from_records(rows), log.frame())


def test_a_released_log_is_empty() -> None:
    log = AttemptLog()
    for ev in scripted_events():
        log(ev)
    assert len(log.frame(release=True)) == 8
    assert len(log) == 0 and len(log.frame()) == 0


def test_hundred_thousand_rows_build() -> None:
    log = AttemptLog()
    n = 100_000
    for i in range(n):
        ok = i % 3 == 0
        said = {"phase": "request", "run_id": f"r{i // 4}", "turn": 1, "attempt": i % 4 + 1}
        said |= {"max_attempts": 4, "model": "demo"}
        log(AttemptStarted(time=float(i), **said))  # type: ignore[arg-type]
        if ok:
            log(AttemptSucceeded(time=i + 0.5, input_tokens=10, **said))  # type: ignore[arg-type]
            continue
        failed = {"error": "ServerError", "status_code": 503, "message": ""}
        log(AttemptFailed(time=i + 0.5, action="retry", **failed, **said))  # type: ignore[arg-type]
        waited = {"next_attempt": i % 4 + 2, "delay_s": 0.25, "policy_delay_s": 0.25}
        log(RetryScheduled(time=i + 0.5, **waited, **failed, **said))  # type: ignore[arg-type]
    df = log.frame()
    assert len(df) == n
    check_schema(df)
    assert int(df["status_code"].isna().sum()) == len(range(0, n, 3))
    assert list(df["delay_s"].iloc[:3].fillna(-1)) == [-1, 0.25, 0.25]
    assert list(df["input_tokens"].iloc[:2].fillna(-1)) == [10, -1]
    assert list(df["duration_s"].iloc[:2]) == [0.5, 0.5]


def test_run_ids_of_every_shape_come_back_as_given():
    # a provider batch's `<tag>-<number>` ids are kept compactly; any other id as it is
    log = AttemptLog()
    ids = ["tag-7", "tag-0", "a-b-12", "run-007", "r-1x", "plain", "-3", "x-٣", "tag-123456789"]
    for rid in ids:
        said = {"phase": "request", "turn": 1, "attempt": 1, "max_attempts": 1, "model": "m"}
        log(AttemptStarted(run_id=rid, time=0.0, **said))  # type: ignore[arg-type]
    assert list(log.column("run_id")) == ids
    assert [None if pd.isna(v) else v for v in log.frame()["run_id"]] == ids
    assert list(log.frame(release=True)["run_id"].iloc[:2]) == ["tag-7", "tag-0"]
    assert len(log) == 0  # released: the log is empty after
    # among them, a row without one (a durable log's row of an older layout, say)
    rows = [{"run_id": rid, "phase": "request"} for rid in ids] + [{"phase": "request"}]
    assert [None if pd.isna(v) else v for v in frame_from_records(rows)["run_id"]] == [*ids, None]


def test_handlers_find_the_method_named_for_the_event_or_its_nearest_base() -> None:
    seen: list[str] = []

    class Waits(Handlers):
        def _on_retry_scheduled(self, event: RetryScheduled) -> None:
            seen.append(f"retry {type(event).__name__}")

        def _on_tool_call_started(self, event: ToolCallStarted) -> None:
            seen.append(f"tool {event.name}")

    class SDKWaits(Waits):
        def _on_sdk_retry_scheduled(self, event: SDKRetryScheduled) -> None:
            seen.append("sdk")

    wait = RetryScheduled(
        phase="request",
        attempt=1,
        next_attempt=2,
        max_attempts=4,
        model="demo",
        delay_s=1.0,
        policy_delay_s=1.0,
        error="RateLimited",
        message="429",
    )
    sdk = SDKRetryScheduled(**vars(wait), sdk="anthropic")
    for subscriber in (Waits(), SDKWaits()):
        subscriber(wait)
        subscriber(sdk)
        subscriber(ToolCallStarted(call_id="c", name="add"))
        subscriber(TextDelta(attempt=1, text="hi"))  # no method: passes by
    assert seen == [
        "retry RetryScheduled",
        "retry SDKRetryScheduled",
        "tool add",
        "retry RetryScheduled",
        "sdk",
        "tool add",
    ]
