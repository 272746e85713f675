"""One call to a batch endpoint of the mock server: its body, its answer, and the endpoint fault
(``create:429``, ``results:cut``, ...) that decides whether the answer arrives, late, or broken.

The provider modules (`_anthropic_batches`, `_openai_batches`, `_gemini_batches`) see only a
`BatchCall`; the request handler builds one per request whose path is a batch endpoint.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import parse_qs

from ._batch_timeline import Provider
from ._batches import BatchStore
from ._faults import OK, Fault
from ._formats import Codec
from ._ratelimit import RateDecision, format_seconds
from ._records import redact_headers

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from ._server import MockServer

FLUSH_BYTES = 65_536


def send_head(
    handler: BaseHTTPRequestHandler,
    status: int,
    ctype: str,
    headers: Mapping[str, str],
    *,
    length: int | None = None,
) -> None:
    """The status line and headers of an answer (the model endpoints' and the batch calls'):
    its content type, its `length` in bytes or (None) chunked encoding, then `headers`."""
    handler.send_response(status)
    handler.send_header("content-type", ctype)
    if length is None:
        handler.send_header("transfer-encoding", "chunked")
    else:
        handler.send_header("content-length", str(length))
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()


class Hangup(Exception):
    """The connection is to be closed without (the rest of) an answer."""


class CallError(Exception):
    """A request the endpoint refuses: answered with ``status`` and the provider's ``body``."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Endpoint:
    """One batch endpoint: its method, its path pattern, the fault target it answers to
    (None: no endpoint faults) and what serves it."""

    method: str
    pattern: re.Pattern[str]
    target: str | None
    provider: Callable[[re.Match[str]], Provider]
    serve: Callable[[BatchCall], None]
    max_body: int = 1024 * 1024


class BatchCall:
    """One request to a batch endpoint, as a provider module serves it."""

    def __init__(
        self,
        handler: BaseHTTPRequestHandler,
        mock: MockServer,
        endpoint: Endpoint,
        match: re.Match[str],
        codec: Codec,
    ) -> None:
        self.handler = handler
        self.mock = mock
        self.store: BatchStore = mock.batch_store
        self.endpoint = endpoint
        self.match = match
        self.codec = codec
        self.provider: Provider = endpoint.provider(match)
        self.method = handler.command
        self.path = handler.path
        self.query = {k: v[-1] for k, v in parse_qs(handler.path.partition("?")[2]).items()}
        self.request_id = codec.new_request_id()
        self.fault: Fault = OK
        self.body: Any = None  # what the request record keeps (never a whole batch)
        self.started = False  # the status line has been sent
        self._body_read = False
        self._recorded = False

    # --- the request ----------------------------------------------------------------------------

    def header(self, name: str) -> str:
        return str(self.handler.headers.get(name) or "")

    def base_url(self) -> str:
        """The address the client reached the mock at, for URLs it is to follow."""
        host = self.header("host") or f"127.0.0.1:{self.mock.port}"
        return f"http://{host}"

    def read_body(self) -> bytes:
        self._body_read = True
        try:
            length = int(self.header("content-length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.refuse(400, "Bad content-length.")
        limit = self.endpoint.max_body
        if length > limit:
            self.handler.close_connection = True  # the rest of the body is never read
            if self.codec.name == "gemini":
                message = f"Request payload size exceeds the limit: {limit} bytes."
                raise CallError(400, self.codec.bad_request(message, self.request_id, None))
            body = self.codec.status_error(413, "", self.request_id, "1")
            raise CallError(413, body)
        return self.handler.rfile.read(length) if length else b""

    def json_body(self) -> Any:
        raw = self.read_body()
        try:
            return json.loads(raw) if raw else {}
        except (ValueError, UnicodeDecodeError):
            message = "There was an error parsing the body as JSON."
            raise CallError(400, self.codec.bad_request(message, self.request_id, None)) from None

    def int_query(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.query.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            message = f"{name}: must be a whole number from {low} to {high}, got {raw!r}."
            raise CallError(400, self.codec.bad_request(message, self.request_id, name))
        return value

    def refuse(self, status: int, message: str, param: str | None = None) -> NoReturn:
        """Answer ``status`` with the provider's invalid-request error saying ``message``."""
        body = self.codec.bad_request(message, self.request_id, param)
        raise CallError(status, body)

    # --- the answer -----------------------------------------------------------------------------

    def _record(self, status: int) -> None:
        if self._recorded:
            return
        self._recorded = True
        self.mock.record(
            method=self.method,
            path=self.path,
            format=self.codec.name,
            body=self.body,
            headers=redact_headers(dict(self.handler.headers.items())),
            fault=str(self.fault),
            status=status,
            request_id=self.request_id,
            stream=False,
        )

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {self.codec.id_header: self.request_id} if self.codec.id_header else {}
        if self.fault.should_retry is not None:
            headers["x-should-retry"] = "true" if self.fault.should_retry else "false"
        return {**headers, **(extra or {})}

    def hang_up(self, status: int = 0) -> NoReturn:
        self._record(status)
        self.handler.close_connection = True
        with contextlib.suppress(OSError):
            self.handler.connection.shutdown(socket.SHUT_RDWR)
        raise Hangup

    def before(self) -> bool:
        """Apply a fault that stops the call before anything is done; True when it did."""
        fault = self.fault
        if fault.kind == "close":
            self.hang_up()
        status = fault.status
        if status is None:
            return False
        codec, rid = self.codec, self.request_id
        extra: dict[str, str] = {}
        if fault.kind == "quota":
            body = codec.quota_error(rid, "")
        else:
            retry = format_seconds(fault.retry_after_s or 0.0)
            body = codec.status_error(status, "", rid, retry)
        if fault.kind == "429":
            seconds = fault.retry_after_s or 0.0
            extra.update(codec.retry_headers(seconds))
            extra.update(codec.rate_headers(RateDecision(False, seconds, 50, 0, seconds)))
        self.error(codec.http_status(status), body, extra)
        return True

    def error(self, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
        self._record(status)
        data = json.dumps(body, ensure_ascii=False).encode()
        self._send_whole(status, data, "application/json", self._headers(extra))

    def reply(self, body: Any, status: int = 200) -> None:
        """Answer with a JSON body, as the call's fault allows (done, then lost, late, broken)."""
        self.reply_bytes(json.dumps(body, ensure_ascii=False).encode(), "application/json", status)

    def reply_bytes(self, data: bytes, ctype: str, status: int = 200) -> None:
        kind = self.fault.kind
        if kind in ("cut", "stall"):
            half = max(1, len(data) // 2)
            self.reply_stream([data[:half], data[half:]], ctype, 2, status)
            return
        self._after_action(status)
        if kind == "malformed":
            data = data[: len(data) // 2]
        self._send_whole(status, data, ctype, self._headers())

    def reply_stream(
        self, chunks: Iterable[bytes], ctype: str, count: int, status: int = 200
    ) -> None:
        """Answer with a body made piece by piece (``count`` pieces), in chunked encoding: a
        ``cut`` ends it after half of them, a ``stall`` pauses there."""
        self._after_action(status)
        self._drain()
        self.started = True
        send_head(self.handler, status, ctype, self._headers())
        fault = self.fault
        halfway = count // 2 if count > 1 else 0
        buffer: list[bytes] = []
        size = 0
        for i, piece in enumerate(chunks):
            if i == halfway and fault.kind in ("cut", "stall"):
                if fault.kind == "cut":
                    buffer.append(piece[: len(piece) // 2])
                    self._write_chunk(b"".join(buffer))
                    self.hang_up(status)
                self._write_chunk(b"".join(buffer))
                buffer, size = [], 0
                if self.mock.wait(fault.seconds or 0.0):
                    self.hang_up(status)
            buffer.append(piece)
            size += len(piece)
            if size >= FLUSH_BYTES:
                self._write_chunk(b"".join(buffer))
                buffer, size = [], 0
        if fault.kind == "cut":  # fewer pieces than expected: cut what there is
            self._write_chunk(b"".join(buffer)[: max(0, size // 2)])
            self.hang_up(status)
        self._write_chunk(b"".join(buffer))
        self._write(b"0\r\n\r\n")

    def _after_action(self, status: int) -> None:
        kind = self.fault.kind
        if kind == "lost":
            self.hang_up()
        self._record(status)
        if kind == "slow" and self.mock.wait(self.fault.seconds or 0.0):
            self.hang_up(status)

    def _drain(self) -> None:
        """Read a body nobody read (the call was refused first), so the next request on the
        connection starts where it should; one too large to read closes the connection."""
        if self._body_read:
            return
        try:
            self.read_body()
        except CallError:
            self.handler.close_connection = True

    def _send_whole(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
        self._drain()
        self.started = True
        send_head(self.handler, status, ctype, headers, length=len(data))
        self._write(data)

    def _write_chunk(self, data: bytes) -> None:
        if data:
            self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def _write(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(data)
        except OSError as err:
            raise Hangup from err
