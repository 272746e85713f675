"""Events in, a JSON-able picture of the run out: what the timeline widget draws.

`TimelineState` is a subscriber like any other. It keeps everything the front end needs (bars
per attempt, backoff waits, fallbacks, compactions, the conversation, a status line, a summary)
and hands it over as a plain dict from `snapshot()`. It knows nothing of ipywidgets, so the same
dict feeds the live widget, the HTML export and the tests.

Its collaborators each hold one idea: `Conversation` the messages and the reply streaming in
(the hot path), `Bars` the bars of attempts, tool calls and compactions, `Waits` the waits
and the countdown, `_summary` the numbers under the timeline.
Nothing here reads the environment or the agent: the state holds only what the events carry,
and events never carry API keys.

Times are seconds on the agent's clock. `clock_offset` (wall time minus agent clock, measured at
the latest event) lets the browser turn `wait_until` into a live countdown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import events as ev
from ..errors import describe
from ._a11y import Announcer, timeline_axis
from ._bars import Bars, lane
from ._conversation import Conversation
from ._summary import end_status, new_run, run_summary, session_summary
from ._values import (
    STREAM_LIMIT,
    clip,
    failure_text,
    num,
    seconds,
    usage_dict,
)
from ._waiting import Waits

# What each compaction strategy did, in a reader's words (the terminal, the widget, the report)
_STRATEGY_WORDS = {
    "stub": "old tool output stubbed",
    "summarize": "older turns summarised",
    "stub+summarize": "old tool output stubbed, older turns summarised",
}


class TimelineState(ev.Handlers):
    """Maps events to the widget's state; call it with each event, read `snapshot()`.

    `wall` is the wall clock (injectable for tests); it only serves `clock_offset`.

    Args:
        wall: The wall clock.
    """

    def __init__(self, *, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self.version = 0
        self._runs: list[dict[str, Any]] = []
        self._run_index: dict[str, dict[str, Any]] = {}
        self._bars = Bars()
        self._waits = Waits()
        self._fallbacks: list[dict[str, Any]] = []
        self._compactions: list[dict[str, Any]] = []
        self._warnings: list[dict[str, Any]] = []
        self._talk = Conversation()
        self._announcer = Announcer()
        self._status = "idle"
        self._status_kind = "idle"  # idle | running | wait | error | done
        self._clock_offset = 0.0
        self._now: float | None = None
        self._start: float | None = None
        self._summary: dict[str, Any] | None = None
        self._final_text = ""
        self._active = False

    # -- the subscriber -------------------------------------------------------------------

    def __call__(self, event: ev.Event) -> None:
        self.apply(event)

    def apply(self, event: ev.Event) -> None:
        """Fold one event into the state (what calling the state does).

        Args:
            event: Any event of a run, in order.
        """
        self.version += 1
        if isinstance(event, ev.TextDelta):  # the hot path: no other bookkeeping
            if self._talk.text(event.text):
                model = self._talk.stream_model
                self._set_status(f"receiving reply from {model}".strip(), "running")
            return
        if isinstance(event, ev.ThinkingDelta):
            if self._talk.thinking(event.text):
                self._set_status("model is thinking", "running")
            return
        t = num(event.time) or 0.0
        self._now = t if self._now is None else max(self._now, t)
        if self._start is None:
            self._start = t
        self._clock_offset = self._wall() - t
        if not isinstance(event, (ev.RetryScheduled, ev.PacedWait, ev.BudgetWarning)):
            self._waits.stop_countdown()
        super().__call__(event)
        self._announcer.heard(event)

    # -- the snapshot ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A fresh JSON-able dict (no object is shared with the live state).

        Returns:
            The state as plain JSON-able data.
        """
        runs = [{**r, "summary": dict(r["summary"]) if r["summary"] else None} for r in self._runs]
        waits = self._waits.snapshot()
        bars = self._bars.snapshot(waits["waits"])
        return {
            "version": self.version,
            "active": self._active,
            "status": self._status,
            "status_kind": self._status_kind,
            "clock_offset": self._clock_offset,
            "start": self._start,
            "now": self._now,
            "runs": runs,
            "bars": bars,
            **waits,
            "axis": timeline_axis(bars, waits["waits"], self._start, self._now),
            "announcement": self._announcer.snapshot(),
            "fallbacks": [dict(f) for f in self._fallbacks],
            "compactions": [dict(c) for c in self._compactions],
            "warnings": [dict(w) for w in self._warnings],
            "conversation": self._talk.entries(),
            "final_text": self._final_text,
            "summary": dict(self._summary) if self._summary else None,
            "session": session_summary(runs),
        }

    @property
    def status(self) -> str:
        """The status line the widget shows ("receiving reply from demo", ...)."""
        return self._status

    # -- helpers --------------------------------------------------------------------------

    def _set_status(self, text: str, kind: str) -> None:
        self._status = text
        self._status_kind = kind

    def _run(self, event: ev.Event) -> dict[str, Any]:
        run = self._run_index.get(event.run_id)
        if run is None:
            run = new_run(event.run_id, num(event.time))
            self._runs.append(run)
            self._run_index[event.run_id] = run
        return run

    # -- handlers -------------------------------------------------------------------------

    def _on_run_started(self, event: ev.RunStarted) -> None:
        run = self._run(event)
        run.update(prompt=event.prompt, model=event.model, started=num(event.time))
        if event.call:
            run.update(call=event.call, layer_attempt=event.layer_attempt)
        self._active = True
        self._summary = None
        self._final_text = ""
        self._talk.reset_stream(event.model)
        if event.prompt:
            self._talk.prompt(event.run_id, event.prompt)
        self._set_status(f"starting run with {event.model}".strip(), "running")

    def _on_attempt_started(self, event: ev.AttemptStarted) -> None:
        self._run(event)
        self._active = True
        self._talk.reset_stream(event.model)
        self._bars.attempt_started(event)
        verb = "summarising older turns with" if event.phase == "compaction" else "requesting"
        text = f"{verb} {event.model}".strip()
        if event.attempt > 1:
            text += f" (attempt {event.attempt}/{event.max_attempts})"
        self._set_status(text, "running")

    def _on_attempt_succeeded(self, event: ev.AttemptSucceeded) -> None:
        self._bars.attempt_succeeded(event)

    def _on_attempt_failed(self, event: ev.AttemptFailed) -> None:
        failure = self._bars.attempt_failed(event)
        discarded = event.discarded_text or self._talk.streamed()
        if discarded:
            self._talk.discard(
                discarded,
                reason=failure_text(event.error, event.status_code, ""),
                action=event.action,
                attempt=event.attempt,
            )
        self._talk.reset_stream()
        if event.cancelled:
            self._set_status("cancelled", "error")
        elif event.action == "compact":
            self._set_status(f"{describe(event.error)}: compacting the conversation", "wait")
        elif event.action == "fallback":
            self._set_status(f"{describe(event.error)}: falling back", "wait")
        elif event.action == "retry":
            self._set_status(f"{describe(event.error)}: retrying", "wait")
        elif event.action == "reask":
            self._set_status(f"{describe(event.error)}: asking again ({event.message})", "wait")
        else:
            self._set_status(failure, "error")

    def _on_retry_scheduled(self, event: ev.RetryScheduled) -> None:
        self._waits.retry(event, lane(event.phase))
        delay = seconds(num(event.delay_s) or 0.0)
        label = describe(event.error)
        step = f"(attempt {event.next_attempt}/{event.max_attempts})"
        said = "server asked to wait" if event.retry_after_s is not None else "retrying in"
        self._set_status(f"{label}: {said} {delay} {step}", "wait")

    def _on_sdk_retry_scheduled(self, event: ev.SDKRetryScheduled) -> None:
        # A watched SDK (nbagent.watch) waits, not the agent: say whose wait it is and why.
        self._waits.retry(event, lane(event.phase))
        why = "server's Retry-After" if event.retry_after_s is not None else "its own backoff"
        delay = seconds(num(event.delay_s) or 0.0)
        sdk = event.sdk or "the SDK"
        text = f"{sdk} is waiting about {delay} ({why}) before attempt {event.next_attempt}"
        self._set_status(text, "wait")

    def _on_paced_wait(self, event: ev.PacedWait) -> None:
        self._waits.paced(event)
        self._set_status(f"rate limiter: sending in {seconds(num(event.delay_s) or 0.0)}", "wait")

    def _on_compaction_started(self, event: ev.CompactionStarted) -> None:
        self._run(event)
        self._bars.compaction_started(
            event,
            label=f"compacting {event.tokens_before:,} tokens",
            tokens_before=event.tokens_before,
            strategy=event.strategy,
            reason=event.reason,
        )
        self._set_status(f"compacting conversation ({event.tokens_before:,} tokens)", "running")

    def _on_compaction_finished(self, event: ev.CompactionFinished) -> None:
        bar = self._bars.compaction_finished(event)
        arrow = f"{event.tokens_before:,} → {event.tokens_after:,} tokens"
        strategy = event.strategy or bar.get("strategy") or ""
        how = _STRATEGY_WORDS.get(strategy, strategy)
        said = f"compacted: {arrow}" + (f" ({how})" if how else "")
        detail = said
        if event.removed:
            detail += f", {event.removed} messages removed"
        if event.message:
            detail += f" — {event.message}"
        bar.update(  # the finished bar is the compaction's record too (the snapshot's list)
            end=num(event.time),
            outcome="ok" if event.ok else "error",
            label=arrow if event.ok else "compaction failed",
            detail=detail,
            tokens_before=event.tokens_before,
            tokens_after=event.tokens_after,
            removed=event.removed,
            strategy=strategy,
            ok=event.ok,
            message=event.message,
            reason=bar.get("reason", ""),
        )
        self._compactions.append(bar)
        self._talk.note(detail, event.ok)
        if event.ok:
            self._set_status(said, "running")
        else:
            self._set_status(f"compaction failed: {event.message}".rstrip(": "), "error")

    def _on_tool_call_started(self, event: ev.ToolCallStarted) -> None:
        self._run(event)
        self._talk.tool_names[event.call_id] = event.name
        self._bars.tool_started(event)
        self._tool_status()

    def _on_tool_call_finished(self, event: ev.ToolCallFinished) -> None:
        self._bars.tool_finished(event)
        if self._bars.tools:
            self._tool_status()
        elif event.is_error:
            why = f" ({event.error})" if event.error else ""
            self._set_status(f"tool {event.name} failed{why}: the model reads the error", "running")
        else:
            self._set_status(f"tool {event.name} done", "running")

    def _tool_status(self) -> None:
        names = [b["name"] for b in self._bars.tools.values()]
        noun = "tool" if len(names) == 1 else "tools"
        self._set_status(f"running {noun} {', '.join(names)}", "running")

    def _on_message_committed(self, event: ev.MessageCommitted) -> None:
        self._talk.commit(event.run_id, event.index, event.message)

    def _on_tool_call_delta(self, event: ev.ToolCallDelta) -> None:
        if self._talk.tool_delta(event.index, event.name, event.arguments):
            self._set_status(f"model is calling {event.name}", "running")

    def _on_fallback_started(self, event: ev.FallbackStarted) -> None:
        label = describe(event.error) or "fallback"
        self._fallbacks.append(
            {
                "run_id": event.run_id,
                "time": num(event.time),
                "from_model": event.from_model,
                "to_model": event.to_model,
                "error": event.error,
                "message": event.message,
                "label": label,
            }
        )
        self._set_status(f"{label}: switching from {event.from_model} to {event.to_model}", "wait")

    def _on_tool_source_unavailable(self, event: ev.ToolSourceUnavailable) -> None:
        text = f"tool source {event.source} is unavailable: {event.reason}"
        self._warnings.append({"run_id": event.run_id, "time": num(event.time), "text": text})
        self._set_status(text, "running")

    def _on_budget_warning(self, event: ev.BudgetWarning) -> None:
        text = event.message or (
            f"budget warning: {event.limit} at {event.actual:g} of {event.limit_value:g}"
        )
        self._warnings.append({"run_id": event.run_id, "time": num(event.time), "text": text})
        if not self._waits.current:
            self._set_status(text, "wait")

    def _on_run_finished(self, event: ev.RunFinished) -> None:
        run = self._run(event)
        t = num(event.time)
        # Anything still open when the run ends was cut off by whatever ended it.
        outcome = "cancelled" if event.end_reason == "cancelled" else "error"
        self._bars.cut(event.run_id, t, outcome)
        if t is not None:
            self._waits.cut(event.run_id, t)
        self._talk.settle(event.run_id)
        usage = usage_dict(event.usage)
        run.update(
            finished=t,
            end_reason=event.end_reason,
            usage=usage,
            error=event.error,
            message=event.message,
        )
        if event.model:
            run["model"] = event.model
        self._active = False
        self._final_text = clip(event.final_text, STREAM_LIMIT)
        self._summary = self._summarise(run)
        run["summary"] = self._summary
        self._set_status(*end_status(event.end_reason, event.error, event.message))

    def _summarise(self, run: dict[str, Any]) -> dict[str, Any]:
        rid = run["run_id"]
        requests = None
        if run["layer_attempt"] > 1:  # an outer layer's retry: count its intended call's too
            tries = {r["run_id"] for r in self._runs if r["call"] == run["call"]}
            requests = sum(1 for b in self._bars if b["kind"] == "attempt" and b["run_id"] in tries)
        return run_summary(
            run,
            (b for b in self._bars if b["run_id"] == rid),
            self._waits.of_run(rid),
            compactions=sum(1 for c in self._compactions if c["run_id"] == rid),
            fallbacks=sum(1 for f in self._fallbacks if f["run_id"] == rid),
            call_requests=requests,
        )
