"""The model endpoints of the mock server: a request answered in its wire format, through the
rate limit, the fault script, the context window and the responder; or from a recording."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from typing import Any

from ._answer_faults import faulted_reply
from ._call import Call, Hangup
from ._codec import Route
from ._conversation import Conversation, RequestError
from ._emulate import refused_response_format
from ._fault_answers import rate_limited, status_fault
from ._faults import STREAM_KINDS, Fault
from ._formats import parse_request, route
from ._replay import Mismatch
from ._reply import MockReply

SOME_TEXT = 3  # text deltas sent before a mid-stream fault (stall, malformed, overloaded)


def read_model_body(call: Call) -> bytes:
    """The body, and the exchange `MockServer(record=...)` keeps of it."""
    raw = call.read_body()
    recorder = call.mock.recorder
    if recorder is not None:
        call.exchange = recorder.exchange("POST", call.path, None, raw)
    return raw


def serve_model(call: Call) -> None:
    """Answer a POST to a model endpoint (the format its path names)."""
    found = route(call.path)
    assert found is not None  # the route table matched a model path
    read_model_body(call)
    fmt = call.codec.name
    body = call.body = call.json_body()  # what the request's record keeps
    call.stream = found.stream or bool(isinstance(body, dict) and body.get("stream"))
    emulating = call.mock.emulate is not None and fmt == "openai"
    refused = refused_response_format(body) if emulating else None
    if refused is not None:  # its pydantic model, before the request reaches the model
        call.error(500, refused)
        return
    conv = parse_request(fmt, body, found)  # a RequestError is the route table's 400
    forced = conv.forced_tool
    if forced not in (None, "*") and forced not in conv.tools:
        message = f"tool_choice names the tool {forced!r}, which is not among the tools"
        raise RequestError(message, "tool_choice")
    _answer(call, found, conv, emulating)


def _answer(call: Call, found: Route, conv: Conversation, emulating: bool) -> None:
    mock, codec, rid = call.mock, call.codec, call.request_id
    if emulating:  # a request reaching the model cuts the streams being written
        mock.interrupts.arrived()
        conv = dataclasses.replace(conv, include_usage=False)
    if mock.rate_limit is not None:
        decision = mock.rate_limit.acquire(conv.prompt_tokens)
        call.extra.update(codec.rate_headers(decision))
        if not decision.allowed:
            rate_limited(call, decision, conv.model, fault="rate_limit")
            return
    fault = call.fault = mock.plan.next()
    if fault.kind == "close":
        call.hang_up()
    if fault.kind == "slow" and mock.wait(fault.seconds or 0.0):
        call.hang_up()
    as_status = fault
    if fault.kind == "overloaded_midstream" and not conv.stream:
        as_status = dataclasses.replace(fault, kind="529")
    if status_fault(call, as_status, conv.model, conv.prompt_tokens, fault=str(fault)):
        return
    window = mock.context_window
    if window is not None and conv.prompt_tokens > window:
        error = codec.overflow_error(conv.prompt_tokens, window, rid)
        call.error(400, error, fault="context_window")
        return
    reply = faulted_reply(fault.kind, mock.responder, conv)
    call.record(200)
    if not conv.stream:
        _whole(call, conv, reply)
        return
    cuts = mock.interrupts.streaming() if emulating else contextlib.nullcontext()
    with cuts as cut:
        _Stream(call, found, conv, reply, cut).run()


def _whole(call: Call, conv: Conversation, reply: MockReply) -> None:
    message = call.codec.whole(reply, conv, call.codec.message_id(call.request_id))
    data = json.dumps(message, ensure_ascii=False).encode()
    fault = call.fault
    if fault.kind == "stall" and call.mock.wait(fault.seconds or 0.0):
        call.hang_up()
    if fault.kind == "malformed":
        data = data[: len(data) // 2]
    if fault.kind in ("drop_after_tokens", "cut_after_done"):
        call.head(200, "application/json", call.id_headers(), len(data))
        call.write(data[: len(data) // 2])
        call.hang_up()
    call.send(200, data, "application/json", call.id_headers())


@dataclasses.dataclass
class _Stream:
    """One streamed answer, with its mid-stream fault and its cut (`emulate=`)."""

    call: Call
    found: Route
    conv: Conversation
    reply: MockReply
    cut: Any  # threading.Event | None

    def run(self) -> None:
        call, fault = self.call, self.call.fault
        codec, mid = call.codec, call.codec.message_id(call.request_id)
        headers = {"cache-control": "no-cache", **call.id_headers()}
        call.head(200, "text/event-stream; charset=utf-8", headers)
        delay = call.mock.demo_delay_s
        limits = {"drop_after_tokens": fault.tokens or 0, "no_finish_reason": math.inf}
        trigger_at = limits.get(fault.kind, SOME_TEXT)
        armed = fault.kind in STREAM_KINDS
        sent_text = 0
        for kind, data in codec.stream(self.reply, self.conv, mid, self.found.azure):
            if self.cut is not None and self.cut.is_set():  # interrupt_requests
                call.chunk(codec.unreasoned_end(None))
                call.end()
                return
            if armed and (kind == "final" or (kind == "text" and sent_text >= trigger_at)):
                armed = False
                if self._midstream_fault(fault, mid):
                    return
            call.chunk(data)
            if kind == "text":
                sent_text += 1
            if delay > 0 and kind in ("text", "body"):
                call.flush()
                self._pause(delay)
        call.end()

    def _pause(self, seconds: float) -> None:
        """Wait `seconds` mid-stream: a stopping server drops the answer; a cut stream
        (`interrupt_requests`) stops waiting and ends at its next piece."""
        if self.cut is not None:
            self.cut.wait(seconds)
        if self.call.mock.wait(0.0 if self.cut is not None else seconds):
            self.call.hang_up()

    def _midstream_fault(self, fault: Fault, mid: str) -> bool:
        """Apply a mid-stream fault; True when the stream is over."""
        call, codec = self.call, self.call.codec
        if fault.kind == "stall":
            call.flush()
            self._pause(fault.seconds or 0.0)
            return False
        if fault.kind in ("no_finish_reason", "cut_after_done"):
            # in place of the finish and usage events: the usage alone (Snowflake Cortex), or
            # nothing (llama-cpp-python's cut stream); the end marker, then a clean end
            usage = self.reply if fault.kind == "no_finish_reason" else None
            call.chunk(codec.unreasoned_end(usage))
            call.end()
            return True
        if fault.kind == "drop_after_tokens":
            call.flush()
            call.hang_up()
        call.chunk(
            codec.malformed(mid) if fault.kind == "malformed" else codec.midstream_error(mid)
        )
        call.end()
        return True


# --- replaying a recording (MockServer(replay=...)) ----------------------------------------------


def serve_replay(call: Call) -> None:
    """Answer a model request with the next recorded answer, at its recorded pace."""
    replayer = call.mock.replayer
    assert replayer is not None
    call.recorded = True  # a replay keeps no request records
    raw = read_model_body(call)
    t0 = time.perf_counter()
    ex = replayer.take("POST", call.path, raw)
    if isinstance(ex, Mismatch):
        call.extra["x-should-retry"] = "false"
        call.send_json(400, call.codec.error_body(400, ex.message, call.request_id, None))
        return

    def until(after: float | None) -> None:
        delay = t0 + replayer.scaled(after or 0.0) - time.perf_counter()
        if delay > 0 and call.mock.wait(delay):
            raise Hangup

    if ex.status is None:  # no answer was recorded: the connection closed first
        until(ex.end_after_s)
        call.hang_up()
    until(ex.response_after_s)
    headers = dict(ex.headers)
    call.head(ex.status, headers.pop("content-type", "application/json"), headers)
    for after, data in ex.chunks:
        until(after)
        call.chunk(data)
        call.flush()
    if ex.error is not None or not ex.complete:
        until(ex.end_after_s)
        call.hang_up()
    call.end()
