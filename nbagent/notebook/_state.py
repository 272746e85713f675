"""Events in, a JSON-able picture of the run out: what the timeline widget draws.

`TimelineState` is a subscriber like any other. It keeps everything the front end needs (bars
per attempt, backoff waits, fallbacks, compactions, the conversation, a status line, a summary)
and hands it over as a plain dict from `snapshot()`. It knows nothing of ipywidgets, so the same
dict feeds the live widget, the HTML export and the tests.

Streaming deltas are the hot path (thousands per reply): they append to a list of chunks that is
joined only when a snapshot is taken. Nothing here reads the environment or the agent: the state
holds only what the events carry, and events never carry API keys.

Times are seconds on the agent's clock. `clock_offset` (wall time minus agent clock, measured at
the latest event) lets the browser turn `wait_until` into a live countdown.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._core._messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..errors import describe
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    BudgetWarning,
    CompactionFinished,
    CompactionStarted,
    Event,
    FallbackStarted,
    MessageCommitted,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolSourceUnavailable,
)

__all__ = ["TimelineState"]

# Caps on text kept in the state: it is synced to the browser up to ten times a second.
TEXT_LIMIT = 20_000
TOOL_TEXT_LIMIT = 8_000
STREAM_LIMIT = 100_000

_DONE_REASONS = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "stop", "length"}


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters)"


def _clip_head(text: str, limit: int) -> str:
    """Keep the end of a long stream: the newest text is what a reader watches."""
    if len(text) <= limit:
        return text
    return f"({len(text) - limit:,} earlier characters) …" + text[-limit:]


def _num(value: Any) -> float | None:
    """A JSON-safe number: JavaScript's JSON.parse rejects NaN and Infinity."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


def _seconds(value: float) -> str:
    return f"{value:.1f}s"


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    if dataclasses.is_dataclass(usage) and not isinstance(usage, type):
        raw: Mapping[str, Any] = dataclasses.asdict(usage)
    elif isinstance(usage, Mapping):
        raw = usage
    else:
        return None
    out: dict[str, Any] = {}
    for key in (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "requests",
    ):
        if key in raw:
            out[key] = _int(raw[key])
    if "cost_usd" in raw:
        out["cost_usd"] = _num(raw["cost_usd"])
    return out


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _failure_text(kind: str, status_code: int | None, message: str) -> str:
    text = describe(kind) if kind else "error"
    if status_code is not None:
        text += f" (HTTP {status_code})"
    if message:
        text += f": {message}"
    return text


class TimelineState:
    """Maps events to the widget's state; call it with each event, read `snapshot()`.

    `wall` is the wall clock (injectable for tests); it only serves `clock_offset`.
    """

    def __init__(self, *, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self.version = 0
        self._runs: list[dict[str, Any]] = []
        self._run_index: dict[str, dict[str, Any]] = {}
        self._bars: list[dict[str, Any]] = []
        self._open_attempts: dict[tuple[str, str], dict[str, Any]] = {}
        self._open_tools: dict[str, dict[str, Any]] = {}
        self._open_compaction: dict[str, dict[str, Any]] = {}
        self._waits: list[dict[str, Any]] = []
        self._fallbacks: list[dict[str, Any]] = []
        self._compactions: list[dict[str, Any]] = []
        self._warnings: list[dict[str, Any]] = []
        self._conversation: list[dict[str, Any]] = []
        self._tool_names: dict[str, str] = {}
        self._chunks: list[str] = []
        self._thinking: list[str] = []
        self._tool_deltas: dict[int, dict[str, Any]] = {}
        self._stream_model = ""
        self._status = "idle"
        self._status_kind = "idle"  # idle | running | wait | error | done
        self._wait_until: float | None = None
        self._wait: dict[str, Any] | None = None
        self._clock_offset = 0.0
        self._now: float | None = None
        self._start: float | None = None
        self._summary: dict[str, Any] | None = None
        self._final_text = ""
        self._active = False

    # -- the subscriber -------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        self.apply(event)

    def apply(self, event: Event) -> None:
        self.version += 1
        if isinstance(event, TextDelta):  # the hot path: no other bookkeeping
            if not self._chunks:
                self._set_status(f"receiving reply from {self._stream_model}".strip(), "running")
            self._chunks.append(event.text)
            return
        if isinstance(event, ThinkingDelta):
            if not self._thinking and not self._chunks:
                self._set_status("model is thinking", "running")
            self._thinking.append(event.text)
            return
        t = _num(event.time) or 0.0
        self._now = t if self._now is None else max(self._now, t)
        if self._start is None:
            self._start = t
        self._clock_offset = self._wall() - t
        if not isinstance(event, (RetryScheduled, PacedWait, BudgetWarning)):
            self._wait_until = None
            self._wait = None
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # -- the snapshot ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A fresh JSON-able dict (no object is shared with the live state)."""
        conversation = list(self._conversation)
        live = self._live_entry()
        if live is not None:
            conversation.append(live)
        return {
            "version": self.version,
            "active": self._active,
            "status": self._status,
            "status_kind": self._status_kind,
            "wait_until": self._wait_until,
            "wait": dict(self._wait) if self._wait else None,
            "clock_offset": self._clock_offset,
            "start": self._start,
            "now": self._now,
            "runs": [dict(r) for r in self._runs],
            "bars": [dict(b) for b in self._bars],
            "waits": [dict(w) for w in self._waits],
            "fallbacks": [dict(f) for f in self._fallbacks],
            "compactions": [dict(c) for c in self._compactions],
            "warnings": [dict(w) for w in self._warnings],
            "conversation": conversation,
            "final_text": self._final_text,
            "summary": dict(self._summary) if self._summary else None,
        }

    @property
    def status(self) -> str:
        return self._status

    def _live_entry(self) -> dict[str, Any] | None:
        if not (self._chunks or self._thinking or self._tool_deltas):
            return None
        if len(self._chunks) > 1:  # join once, so the next snapshot joins little
            self._chunks = ["".join(self._chunks)]
        if len(self._thinking) > 1:
            self._thinking = ["".join(self._thinking)]
        calls = [
            {"name": d["name"], "arguments": _clip("".join(d["arguments"]), TOOL_TEXT_LIMIT)}
            for _, d in sorted(self._tool_deltas.items())
        ]
        return {
            "kind": "streaming",
            "role": "assistant",
            "text": _clip_head(self._chunks[0] if self._chunks else "", STREAM_LIMIT),
            "thinking": _clip_head(self._thinking[0] if self._thinking else "", TEXT_LIMIT),
            "tool_calls": calls,
            "model": self._stream_model,
        }

    # -- helpers --------------------------------------------------------------------------

    def _set_status(self, text: str, kind: str) -> None:
        self._status = text
        self._status_kind = kind

    def _run(self, event: Event) -> dict[str, Any]:
        run = self._run_index.get(event.run_id)
        if run is None:
            run = {
                "run_id": event.run_id,
                "prompt": "",
                "model": "",
                "started": _num(event.time),
                "finished": None,
                "end_reason": None,
                "usage": None,
                "error": "",
                "message": "",
            }
            self._runs.append(run)
            self._run_index[event.run_id] = run
        return run

    def _reset_stream(self) -> None:
        self._chunks = []
        self._thinking = []
        self._tool_deltas = {}

    def _open_bar(self, event: Event, lane: str, kind: str, **fields: Any) -> dict[str, Any]:
        t = _num(event.time) or 0.0
        bar: dict[str, Any] = {
            "id": len(self._bars),
            "run_id": event.run_id,
            "turn": event.turn,
            "lane": lane,
            "kind": kind,
            "start": t,
            "end": None,
            "outcome": "running",
            "action": "",
            "label": "",
            "detail": "",
            "is_error": False,
        }
        bar.update(fields)
        self._bars.append(bar)
        return bar

    def _attempt_bar(self, event: AttemptSucceeded | AttemptFailed) -> dict[str, Any]:
        bar = self._open_attempts.pop((event.run_id, event.phase), None)
        if bar is None:  # an end without a start: draw it as an instant
            bar = self._open_bar(
                event,
                _lane(event.phase),
                "attempt",
                attempt=event.attempt,
                max_attempts=event.max_attempts,
                model=event.model,
            )
        bar["end"] = _num(event.time)
        return bar

    # -- handlers -------------------------------------------------------------------------

    def _on_run_started(self, event: RunStarted) -> None:
        run = self._run(event)
        run.update(prompt=event.prompt, model=event.model, started=_num(event.time))
        self._active = True
        self._summary = None
        self._final_text = ""
        self._reset_stream()
        self._stream_model = event.model
        if event.prompt:
            self._conversation.append(
                {
                    "kind": "message",
                    "role": "user",
                    "blocks": [{"type": "text", "text": _clip(event.prompt, TEXT_LIMIT)}],
                    "pending": True,
                    "run_id": event.run_id,
                }
            )
        self._set_status(f"starting run with {event.model}".strip(), "running")

    def _on_attempt_started(self, event: AttemptStarted) -> None:
        self._run(event)
        self._active = True
        self._reset_stream()
        self._stream_model = event.model
        lane = _lane(event.phase)
        what = "compaction request" if lane == "compaction" else "attempt"
        label = f"{what} {event.attempt}/{event.max_attempts}"
        bar = self._open_bar(
            event,
            lane,
            "attempt",
            label=label,
            attempt=event.attempt,
            max_attempts=event.max_attempts,
            model=event.model,
        )
        self._open_attempts[(event.run_id, event.phase)] = bar
        verb = "summarising with" if lane == "compaction" else "requesting"
        text = f"{verb} {event.model}".strip()
        if event.attempt > 1:
            text += f" (attempt {event.attempt}/{event.max_attempts})"
        self._set_status(text, "running")

    def _on_attempt_succeeded(self, event: AttemptSucceeded) -> None:
        bar = self._attempt_bar(event)
        bar["outcome"] = "ok"
        bar["action"] = "none"
        tokens = []
        if event.input_tokens is not None:
            tokens.append(f"{event.input_tokens:,} in")
        if event.output_tokens is not None:
            tokens.append(f"{event.output_tokens:,} out")
        detail = f"{bar['label']} ok" + (f" · {', '.join(tokens)} tokens" if tokens else "")
        if event.stop_reason:
            detail += f" · stop: {event.stop_reason}"
        if event.request_id:
            detail += f" · request {event.request_id}"
        bar.update(
            detail=detail,
            input_tokens=_int(event.input_tokens),
            output_tokens=_int(event.output_tokens),
            cost_usd=_num(event.cost_usd),
            ttft_s=_num(event.ttft_s),
            stop_reason=event.stop_reason,
        )

    def _on_attempt_failed(self, event: AttemptFailed) -> None:
        bar = self._attempt_bar(event)
        bar["outcome"] = "cancelled" if event.cancelled else "error"
        bar["action"] = event.action
        bar["error"] = event.error
        bar["status_code"] = event.status_code
        failure = _failure_text(event.error, event.status_code, event.message)
        bar["detail"] = f"{bar['label']}: {failure} → {event.action}"
        if event.request_id:
            bar["detail"] += f" [request id {event.request_id}]"
        discarded = event.discarded_text or "".join(self._chunks)
        if discarded:
            self._conversation.append(
                {
                    "kind": "discarded",
                    "role": "assistant",
                    "text": _clip(discarded, TEXT_LIMIT),
                    "reason": _failure_text(event.error, event.status_code, ""),
                    "action": event.action,
                    "attempt": event.attempt,
                }
            )
        self._reset_stream()
        if event.cancelled:
            self._set_status("cancelled", "error")
        elif event.action == "compact":
            self._set_status(f"{describe(event.error)}: compacting the conversation", "wait")
        elif event.action == "fallback":
            self._set_status(f"{describe(event.error)}: falling back", "wait")
        elif event.action == "retry":
            self._set_status(f"{describe(event.error)}: retrying", "wait")
        else:
            self._set_status(failure, "error")

    def _on_retry_scheduled(self, event: RetryScheduled) -> None:
        self._begin_wait(
            event,
            delay=_num(event.delay_s) or 0.0,
            lane=_lane(event.phase),
            kind="retry",
            fields={
                "server_wish": event.retry_after_s is not None,
                "retry_after_s": _num(event.retry_after_s),
                "policy_delay_s": _num(event.policy_delay_s),
                "attempt": event.attempt,
                "next_attempt": event.next_attempt,
                "max_attempts": event.max_attempts,
                "error": event.error,
                "status_code": event.status_code,
                "label": describe(event.error),
                "detail": _failure_text(event.error, event.status_code, event.message),
            },
        )
        delay = _seconds(_num(event.delay_s) or 0.0)
        label = describe(event.error)
        step = f"(attempt {event.next_attempt}/{event.max_attempts})"
        if event.retry_after_s is not None:
            self._set_status(f"{label}: server asked to wait {delay} {step}", "wait")
        else:
            self._set_status(f"{label}: retrying in {delay} {step}", "wait")

    def _on_paced_wait(self, event: PacedWait) -> None:
        delay = _num(event.delay_s) or 0.0
        self._begin_wait(
            event,
            delay=delay,
            lane="request",
            kind="paced",
            fields={
                "server_wish": False,
                "label": "rate limiter",
                "detail": event.reason or "held back by the shared rate limiter",
            },
        )
        self._set_status(f"rate limiter: sending in {_seconds(delay)}", "wait")

    def _begin_wait(
        self, event: Event, *, delay: float, lane: str, kind: str, fields: dict[str, Any]
    ) -> None:
        t = _num(event.time) or 0.0
        wait: dict[str, Any] = {
            "id": len(self._waits),
            "run_id": event.run_id,
            "lane": lane,
            "kind": kind,
            "start": t,
            "end": t + delay,
            "delay_s": delay,
        }
        wait.update(fields)
        self._waits.append(wait)
        self._wait_until = t + delay
        self._wait = {
            k: wait.get(k)
            for k in ("kind", "label", "server_wish", "delay_s", "next_attempt", "max_attempts")
        }

    def _on_compaction_started(self, event: CompactionStarted) -> None:
        self._run(event)
        bar = self._open_bar(
            event,
            "compaction",
            "compaction",
            label=f"compacting {event.tokens_before:,} tokens",
            tokens_before=event.tokens_before,
            strategy=event.strategy,
            reason=event.reason,
        )
        self._open_compaction[event.run_id] = bar
        self._set_status(f"compacting conversation ({event.tokens_before:,} tokens)", "running")

    def _on_compaction_finished(self, event: CompactionFinished) -> None:
        bar = self._open_compaction.pop(event.run_id, None)
        if bar is None:
            bar = self._open_bar(event, "compaction", "compaction")
        t = _num(event.time)
        arrow = f"{event.tokens_before:,} → {event.tokens_after:,} tokens"
        bar.update(
            end=t,
            outcome="ok" if event.ok else "error",
            label=arrow if event.ok else "compaction failed",
            tokens_before=event.tokens_before,
            tokens_after=event.tokens_after,
            removed=event.removed,
        )
        strategy = event.strategy or bar.get("strategy") or ""
        detail = f"compaction ({strategy}): {arrow}" if strategy else f"compaction: {arrow}"
        if event.removed:
            detail += f", {event.removed} messages removed"
        if event.message:
            detail += f" — {event.message}"
        bar["detail"] = detail
        self._compactions.append(
            {
                "run_id": event.run_id,
                "start": bar["start"],
                "end": t,
                "tokens_before": event.tokens_before,
                "tokens_after": event.tokens_after,
                "strategy": strategy,
                "removed": event.removed,
                "ok": event.ok,
                "message": event.message,
                "reason": bar.get("reason", ""),
            }
        )
        self._conversation.append({"kind": "note", "text": detail, "ok": event.ok})
        if event.ok:
            self._set_status(f"compacted: {arrow}", "running")
        else:
            self._set_status(f"compaction failed: {event.message}".rstrip(": "), "error")

    def _on_tool_started(self, event: ToolCallStarted) -> None:
        self._run(event)
        self._tool_names[event.call_id] = event.name
        bar = self._open_bar(
            event,
            "tool",
            "tool",
            label=event.name,
            name=event.name,
            call_id=event.call_id,
            arguments=_clip(_json_text(event.arguments), TOOL_TEXT_LIMIT),
            source=event.source,
        )
        self._open_tools[event.call_id] = bar
        self._tool_status()

    def _on_tool_finished(self, event: ToolCallFinished) -> None:
        bar = self._open_tools.pop(event.call_id, None)
        if bar is None:
            bar = self._open_bar(event, "tool", "tool", label=event.name, name=event.name)
            bar["start"] = (_num(event.time) or 0.0) - (_num(event.duration_s) or 0.0)
        bar.update(
            end=_num(event.time),
            outcome="error" if event.is_error else "ok",
            action="tool_result",
            is_error=event.is_error,
            error=event.error,
            detail=_clip(event.content, TOOL_TEXT_LIMIT),
        )
        if self._open_tools:
            self._tool_status()
        elif event.is_error:
            why = f" ({event.error})" if event.error else ""
            self._set_status(f"tool {event.name} failed{why}: the model reads the error", "running")
        else:
            self._set_status(f"tool {event.name} done", "running")

    def _tool_status(self) -> None:
        names = [b["name"] for b in self._open_tools.values()]
        noun = "tool" if len(names) == 1 else "tools"
        self._set_status(f"running {noun} {', '.join(names)}", "running")

    def _on_message(self, event: MessageCommitted) -> None:
        entry = self._message_entry(event.message)
        if entry is None:
            return
        entry["index"] = event.index
        if entry["role"] == "assistant":
            self._reset_stream()
        if entry["role"] == "user":
            pending = next(
                (
                    e
                    for e in reversed(self._conversation)
                    if e.get("pending") and e.get("run_id") == event.run_id
                ),
                None,
            )
            if pending is not None and pending["blocks"] == entry["blocks"]:
                self._conversation.remove(pending)
        self._conversation.append(entry)

    def _message_entry(self, message: Any) -> dict[str, Any] | None:
        if isinstance(message, Mapping):
            try:
                message = Message.from_dict(dict(message))
            except (ValueError, TypeError):
                return None
        if not isinstance(message, Message):
            return None
        blocks: list[dict[str, Any]] = []
        for block in message.blocks:
            if isinstance(block, TextBlock):
                blocks.append({"type": "text", "text": _clip(block.text, TEXT_LIMIT)})
            elif isinstance(block, ThinkingBlock):
                blocks.append({"type": "thinking", "text": _clip(block.thinking, TEXT_LIMIT)})
            elif isinstance(block, ImageBlock):
                blocks.append({"type": "image", "media_type": block.media_type})
            elif isinstance(block, ToolUseBlock):
                self._tool_names[block.id] = block.name
                args = block.raw_input if block.raw_input is not None else _json_text(block.input)
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "arguments": _clip(args, TOOL_TEXT_LIMIT),
                    }
                )
            elif isinstance(block, ToolResultBlock):
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": block.tool_use_id,
                        "name": self._tool_names.get(block.tool_use_id, ""),
                        "text": _clip(block.text, TOOL_TEXT_LIMIT),
                        "is_error": block.is_error,
                    }
                )
        return {"kind": "message", "role": message.role, "blocks": blocks}

    def _on_tool_delta(self, event: ToolCallDelta) -> None:
        delta = self._tool_deltas.setdefault(event.index, {"name": "", "arguments": []})
        if event.name:
            if not delta["name"]:
                self._set_status(f"model is calling {event.name}", "running")
            delta["name"] = event.name
        if event.arguments:
            delta["arguments"].append(event.arguments)

    def _on_fallback(self, event: FallbackStarted) -> None:
        self._fallbacks.append(
            {
                "run_id": event.run_id,
                "time": _num(event.time),
                "from_model": event.from_model,
                "to_model": event.to_model,
                "error": event.error,
                "message": event.message,
                "label": describe(event.error) if event.error else "fallback",
            }
        )
        self._set_status(
            f"{describe(event.error) or 'fallback'}: switching from {event.from_model} "
            f"to {event.to_model}",
            "wait",
        )

    def _on_source_unavailable(self, event: ToolSourceUnavailable) -> None:
        text = f"tool source {event.source} is unavailable: {event.reason}"
        self._warnings.append({"run_id": event.run_id, "time": _num(event.time), "text": text})
        self._set_status(text, "running")

    def _on_budget_warning(self, event: BudgetWarning) -> None:
        text = event.message or (
            f"budget warning: {event.limit} at {event.actual:g} of {event.limit_value:g}"
        )
        self._warnings.append({"run_id": event.run_id, "time": _num(event.time), "text": text})
        if not self._wait:
            self._set_status(text, "wait")

    def _on_run_finished(self, event: RunFinished) -> None:
        run = self._run(event)
        t = _num(event.time)
        # Anything still open when the run ends was cut off by whatever ended it.
        outcome = "cancelled" if event.end_reason == "cancelled" else "error"
        open_bars = [*self._open_attempts.values(), *self._open_tools.values()]
        open_bars += self._open_compaction.values()
        for bar in open_bars:
            if bar["run_id"] == event.run_id:
                bar.update(end=t, outcome=outcome)
        self._open_attempts = {
            k: b for k, b in self._open_attempts.items() if b["run_id"] != event.run_id
        }
        self._open_tools = {
            k: b for k, b in self._open_tools.items() if b["run_id"] != event.run_id
        }
        self._open_compaction.pop(event.run_id, None)
        if t is not None:
            for wait in self._waits:  # a wait the run did not live to finish is cut short
                if wait["run_id"] == event.run_id and wait["end"] > t:
                    wait.update(end=t, delay_s=max(0.0, t - wait["start"]), cut=True)
        for entry in self._conversation:
            if entry.get("run_id") == event.run_id:
                entry.pop("pending", None)
        usage = _usage_dict(event.usage)
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
        self._final_text = _clip(event.final_text, STREAM_LIMIT)
        self._summary = self._summarise(run)
        reason = event.end_reason or "finished"
        if event.end_reason == "cancelled":
            self._set_status("cancelled" + (f": {event.message}" if event.message else ""), "error")
        elif event.end_reason == "error" or (event.error and reason not in _DONE_REASONS):
            what = describe(event.error) if event.error else "error"
            self._set_status(
                f"failed: {what}" + (f": {event.message}" if event.message else ""), "error"
            )
        elif event.end_reason == "budget":
            self._set_status("stopped: " + (event.message or "budget exceeded"), "error")
        else:
            self._set_status(f"done: {reason}", "done")

    def _summarise(self, run: dict[str, Any]) -> dict[str, Any]:
        rid = run["run_id"]
        bars = [b for b in self._bars if b["run_id"] == rid]
        attempts = [b for b in bars if b["kind"] == "attempt"]
        tools = [b for b in bars if b["kind"] == "tool"]
        waits = [w for w in self._waits if w["run_id"] == rid]
        usage = run["usage"] or {}
        input_tokens = usage.get("input_tokens")
        output_tokens = usage.get("output_tokens")
        cost = usage.get("cost_usd")
        if input_tokens is None:
            input_tokens = sum(b.get("input_tokens") or 0 for b in attempts)
        if output_tokens is None:
            output_tokens = sum(b.get("output_tokens") or 0 for b in attempts)
        if cost is None:
            costs = [b["cost_usd"] for b in attempts if b.get("cost_usd") is not None]
            cost = sum(costs) if costs else None
        started, finished = run["started"], run["finished"]
        return {
            "run_id": rid,
            "model": run["model"],
            "end_reason": run["end_reason"],
            "error": run["error"],
            "message": run["message"],
            "attempts": len(attempts),
            "failed_attempts": sum(1 for b in attempts if b["outcome"] != "ok"),
            "retries": sum(1 for w in waits if w["kind"] == "retry"),
            "waiting_s": round(sum(w["delay_s"] for w in waits), 3),
            "tool_calls": len(tools),
            "tool_errors": sum(1 for b in tools if b["is_error"]),
            "compactions": sum(1 for c in self._compactions if c["run_id"] == rid),
            "fallbacks": sum(1 for f in self._fallbacks if f["run_id"] == rid),
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_usd": cost,
            "duration_s": (
                round(finished - started, 3)
                if finished is not None and started is not None
                else None
            ),
        }


def _lane(phase: str) -> str:
    return "compaction" if phase == "compaction" else "request"


_HANDLERS: dict[type[Event], Callable[[TimelineState, Any], None]] = {
    RunStarted: TimelineState._on_run_started,
    AttemptStarted: TimelineState._on_attempt_started,
    AttemptSucceeded: TimelineState._on_attempt_succeeded,
    AttemptFailed: TimelineState._on_attempt_failed,
    RetryScheduled: TimelineState._on_retry_scheduled,
    PacedWait: TimelineState._on_paced_wait,
    CompactionStarted: TimelineState._on_compaction_started,
    CompactionFinished: TimelineState._on_compaction_finished,
    ToolCallStarted: TimelineState._on_tool_started,
    ToolCallFinished: TimelineState._on_tool_finished,
    MessageCommitted: TimelineState._on_message,
    ToolCallDelta: TimelineState._on_tool_delta,
    FallbackStarted: TimelineState._on_fallback,
    BudgetWarning: TimelineState._on_budget_warning,
    ToolSourceUnavailable: TimelineState._on_source_unavailable,
    RunFinished: TimelineState._on_run_finished,
}
