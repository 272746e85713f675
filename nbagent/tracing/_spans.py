"""Events in, spans out: the subscriber behind `nbagent.instrument()`.

One run is one trace subtree, shaped like the widget's timeline::

    invoke_agent                          (INTERNAL; the run: usage, end reason)
      chat claude-sonnet-4-0              (CLIENT; attempt 1: error.type=ServerError, action retry)
        event nbagent.retry_scheduled     (delay, policy delay, the server's Retry-After)
      chat claude-sonnet-4-0              (attempt 2, a sibling: the gap between them is the wait)
      execute_tool read_file              (INTERNAL; error.type when the result is an error)
      chat claude-sonnet-4-0              (nbagent.phase=compaction: the summary request)
    events on invoke_agent: compaction started/finished, fallback, budget warnings

Every time comes from the event (seconds on the agent's clock), mapped to wall time once per
run, at `RunStarted`: so a run in virtual time shows its virtual waits, and a span's length is
what the attempt log says. A failed attempt's span is ended when its `RetryScheduled` arrives,
so the retry event lands on the attempt it belongs to, with the attempt's own end time.

Content (prompt, streamed text, tool arguments and results) is recorded only with
`capture_content=True`, in the conventions' opt-in attributes. Events never carry keys, so no
span can.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    BudgetWarning,
    CompactionFinished,
    CompactionStarted,
    Event,
    FallbackStarted,
    Handlers,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolSourceUnavailable,
)
from . import _semconv as S

_FAILED_ENDS = ("error", "cancelled", "budget")
_WAIT_ATTRIBUTES = (S.DELAY, S.POLICY_DELAY, S.RETRY_AFTER)  # a retried attempt's, on its span


@dataclass
class _Attempt:
    span: Span
    attempt: int
    failed_at: int | None = None  # ns: failed, its span waits for the RetryScheduled
    text: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [id, name, arguments]


@dataclass
class _Run:
    span: Span
    context: otel_context.Context
    offset_ns: int
    attempts: dict[str, _Attempt] = field(default_factory=dict)  # phase -> the current one
    reasks: int = 0  # the run's reasks so far: the next request's `nbagent.reask`
    tools: dict[str, Span] = field(default_factory=dict)  # call id -> span

    def ns(self, t: float) -> int:
        return self.offset_ns + round(t * 1e9)


class SpanRecorder(Handlers):
    """A process-wide event subscriber (`subscribe_everywhere`) that turns runs into spans."""

    def __init__(self, tracer: Tracer, *, capture_content: bool = False) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self._runs: dict[str, _Run] = {}
        # Agents on several threads (run_sync, batches) share this subscriber.
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            # only a run that started while tracing was on is traced: every handler but
            # `_on_run_started` finds its run in `_runs`
            if isinstance(event, RunStarted) or event.run_id in self._runs:
                super().__call__(event)

    def close(self) -> None:
        """End every span still open (tracing was turned off mid-run), at the current time."""
        with self._lock:
            now = time.time_ns()
            for run in self._runs.values():
                for att in run.attempts.values():
                    att.span.end(att.failed_at or now)
                for span in run.tools.values():
                    span.end(now)
                run.span.set_attribute(S.MESSAGE, "tracing was turned off before the run ended")
                run.span.end(now)
            self._runs.clear()

    # -- runs -----------------------------------------------------------------------------------

    def _child(self, run: _Run, name: str, kind: SpanKind, t: float, attrs: dict[str, Any]) -> Span:
        return self.tracer.start_span(
            name, context=run.context, kind=kind, start_time=run.ns(t), attributes=attrs
        )

    def _on_run_started(self, e: RunStarted) -> None:
        offset = time.time_ns() - round(e.time * 1e9)
        attrs = _operation(S.INVOKE_AGENT, e.model)[1]
        attrs[S.RUN_ID] = e.run_id
        if e.agent_id:
            # one Agent object holds one conversation: its id names both
            attrs[S.AGENT_ID] = e.agent_id
            attrs[S.CONVERSATION_ID] = e.agent_id
        if self.capture_content:
            attrs[S.INPUT_MESSAGES] = _messages("user", [_text_part(e.prompt)])
        # the caller's current span (if any) is the parent: a run inside a user's span nests
        span = self.tracer.start_span(
            S.INVOKE_AGENT,
            kind=SpanKind.INTERNAL,
            start_time=offset + round(e.time * 1e9),
            attributes=attrs,
        )
        ctx = trace.set_span_in_context(span)
        self._runs[e.run_id] = _Run(span, ctx, offset)

    def _on_run_finished(self, e: RunFinished) -> None:
        run = self._runs.pop(e.run_id)
        end = run.ns(e.time)
        for att in run.attempts.values():
            if att.failed_at is not None:
                att.span.end(att.failed_at)
            else:  # in flight when the run ended (cancelled, a subscriber raised)
                _fail(att.span, e.error or "Aborted", e.message)
                att.span.end(end)
        for span in run.tools.values():
            _fail(span, e.error or "Aborted", e.message)
            span.end(end)
        u = e.usage
        span = run.span
        span.set_attributes(
            {
                S.INPUT_TOKENS: u.input_tokens,
                S.OUTPUT_TOKENS: u.output_tokens,
                S.CACHE_READ_TOKENS: u.cache_read_tokens,
                S.CACHE_CREATION_TOKENS: u.cache_write_tokens,
                S.TURNS: e.turn,
                S.END_REASON: e.end_reason,
            }
        )
        if u.cost_usd is not None:
            span.set_attribute(S.COST, float(u.cost_usd))
        if e.end_reason in _FAILED_ENDS:
            _fail(span, e.error or e.end_reason, e.message)
        else:
            span.set_attribute(S.FINISH_REASONS, [e.end_reason])
            if self.capture_content:
                span.set_attribute(
                    S.OUTPUT_MESSAGES,
                    _messages("assistant", [_text_part(e.final_text)], e.end_reason),
                )
        span.end(end)

    # -- attempts ---------------------------------------------------------------------------------

    def _on_attempt_started(self, e: AttemptStarted) -> None:
        run = self._runs[e.run_id]
        self._end_attempt(run, e.phase, e.time)
        model, attrs = _operation(S.CHAT, e.model)
        attrs.update(
            {S.PHASE: e.phase, S.ATTEMPT: e.attempt, S.MAX_ATTEMPTS: e.max_attempts, S.TURN: e.turn}
        )
        if e.phase == "request":
            attrs[S.REASK] = run.reasks
        span = self._child(run, f"{S.CHAT} {model}", SpanKind.CLIENT, e.time, attrs)
        run.attempts[e.phase] = _Attempt(span, e.attempt)

    def _end_attempt(self, run: _Run, phase: str, t: float) -> None:
        """End the phase's previous attempt: one waiting for its retry event, or a stale one."""
        att = run.attempts.pop(phase, None)
        if att is None:
            return
        if att.failed_at is not None:
            att.span.end(att.failed_at)
        else:
            att.span.set_attribute(S.MESSAGE, "no end event before the next attempt started")
            att.span.end(run.ns(t))

    def _on_text_delta(self, e: TextDelta) -> None:
        if self.capture_content:
            att = self._runs[e.run_id].attempts.get("request")
            if att is not None:
                att.text.append(e.text)

    def _on_tool_call_delta(self, e: ToolCallDelta) -> None:
        if self.capture_content:
            att = self._runs[e.run_id].attempts.get("request")
            if att is not None:
                call = att.calls.setdefault(e.index, ["", "", ""])
                call[0] = e.call_id or call[0]
                call[1] = e.name or call[1]
                call[2] += e.arguments

    def _on_attempt_succeeded(self, e: AttemptSucceeded) -> None:
        run = self._runs[e.run_id]
        att = run.attempts.pop(e.phase, None)
        if att is None:
            return
        span = att.span
        # The provider's request id is the id nbagent's events carry for a completion.
        _set(span, S.RESPONSE_ID, e.response_id or e.request_id)
        _set(span, S.INPUT_TOKENS, e.input_tokens)
        _set(span, S.OUTPUT_TOKENS, e.output_tokens)
        _set(span, S.CACHE_READ_TOKENS, e.cache_read_tokens)
        _set(span, S.CACHE_CREATION_TOKENS, e.cache_write_tokens)
        _set(span, S.TTFT, e.ttft_s)
        _set(span, S.COST, e.cost_usd)
        _set(span, S.HTTP_STATUS, e.status_code)
        if e.stop_reason:
            span.set_attribute(S.FINISH_REASONS, [e.stop_reason])
        span.set_attribute(S.ACTION, "none")
        if self.capture_content and e.phase == "request":
            parts = [_text_part("".join(att.text))] if att.text else []
            for _, (call_id, name, args) in sorted(att.calls.items()):
                parts.append(
                    {"type": "tool_call", "id": call_id, "name": name, "arguments": _json(args)}
                )
            span.set_attribute(
                S.OUTPUT_MESSAGES, _messages("assistant", parts, e.stop_reason or "")
            )
        span.end(run.ns(e.time))

    def _on_attempt_failed(self, e: AttemptFailed) -> None:
        run = self._runs[e.run_id]
        att = run.attempts.get(e.phase)
        if att is None:
            return
        span = att.span
        _fail(span, e.error, e.message)
        span.set_attribute(S.ACTION, e.action)
        if e.action == "reask" and e.phase == "request":
            run.reasks += 1
        _set(span, S.HTTP_STATUS, e.status_code)
        _set(span, S.RESPONSE_ID, e.request_id)
        _set(span, S.RETRY_AFTER, e.retry_after_s)
        _set(span, S.TTFT, e.ttft_s)
        discarded = len(e.discarded_text) + len(e.discarded_thinking)
        if discarded:
            span.set_attribute(S.DISCARDED, discarded)
        # an answer that came and was refused (a reask, a truncation) cost its tokens
        _set(span, S.INPUT_TOKENS, e.input_tokens)
        _set(span, S.OUTPUT_TOKENS, e.output_tokens)
        _set(span, S.COST, e.cost_usd)
        if e.output_errors:
            span.set_attribute(S.OUTPUT_ERRORS, list(e.output_errors))
        if e.action == "retry":  # the wait comes next: end the span when it is announced
            att.failed_at = run.ns(e.time)
            return
        del run.attempts[e.phase]
        span.end(run.ns(e.time))

    def _on_retry_scheduled(self, e: RetryScheduled) -> None:
        run = self._runs[e.run_id]
        attrs: dict[str, Any] = {
            S.ATTEMPT: e.attempt,
            S.NEXT_ATTEMPT: e.next_attempt,
            S.ACTION: "retry",
            S.DELAY: float(e.delay_s),
            S.POLICY_DELAY: float(e.policy_delay_s),
            S.ERROR_TYPE: e.error,
        }
        if e.retry_after_s is not None:
            attrs[S.RETRY_AFTER] = float(e.retry_after_s)
        att = run.attempts.get(e.phase)
        if att is None or att.failed_at is None or att.attempt != e.attempt:
            run.span.add_event(S.EV_RETRY, attrs, timestamp=run.ns(e.time))
            return
        # the failed attempt's span says the wait that follows it, and ends
        span = att.span
        span.set_attributes({k: v for k, v in attrs.items() if k in _WAIT_ATTRIBUTES})
        span.add_event(S.EV_RETRY, attrs, timestamp=run.ns(e.time))
        del run.attempts[e.phase]
        span.end(att.failed_at)

    def _on_paced_wait(self, e: PacedWait) -> None:
        run = self._runs[e.run_id]
        att = run.attempts.get("request")
        target = att.span if att is not None and att.failed_at is None else run.span
        attrs: dict[str, Any] = {S.DELAY: float(e.delay_s), S.REASON: e.reason, S.ACTION: "paced"}
        target.add_event(S.EV_PACED, attrs, timestamp=run.ns(e.time))

    # -- tools ------------------------------------------------------------------------------------

    def _on_tool_call_started(self, e: ToolCallStarted) -> None:
        run = self._runs[e.run_id]
        run.tools[e.call_id] = self._tool_span(run, e.name, e.call_id, e.source, e.time)
        if self.capture_content:
            run.tools[e.call_id].set_attribute(
                S.TOOL_CALL_ARGUMENTS, json.dumps(e.arguments, default=str)
            )

    def _tool_span(self, run: _Run, name: str, call_id: str, source: str, t: float) -> Span:
        attrs: dict[str, Any] = {
            S.OPERATION: S.EXECUTE_TOOL,
            S.TOOL_NAME: name,
            S.TOOL_CALL_ID: call_id,
            S.TOOL_TYPE: "function",
        }
        if source:
            attrs[S.TOOL_SOURCE] = source
        return self._child(run, f"{S.EXECUTE_TOOL} {name}", SpanKind.INTERNAL, t, attrs)

    def _on_tool_call_finished(self, e: ToolCallFinished) -> None:
        run = self._runs[e.run_id]
        span = run.tools.pop(e.call_id, None)
        if span is None:
            span = self._tool_span(run, e.name, e.call_id, e.source, e.time - e.duration_s)
        if e.is_error:
            kind = e.error or "tool_error"
            # the content is what the model reads: content, so only when asked for
            _fail(span, kind, e.content if self.capture_content else kind)
            span.set_attribute(S.ACTION, "tool_result")
        elif self.capture_content:
            span.set_attribute(S.TOOL_CALL_RESULT, e.content)
        span.end(run.ns(e.time))

    # -- run span events --------------------------------------------------------------------------

    def _run_event(self, e: Event, name: str, attrs: dict[str, Any]) -> None:
        run = self._runs[e.run_id]
        run.span.add_event(name, attrs, timestamp=run.ns(e.time))

    def _on_compaction_started(self, e: CompactionStarted) -> None:
        attrs = {S.REASON: e.reason, S.STRATEGY: e.strategy, S.TOKENS_BEFORE: e.tokens_before}
        self._run_event(e, S.EV_COMPACTION_STARTED, attrs)

    def _on_compaction_finished(self, e: CompactionFinished) -> None:
        attrs: dict[str, Any] = {
            S.STRATEGY: e.strategy,
            S.TOKENS_BEFORE: e.tokens_before,
            S.TOKENS_AFTER: e.tokens_after,
            S.REMOVED: e.removed,
            S.OK: e.ok,
        }
        if e.message:
            attrs[S.MESSAGE] = e.message
        self._run_event(e, S.EV_COMPACTION_FINISHED, attrs)

    def _on_fallback_started(self, e: FallbackStarted) -> None:
        attrs = {S.FROM_MODEL: e.from_model, S.TO_MODEL: e.to_model, S.ERROR_TYPE: e.error}
        self._run_event(e, S.EV_FALLBACK, attrs)

    def _on_budget_warning(self, e: BudgetWarning) -> None:
        attrs = {
            S.BUDGET_LIMIT: e.limit,
            S.BUDGET_ACTUAL: float(e.actual),
            S.BUDGET_LIMIT_VALUE: float(e.limit_value),
        }
        self._run_event(e, S.EV_BUDGET, attrs)

    def _on_tool_source_unavailable(self, e: ToolSourceUnavailable) -> None:
        self._run_event(e, S.EV_TOOLS_UNAVAILABLE, {S.TOOL_SOURCE: e.source, S.REASON: e.reason})


def _operation(operation: str, model_string: str) -> tuple[str, dict[str, Any]]:
    """The request model, and the attributes every model-facing span starts with."""
    provider, model = S.provider_and_model(model_string)
    return model, {S.OPERATION: operation, S.PROVIDER: provider, S.REQUEST_MODEL: model}


def _set(span: Span, key: str, value: Any) -> None:
    if value is not None:
        span.set_attribute(key, value)


def _fail(span: Span, error: str, message: str) -> None:
    span.set_attribute(S.ERROR_TYPE, error)
    span.set_status(Status(StatusCode.ERROR, message or error))


def _json(text: str) -> Any:
    """Tool arguments as an object where they decode (the conventions ask for one)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def _messages(role: str, parts: list[dict[str, Any]], finish_reason: str | None = None) -> str:
    """One message in the conventions' JSON message shape, as the JSON string spans take."""
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return json.dumps([message])
