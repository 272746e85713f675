"""One HTTP exchange with the mock server: routing, faults, rate limit, context window, replies."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, NoReturn, cast

from . import _batch_routes
from ._answer_faults import answer_fault
from ._batch_http import Hangup, send_head
from ._conversation import Conversation, RequestError
from ._emulate import refused_response_format
from ._faults import OK, STREAM_KINDS, Fault
from ._formats import CODECS, Codec, Route, parse_request, route
from ._ratelimit import RateDecision, format_seconds
from ._records import redact_headers
from ._replay import Mismatch, Replayer
from ._reply import MockReply

if TYPE_CHECKING:
    from ..recording import Exchange, RecordedExchange

if TYPE_CHECKING:
    from ._server import MockServer, _HTTPServer

log = logging.getLogger("nbagent.mock")
SOME_TEXT = 3  # text deltas sent before a mid-stream fault (stall, malformed, overloaded)
FLUSH_BYTES = 16_384
MAX_BODY = 64 * 1024 * 1024


class _Dropped(Exception):
    """The client went away, or a fault closed the connection: stop writing."""


class MockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nbagent-mock/0.1"
    sys_version = ""
    timeout = 300
    disable_nagle_algorithm = True

    # set per request
    _mock: MockServer
    _codec: Codec
    _route: Route
    _request_id: str
    _fault: Fault
    _extra: dict[str, str]
    _buffer: list[bytes]
    _buffered: int
    _started: bool
    _ex: Exchange | None = None  # the exchange being recorded (MockServer(record=...))
    _cut: threading.Event | None = None  # set when another request cuts this stream (emulate=)
    _status_sent: int = 0
    _sent: list[tuple[str, str]]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the request log is ``MockServer.requests``

    # --- entry points ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._mock = cast("_HTTPServer", self.server).mock
        if self._batch():
            return
        path = self.path.split("?", 1)[0]
        if path.rstrip("/") == "/health":
            self._keep("GET", 200, "")
            self._send_bytes(200, b"ok", "text/plain; charset=utf-8", {})
            return
        self._not_found("GET")

    def do_DELETE(self) -> None:
        self._mock = cast("_HTTPServer", self.server).mock
        if not self._batch():
            self._not_found("DELETE")

    def _batch(self) -> bool:
        """Serve a batch endpoint (`_batch_routes`); False when the path is not one."""
        try:
            return _batch_routes.serve(self, self._mock)
        except (Hangup, BrokenPipeError, ConnectionError, TimeoutError):
            self.close_connection = True
            return True

    def do_POST(self) -> None:
        self._mock = cast("_HTTPServer", self.server).mock
        self._started = False
        self._ex = None
        self._cut = None
        if self._batch():
            return
        broke: str | None = None
        try:
            self._post()
        except _Dropped:
            self.close_connection = True
            broke = "the connection was closed"
        except (BrokenPipeError, ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception as err:  # a bug in the mock itself: answer 500 so it is seen, not hidden
            log.exception("nbagent mock server failed on %s", self.path)
            self.close_connection = True
            if not self._started:
                found = route(self.path)
                codec = CODECS[found.format if found else "openai"]
                message = f"nbagent mock server internal error: {type(err).__name__}: {err}"
                self._send_json(500, codec.internal_error(message, "req_mock_error"), {})
        finally:
            if self._ex is not None:
                self._ex.end(error=broke)

    # --- what is sent, for MockServer(record=...) ----------------------------------------------

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status_sent, self._sent = code, []
        super().send_response(code, message)

    def send_header(self, keyword: str, value: str) -> None:
        super().send_header(keyword, value)
        if self._ex is not None:
            self._sent.append((keyword, value))

    def end_headers(self) -> None:
        super().end_headers()
        if self._ex is not None:
            self._ex.response(self._status_sent, self._sent)

    def _chunk(self, data: bytes) -> None:
        if self._ex is not None:
            self._ex.chunk(data)

    # --- helpers --------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return redact_headers({k: v for k, v in self.headers.items()})

    def _guess_codec(self) -> Codec:
        if "anthropic-version" in self.headers or "x-api-key" in self.headers:
            return CODECS["anthropic"]
        if "x-goog-api-key" in self.headers:
            return CODECS["gemini"]
        found = route(self.path)
        return CODECS[found.format if found else "openai"]

    def _keep(
        self,
        method: str,
        status: int,
        request_id: str,
        format: str | None = None,
        body: Any = None,
        fault: str = "ok",
        stream: bool = False,
    ) -> None:
        """Keep the request in `MockServer.requests`; before it is answered, as every request
        is, so a client that got its answer finds the record there."""
        self._mock.record(
            method=method,
            path=self.path,
            format=format,
            body=body,
            headers=self._headers(),
            fault=fault,
            status=status,
            request_id=request_id,
            stream=stream,
        )

    def _id_headers(self, codec: Codec, request_id: str) -> dict[str, str]:
        return {codec.id_header: request_id} if codec.id_header else {}

    def _not_found(self, method: str) -> None:
        codec = self._guess_codec()
        request_id = codec.new_request_id()
        if method == "POST":
            self._read_body()
        body = codec.not_found(self.path, request_id)
        self._keep(method, 404, request_id)
        self._send_json(404, body, self._id_headers(codec, request_id))

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        if length < 0 or length > MAX_BODY:
            raise _Dropped
        raw = self.rfile.read(length) if length else b""
        recorder = self._mock.recorder
        if recorder is not None and self.command == "POST":
            self._ex = recorder.exchange("POST", self.path, None, raw)
        return raw

    def _send_bytes(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
        self._started = True
        send_head(self, status, ctype, headers, length=len(data))
        self.wfile.write(data)
        self._chunk(data)

    def _send_json(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self._send_bytes(status, data, "application/json", headers)

    # --- the model endpoints --------------------------------------------------------------------

    def _post(self) -> None:
        if self._mock.replayer is not None:
            self._replay(self._mock.replayer)
            return
        found = route(self.path)
        if found is None:
            self._not_found("POST")
            return
        self._route = found
        self._codec = codec = CODECS[found.format]
        self._fault = OK
        self._request_id = codec.new_request_id()
        self._extra = self._id_headers(codec, self._request_id)
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            message = "There was an error parsing the body as JSON."
            error = codec.bad_request(message, self._request_id, None)
            self._finish_error(400, error, None, "ok", False)
            return
        refused = refused_response_format(body) if self._emulating else None
        if refused is not None:  # its pydantic model, before the request reaches the model
            self._finish_error(500, refused, body, "ok", bool(body.get("stream")))
            return
        try:
            conv = parse_request(found.format, body, found)
            forced = conv.forced_tool
            if forced not in (None, "*") and forced not in conv.tools:
                raise RequestError(
                    f"tool_choice names the tool {forced!r}, which is not among the tools",
                    "tool_choice",
                )
        except RequestError as err:
            error = codec.bad_request(err.message, self._request_id, err.param)
            streamed = found.stream or bool(isinstance(body, dict) and body.get("stream"))
            self._finish_error(400, error, body, "ok", streamed)
            return
        self._answer(conv, body)

    @property
    def _emulating(self) -> bool:
        """Whether this is the Chat Completions route of a server emulating llama-cpp-python."""
        return self._mock.emulate is not None and self._codec.name == "openai"

    def _record(self, body: Any, fault: str, status: int, stream: bool) -> None:
        """Keep a model request (its wire format, body and fault) in `MockServer.requests`."""
        self._keep("POST", status, self._request_id, self._codec.name, body, fault, stream)

    def _finish_error(self, status: int, error: Any, body: Any, fault: str, stream: bool) -> None:
        self._record(body, fault, status, stream)
        self._send_json(status, error, self._extra)

    def _rate_headers(self, decision: RateDecision) -> dict[str, str]:
        return self._codec.rate_headers(decision)

    def _answer(self, conv: Conversation, body: Any) -> None:
        mock = self._mock
        if self._emulating:  # a request reaching the model cuts the streams being written
            mock.interrupts.arrived()
            conv = dataclasses.replace(conv, include_usage=False)
        if mock.rate_limit is not None:
            decision = mock.rate_limit.acquire(conv.prompt_tokens)
            self._extra.update(self._rate_headers(decision))
            if not decision.allowed:
                self._extra.update(self._codec.retry_headers(decision.retry_after_s))
                retry = format_seconds(decision.retry_after_s)
                error = self._codec.status_error(429, conv.model, self._request_id, retry)
                self._finish_error(429, error, body, "rate_limit", conv.stream)
                return
        fault = mock.plan.next()
        self._fault = fault
        if fault.should_retry is not None:
            self._extra["x-should-retry"] = "true" if fault.should_retry else "false"
        if fault.kind == "close":
            self._record(body, str(fault), 0, conv.stream)
            raise _Dropped
        if fault.kind == "slow" and mock.wait(fault.seconds or 0.0):
            raise _Dropped
        if self._status_fault(fault, conv, body):
            return
        window = mock.context_window
        if window is not None and conv.prompt_tokens > window:
            error = self._codec.overflow_error(conv.prompt_tokens, window, self._request_id)
            self._finish_error(400, error, body, "context_window", conv.stream)
            return
        reply = (
            MockReply(input_tokens=conv.prompt_tokens)
            if fault.kind == "empty"
            else answer_fault(fault.kind, mock.responder(conv), conv)
        )
        self._record(body, str(fault), 200, conv.stream)
        if not conv.stream:
            self._whole(conv, reply)
            return
        cuts = mock.interrupts.streaming() if self._emulating else contextlib.nullcontext()
        with cuts as self._cut:
            self._stream(conv, reply)

    def _status_fault(self, fault: Fault, conv: Conversation, body: Any) -> bool:
        codec, rid = self._codec, self._request_id
        status = fault.status
        if fault.kind == "overloaded_midstream" and not conv.stream:
            status = 529
        if status is None:
            return False
        if fault.kind == "quota":
            error = codec.quota_error(rid, conv.model)
        elif fault.kind == "overflow":
            maximum = self._mock.context_window or codec.default_window
            tokens = max(conv.prompt_tokens, maximum + 1 + conv.prompt_tokens)
            error = codec.overflow_error(tokens, maximum, rid)
            error["error"]["message"] += " (simulated: an injected fault, not the prompt's size)"
        else:
            retry = format_seconds(fault.retry_after_s or 0.0)
            error = codec.status_error(status, conv.model, rid, retry)
        if fault.kind == "429":
            seconds = fault.retry_after_s or 0.0
            self._extra.update(codec.retry_headers(seconds))
            self._extra.update(self._rate_headers(RateDecision(False, seconds, 50, 0, seconds)))
        self._finish_error(codec.http_status(status), error, body, str(fault), conv.stream)
        return True

    # --- non-streaming replies ------------------------------------------------------------------

    def _whole(self, conv: Conversation, reply: MockReply) -> None:
        message = self._codec.whole(reply, conv, self._message_id())
        data = json.dumps(message, ensure_ascii=False).encode()
        kind = self._fault.kind
        if kind == "stall" and self._mock.wait(self._fault.seconds or 0.0):
            raise _Dropped
        if kind == "malformed":
            data = data[: len(data) // 2]
        if kind in ("drop_after_tokens", "cut_after_done"):
            self._started = True
            send_head(self, 200, "application/json", self._extra, length=len(data))
            self.wfile.write(data[: len(data) // 2])
            self._chunk(data[: len(data) // 2])
            raise _Dropped
        self._send_bytes(200, data, "application/json", self._extra)

    def _message_id(self) -> str:
        return self._codec.message_id(self._request_id)

    # --- streaming replies ----------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._buffered:
            return
        payload = b"".join(self._buffer)
        self._buffer, self._buffered = [], 0
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        except OSError as err:
            raise _Dropped from err
        self._chunk(payload)

    def _end_stream(self) -> None:
        self._flush()
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError as err:
            raise _Dropped from err

    def _pieces(self, conv: Conversation, reply: MockReply) -> Iterable[tuple[str, bytes]]:
        return self._codec.stream(reply, conv, self._message_id(), self._route.azure)

    def _stream(self, conv: Conversation, reply: MockReply) -> None:
        self._started = True
        send_head(
            self,
            200,
            "text/event-stream; charset=utf-8",
            {"cache-control": "no-cache", **self._extra},
        )
        self._buffer, self._buffered = [], 0
        fault, mock = self._fault, self._mock
        delay = mock.demo_delay_s
        trigger_at = {"drop_after_tokens": fault.tokens or 0, "no_finish_reason": math.inf}.get(
            fault.kind, SOME_TEXT
        )
        armed = fault.kind in STREAM_KINDS
        sent_text = 0
        for kind, data in self._pieces(conv, reply):
            if self._cut is not None and self._cut.is_set():  # interrupt_requests
                self._write(self._codec.unreasoned_end(None))
                self._end_stream()
                return
            if armed and (kind == "final" or (kind == "text" and sent_text >= trigger_at)):
                armed = False
                if self._midstream_fault(fault, reply):
                    return
            self._write(data)
            if kind == "text":
                sent_text += 1
            if delay > 0 and kind in ("text", "body"):
                self._flush()
                self._pause(delay)
        self._end_stream()

    def _pause(self, seconds: float) -> None:
        """Wait `seconds` mid-stream: a stopping server drops the answer; a cut stream
        (`interrupt_requests`) stops waiting and ends at its next piece."""
        if self._cut is not None:
            self._cut.wait(seconds)
        if self._mock.wait(0.0 if self._cut is not None else seconds):
            raise _Dropped

    def _midstream_fault(self, fault: Fault, reply: MockReply) -> bool:
        """Apply a mid-stream fault; True when the stream is over."""
        if fault.kind == "stall":
            self._flush()
            self._pause(fault.seconds or 0.0)
            return False
        if fault.kind in ("no_finish_reason", "cut_after_done"):
            # in place of the finish and usage events: the usage alone (Snowflake Cortex), or
            # nothing (llama-cpp-python's cut stream); the end marker, then a clean end
            usage = reply if fault.kind == "no_finish_reason" else None
            self._write(self._codec.unreasoned_end(usage))
            self._end_stream()
            return True
        if fault.kind == "drop_after_tokens":
            self._flush()
            self._hang_up()
        if fault.kind == "malformed":
            self._write(self._codec.malformed(self._message_id()))
        else:
            self._write(self._codec.midstream_error(self._message_id()))
        self._end_stream()
        return True

    # --- replaying a recording (MockServer(replay=...)) ------------------------------------------

    def _replay(self, replayer: Replayer) -> None:
        raw = self._read_body()
        t0 = time.perf_counter()
        got = replayer.take("POST", self.path, raw)
        if isinstance(got, Mismatch):
            codec = self._guess_codec()
            rid = codec.new_request_id()
            headers = {"x-should-retry": "false", **self._id_headers(codec, rid)}
            self._send_json(400, codec.bad_request(got.message, rid, None), headers)
            return
        self._serve_recorded(got, t0, replayer)

    def _serve_recorded(self, ex: RecordedExchange, t0: float, replayer: Replayer) -> None:
        def until(after: float | None) -> None:
            delay = t0 + replayer.scaled(after or 0.0) - time.perf_counter()
            if delay > 0 and self._mock.wait(delay):
                raise _Dropped

        if ex.status is None:  # no answer was recorded: the connection closed first
            until(ex.end_after_s)
            self._hang_up()
        until(ex.response_after_s)
        self._started = True
        self.send_response(ex.status)
        for name, value in ex.headers.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for after, data in ex.chunks:
            until(after)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            except OSError as err:
                raise _Dropped from err
            self._chunk(data)
        if ex.error is not None or not ex.complete:
            until(ex.end_after_s)
            self._hang_up()
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError as err:
            raise _Dropped from err

    def _hang_up(self) -> NoReturn:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        raise _Dropped
