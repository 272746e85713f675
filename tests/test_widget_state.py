"""The timeline's state (events in, a JSON-able dict out) and the widget that syncs it."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from harness.timeline_script import FINAL, PROMPT, TOOL_ERROR, live_events, run_events

from nbagent._core._budget import Usage
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    BudgetWarning,
    Event,
    FallbackStarted,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from nbagent.notebook import (
    AgentView,
    TimelineState,
    TimelineWidget,
    export_html,
    in_notebook,
    make_view,
)

SENTINEL_KEY = "sk-ant-SENTINEL-do-not-leak-0123456789"


def feed(target: Any, events: list[Event]) -> None:
    for event in events:
        target(event)


def state_after(events: list[Event], wall: float = 1_000.0) -> dict[str, Any]:
    timeline = TimelineState(wall=lambda: wall)
    feed(timeline, events)
    return timeline.snapshot()


class FakeNow:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


# -- the state --------------------------------------------------------------------------


def test_public_names() -> None:
    import nbagent.notebook as nb

    assert sorted(nb.__all__) == nb.__all__
    assert set(nb.__all__) == {
        "AgentView",
        "NotebookPresenter",
        "Playground",
        "TimelineState",
        "TimelineWidget",
        "display_view",
        "export_html",
        "in_notebook",
        "make_view",
        "playground",
        "start_shown",
    }


def test_retry_status_line_names_the_failure_the_delay_and_the_next_attempt() -> None:
    events = live_events()
    cut = next(i for i, e in enumerate(events) if isinstance(e, RetryScheduled))
    timeline = TimelineState(wall=lambda: 1_000.0)
    feed(timeline, events[: cut + 1])
    assert timeline.status == "provider unavailable: retrying in 2.4s (attempt 2/4)"
    snap = timeline.snapshot()
    assert snap["status_kind"] == "wait"
    assert snap["wait_until"] == pytest.approx(100.5 + 2.4)
    # wall time minus agent clock, so the browser can count down in real time
    assert snap["clock_offset"] == pytest.approx(1_000.0 - 100.5)
    assert snap["wait"]["label"] == "provider unavailable"
    assert snap["wait"]["server_wish"] is False
    [wait] = snap["waits"]
    assert wait["delay_s"] == pytest.approx(2.4)
    assert (wait["attempt"], wait["next_attempt"], wait["max_attempts"]) == (1, 2, 4)
    # the failed attempt is a red bar that says what happened and what the agent did
    failed = snap["bars"][0]
    assert failed["outcome"] == "error"
    assert failed["action"] == "retry"
    assert failed["status_code"] == 503
    assert "provider unavailable (HTTP 503)" in failed["detail"]


def test_server_wish_status_and_countdown_fields() -> None:
    snap = state_after(live_events())
    assert snap["status"] == "rate limit: server asked to wait 2.0s (attempt 2/4)"
    assert snap["active"] is True
    assert snap["wait_until"] == pytest.approx(106.4 + 2.0)
    policy, wish = snap["waits"]
    assert policy["server_wish"] is False
    assert wish["server_wish"] is True
    assert wish["retry_after_s"] == pytest.approx(2.0)


def test_a_scripted_run_maps_to_lanes_bars_waits_and_a_summary() -> None:
    snap = state_after(run_events())
    lanes = [(b["lane"], b["kind"], b["outcome"]) for b in snap["bars"]]
    assert lanes == [
        ("request", "attempt", "error"),  # 503, retried
        ("request", "attempt", "ok"),
        ("tool", "tool", "error"),  # read_file
        ("tool", "tool", "ok"),  # list_dir
        ("request", "attempt", "error"),  # context overflow, compacted
        ("compaction", "compaction", "ok"),
        ("compaction", "attempt", "ok"),  # the summarising request
        ("request", "attempt", "error"),  # 429, waited for Retry-After
        ("request", "attempt", "ok"),
    ]
    assert all(b["end"] is not None and b["end"] >= b["start"] for b in snap["bars"])
    tool_error = snap["bars"][2]
    assert tool_error["is_error"] is True
    assert tool_error["detail"] == TOOL_ERROR
    assert snap["bars"][3]["is_error"] is False
    assert snap["bars"][4]["action"] == "compact"

    [compaction] = snap["compactions"]
    assert (compaction["tokens_before"], compaction["tokens_after"]) == (48_210, 12_400)
    assert compaction["removed"] == 6
    assert snap["bars"][5]["label"] == "48,210 → 12,400 tokens"

    assert snap["status"] == "done: end_turn"
    assert snap["active"] is False
    assert snap["wait_until"] is None
    assert snap["final_text"] == FINAL
    [run] = snap["runs"]
    assert run["prompt"] == PROMPT
    assert run["end_reason"] == "end_turn"
    assert run["usage"]["input_tokens"] == 14_100
    summary = snap["summary"]
    assert summary["end_reason"] == "end_turn"
    assert summary["attempts"] == 6
    assert summary["failed_attempts"] == 3
    assert summary["retries"] == 2
    assert summary["waiting_s"] == pytest.approx(4.4)
    assert summary["tool_calls"] == 2
    assert summary["tool_errors"] == 1
    assert summary["compactions"] == 1
    assert (summary["input_tokens"], summary["output_tokens"]) == (14_100, 83)
    assert summary["cost_usd"] == 0.0
    assert summary["duration_s"] == pytest.approx(9.6)


def test_conversation_keeps_discarded_text_and_flags_tool_errors() -> None:
    conv = state_after(run_events())["conversation"]
    kinds = [(e["kind"], e.get("role")) for e in conv]
    assert kinds == [
        ("message", "user"),  # the prompt, once (RunStarted and its MessageCommitted merge)
        ("discarded", "assistant"),
        ("message", "assistant"),
        ("message", "user"),  # tool results
        ("note", None),  # the compaction
        ("message", "assistant"),
    ]
    discarded = conv[1]
    assert discarded["text"] == "Hel"
    assert "provider unavailable (HTTP 503)" in discarded["reason"]
    uses = [b for b in conv[2]["blocks"] if b["type"] == "tool_use"]
    assert [u["name"] for u in uses] == ["read_file", "list_dir"]
    assert json.loads(uses[0]["arguments"]) == {"path": "notes.txt"}
    results = conv[3]["blocks"]
    assert [(r["name"], r["is_error"]) for r in results] == [
        ("read_file", True),
        ("list_dir", False),
    ]
    assert results[0]["text"] == TOOL_ERROR
    assert conv[-1]["blocks"] == [{"type": "text", "text": FINAL}]


def test_streaming_text_is_live_until_the_message_is_committed() -> None:
    timeline = TimelineState()
    feed(
        timeline,
        [
            RunStarted(run_id="r", time=0.0, prompt="hi", model="demo"),
            AttemptStarted(
                phase="request", run_id="r", time=0.0, attempt=1, max_attempts=4, model="demo"
            ),
            TextDelta(attempt=1, run_id="r", time=0.1, text="Hel"),
            TextDelta(attempt=1, run_id="r", time=0.2, text="lo"),
            ToolCallDelta(
                call_id="",
                attempt=1,
                run_id="r",
                time=0.3,
                index=0,
                name="read_file",
                arguments='{"pa',
            ),
            ToolCallDelta(
                call_id="", name="", attempt=1, run_id="r", time=0.3, index=0, arguments='th": "a"}'
            ),
        ],
    )
    live = timeline.snapshot()["conversation"][-1]
    assert live["kind"] == "streaming"
    assert live["text"] == "Hello"
    assert live["tool_calls"] == [{"name": "read_file", "arguments": '{"path": "a"}'}]
    assert timeline.status == "model is calling read_file"
    timeline(TextDelta(attempt=1, run_id="r", time=0.4, text="!"))
    assert timeline.snapshot()["conversation"][-1]["text"] == "Hello!"


def test_a_failed_attempt_discards_what_it_streamed_even_without_discarded_text() -> None:
    snap = state_after(
        [
            RunStarted(run_id="r", time=0.0, prompt="hi", model="demo"),
            AttemptStarted(
                phase="request", model="", run_id="r", time=0.0, attempt=1, max_attempts=4
            ),
            TextDelta(attempt=1, run_id="r", time=0.1, text="partial"),
            AttemptFailed(
                phase="request",
                max_attempts=1,
                model="",
                message="",
                run_id="r",
                time=0.2,
                error="StreamInterrupted",
                action="retry",
                attempt=1,
            ),
        ]
    )
    assert snap["conversation"][-1]["kind"] == "discarded"
    assert snap["conversation"][-1]["text"] == "partial"
    assert snap["status"] == "stream interrupted: retrying"


def test_tool_status_lines() -> None:
    timeline = TimelineState()
    timeline(ToolCallStarted(run_id="r", time=1.0, call_id="a", name="read_file"))
    assert timeline.status == "running tool read_file"
    timeline(ToolCallStarted(run_id="r", time=1.0, call_id="b", name="grep"))
    assert timeline.status == "running tools read_file, grep"
    timeline(
        ToolCallFinished(
            is_error=False,
            content="",
            duration_s=0.0,
            run_id="r",
            time=1.1,
            call_id="b",
            name="grep",
        )
    )
    timeline(
        ToolCallFinished(
            content="",
            duration_s=0.0,
            run_id="r",
            time=1.2,
            call_id="a",
            name="read_file",
            is_error=True,
            error="timeout",
        )
    )
    assert timeline.status == "tool read_file failed (timeout): the model reads the error"


def test_compaction_status_line() -> None:
    from nbagent.events import CompactionStarted

    timeline = TimelineState()
    timeline(
        CompactionStarted(
            reason="overflow", run_id="r", time=1.0, tokens_before=48_210, strategy="summarise"
        )
    )
    assert timeline.status == "compacting conversation (48,210 tokens)"


def test_fallback_paced_wait_budget_warning_and_hard_failure() -> None:
    snap = state_after(
        [
            RunStarted(run_id="r", time=0.0, prompt="hi", model="a"),
            PacedWait(reason="", run_id="r", time=0.0, delay_s=1.5, model="a"),
            AttemptStarted(
                phase="request", run_id="r", time=1.5, attempt=1, max_attempts=1, model="a"
            ),
            AttemptFailed(
                phase="request",
                attempt=1,
                max_attempts=1,
                message="",
                run_id="r",
                time=1.7,
                error="ModelNotFound",
                status_code=404,
                action="fallback",
                model="a",
            ),
            FallbackStarted(
                message="",
                run_id="r",
                time=1.7,
                from_model="a",
                to_model="b",
                error="ModelNotFound",
            ),
            AttemptStarted(
                phase="request", run_id="r", time=1.7, attempt=1, max_attempts=1, model="b"
            ),
            BudgetWarning(
                message="", run_id="r", time=1.8, limit="cost", actual=0.9, limit_value=1.0
            ),
            AttemptFailed(
                phase="request",
                attempt=1,
                max_attempts=1,
                run_id="r",
                time=2.0,
                error="AuthFailed",
                status_code=401,
                message="invalid x-api-key",
                action="fail",
                model="b",
            ),
            RunFinished(
                usage=Usage(),
                model="",
                run_id="r",
                time=2.0,
                end_reason="error",
                error="AuthFailed",
                message="invalid x-api-key",
            ),
        ]
    )
    [paced] = snap["waits"]
    assert paced["kind"] == "paced"
    assert paced["delay_s"] == 1.5
    [fallback] = snap["fallbacks"]
    assert (fallback["from_model"], fallback["to_model"]) == ("a", "b")
    assert fallback["label"] == "model not found"
    assert snap["warnings"][0]["text"] == "budget warning: cost at 0.9 of 1"
    assert snap["status"] == "failed: authentication failed: invalid x-api-key"
    assert snap["status_kind"] == "error"
    assert snap["summary"]["fallbacks"] == 1
    assert snap["bars"][-1]["outcome"] == "error"
    assert snap["bars"][-1]["action"] == "fail"


def test_bars_still_open_when_the_run_is_cancelled_end_as_cancelled() -> None:
    snap = state_after(
        [
            RunStarted(run_id="r", time=0.0, prompt="hi", model="demo"),
            AttemptStarted(
                phase="request", model="", run_id="r", time=0.0, attempt=1, max_attempts=4
            ),
            ToolCallStarted(run_id="r", time=0.5, call_id="t", name="sleep"),
            RunFinished(usage=Usage(), model="", run_id="r", time=1.0, end_reason="cancelled"),
        ]
    )
    assert [b["outcome"] for b in snap["bars"]] == ["cancelled", "cancelled"]
    assert all(b["end"] == 1.0 for b in snap["bars"])
    assert snap["status"] == "cancelled"


def test_snapshot_is_json_and_shares_nothing_with_the_live_state() -> None:
    timeline = TimelineState()
    feed(timeline, run_events()[:5])
    before = timeline.snapshot()
    json.dumps(before, allow_nan=False)
    feed(timeline, run_events()[5:])
    assert before == json.loads(json.dumps(before))  # unchanged by later events
    assert before["bars"][0]["end"] is not None
    assert before["version"] < timeline.version


def test_non_finite_numbers_become_null() -> None:
    snap = state_after(
        [
            AttemptStarted(
                phase="request", attempt=1, max_attempts=1, model="", run_id="r", time=0.0
            ),
            AttemptSucceeded(
                phase="request",
                attempt=1,
                max_attempts=1,
                model="",
                run_id="r",
                time=1.0,
                cost_usd=math.nan,
                ttft_s=math.inf,
            ),
        ]
    )
    json.dumps(snap, allow_nan=False)
    assert snap["bars"][0]["cost_usd"] is None
    assert snap["bars"][0]["ttft_s"] is None


def test_state_never_holds_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(name, SENTINEL_KEY)
    widget = TimelineWidget(wall=lambda: 1_000.0)
    feed(widget, run_events())
    assert SENTINEL_KEY not in json.dumps(widget.timeline.snapshot())
    assert SENTINEL_KEY not in json.dumps(widget.get_state(), default=str)
    assert SENTINEL_KEY not in export_html(widget.timeline.snapshot())


def test_text_is_capped_so_syncs_stay_small() -> None:
    huge = "x" * 50_000
    snap = state_after(
        [
            ToolCallStarted(run_id="r", time=0.0, call_id="t", name="cat"),
            ToolCallFinished(
                is_error=False,
                duration_s=0.0,
                run_id="r",
                time=0.1,
                call_id="t",
                name="cat",
                content=huge,
            ),
        ]
    )
    detail = snap["bars"][0]["detail"]
    assert len(detail) < 9_000
    assert detail.endswith("more characters)")


# -- the widget -------------------------------------------------------------------------


def test_widget_works_without_a_kernel() -> None:
    widget = TimelineWidget()
    assert widget.state["status"] == "idle"
    assert widget.stop_requested is False
    assert "export default" in str(widget._esm)
    assert ".nb-root" in str(widget._css)
    assert in_notebook() is False


def test_deltas_are_coalesced_into_at_most_ten_syncs_a_second() -> None:
    now = FakeNow()
    widget = TimelineWidget(now=now, wall=lambda: 1_000.0)
    syncs: list[dict[str, Any]] = []
    widget.observe(lambda change: syncs.append(change["new"]), names="state")
    widget(RunStarted(run_id="r", time=0.0, prompt="count", model="demo"))
    widget(
        AttemptStarted(
            phase="request", run_id="r", time=0.0, attempt=1, max_attempts=4, model="demo"
        )
    )
    n = 5_000
    for i in range(n):
        now.t += 0.001
        widget(TextDelta(attempt=1, run_id="r", time=i * 0.001, text=f"{i} "))
    assert len(syncs) <= n * 0.001 / 0.1 + 3
    now.t += 0.001
    widget(
        RunFinished(
            usage=Usage(), model="", run_id="r", time=5.0, end_reason="end_turn", final_text="done"
        )
    )
    assert widget.state == widget.timeline.snapshot()
    streamed = widget.state["conversation"][-1]["text"]
    assert streamed == "".join(f"{i} " for i in range(n))
    assert widget.state["status"] == "done: end_turn"


def test_a_due_flush_happens_without_a_later_event() -> None:
    async def scenario() -> tuple[int, str]:
        widget = TimelineWidget(min_interval=0.05)
        widget(RunStarted(run_id="r", time=0.0, prompt="p", model="demo"))  # pushed at once
        widget(
            AttemptStarted(
                phase="request", run_id="r", time=0.0, attempt=1, max_attempts=4, model="demo"
            )
        )
        widget(TextDelta(attempt=1, run_id="r", time=0.0, text="late"))  # too soon: scheduled
        assert widget.state["conversation"][-1]["kind"] != "streaming"
        await asyncio.sleep(0.2)
        return len(widget.state["conversation"]), widget.state["conversation"][-1]["text"]

    count, text = asyncio.run(scenario())
    assert count == 2
    assert text == "late"


def test_flush_pushes_now() -> None:
    now = FakeNow()
    widget = TimelineWidget(now=now)
    widget(RunStarted(run_id="r", time=0.0, prompt="p", model="demo"))
    widget(TextDelta(attempt=1, run_id="r", time=0.0, text="x"))
    assert widget.state != widget.timeline.snapshot()
    widget.flush()
    assert widget.state == widget.timeline.snapshot()


def test_stop_button_calls_on_stop_once_and_disables_itself() -> None:
    calls: list[str] = []
    view = make_view(on_stop=lambda: calls.append("stop"))
    assert isinstance(view, AgentView)
    widget = view.timeline
    assert widget.show_stop is False  # the ipywidgets button replaces the front end's own
    view(RunStarted(run_id="r", time=0.0, prompt="p", model="demo"))
    assert view.stop_button.disabled is False
    view.stop_button.click()
    view.stop_button.click()
    assert calls == ["stop"]
    assert widget.stop_requested is True
    assert view.stop_button.disabled is True
    view(RunFinished(run_id="r", time=1.0, end_reason="cancelled", usage=Usage(), model=""))
    assert view.stop_button.description == "Finished"


def test_the_front_ends_stop_request_reaches_on_stop() -> None:
    calls: list[str] = []
    widget = TimelineWidget(on_stop=lambda: calls.append("stop"))
    widget.set_state({"stop_requested": True})  # what a message from the browser does
    assert calls == ["stop"]


def test_fallback_representation_for_frontends_without_widgets() -> None:
    widget = TimelineWidget()
    feed(widget, run_events())
    data, _meta = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("nbagent: done: end_turn")
    assert "retries 2" in data["text/plain"]
    assert "<s>Hel</s>" in data["text/html"]
    assert "<script" not in data["text/html"]
    view = make_view(widget)
    view_data, _ = view._repr_mimebundle_()
    assert view_data["text/plain"] == data["text/plain"]


def test_a_wait_cut_short_by_cancellation_counts_only_the_time_waited() -> None:
    from nbagent.events import (
        AttemptFailed,
        AttemptStarted,
        RetryScheduled,
        RunFinished,
        RunStarted,
    )

    state = TimelineState()
    state(RunStarted(run_id="r", time=0.0, prompt="hi", model="demo"))
    state(
        AttemptStarted(
            phase="request", run_id="r", time=0.0, attempt=1, max_attempts=4, model="demo"
        )
    )
    state(
        AttemptFailed(
            phase="request",
            model="",
            message="",
            run_id="r",
            time=0.5,
            attempt=1,
            max_attempts=4,
            error="RateLimited",
            status_code=429,
            action="retry",
            retry_after_s=30.0,
        )
    )
    state(
        RetryScheduled(
            phase="request",
            model="",
            policy_delay_s=0.0,
            message="",
            run_id="r",
            time=0.5,
            attempt=1,
            next_attempt=2,
            max_attempts=4,
            delay_s=30.0,
            retry_after_s=30.0,
            error="RateLimited",
            status_code=429,
        )
    )
    state(
        RunFinished(
            usage=Usage(), model="", run_id="r", time=2.5, end_reason="cancelled", error="Aborted"
        )
    )
    snap = state.snapshot()
    (wait,) = snap["waits"]
    assert wait["end"] == 2.5 and wait["delay_s"] == 2.0 and wait["cut"] is True
    assert snap["summary"]["waiting_s"] == 2.0
