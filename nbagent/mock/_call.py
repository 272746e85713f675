"""One request to the mock server, whichever endpoint it is for: a `Call`.

The route table (`_routes`) finds the endpoint; the request handler builds one `Call` per request
and hands it to the endpoint's function, which reads the request from it (method, path
parameters, query, headers, body) and answers through it (a JSON body, a stream, an error, a
hang-up). The call keeps the request in `MockServer.requests` and applies the endpoint faults
(``create:429``, ``results:cut``, ...) of the batch endpoints.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol
from urllib.parse import parse_qs

from ..recording._format import KEY_HEADERS
from ._batch_timeline import Provider
from ._batches import BatchStore
from ._codec import Codec
from ._conversation import Format
from ._emulate import Interrupts
from ._faults import OK, Fault, FaultPlan
from ._formats import CODECS, guess_codec
from ._ratelimit import RateLimit
from ._records import RequestRecord, redact_headers, redact_path
from ._replay import Replayer
from ._reply import Responder

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from ..recording import Exchange, Recorder

FLUSH_BYTES = 16_384
MAX_BODY = 64 * 1024 * 1024
IDENTITY_HEADERS = (*KEY_HEADERS, "user-agent")


class Hangup(Exception):
    """The connection is to be closed without (the rest of) an answer."""


class CallError(Exception):
    """A request the endpoint refuses: answered with ``status`` and the provider's ``body``."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class Server(Protocol):
    """What a call reads of the server it came to (a `MockServer`)."""

    batch_store: BatchStore
    plan: FaultPlan
    responder: Responder
    rate_limit: RateLimit | None
    context_window: int | None
    demo_delay_s: float
    emulate: str | None
    interrupts: Interrupts
    replayer: Replayer | None
    recorder: Recorder | None

    @property
    def port(self) -> int: ...

    def wait(self, seconds: float) -> bool: ...

    def record(self, **fields: Any) -> RequestRecord: ...


@dataclass(frozen=True)
class Endpoint:
    """One row of the route table: a method and a path pattern (a regular expression the whole
    path, without its query, must match; its named groups are the call's ``params``), and the
    function that answers a `Call` to it.

    Attributes:
        method: The HTTP method.
        pattern: The path pattern.
        serve: What answers the call.
        format: The wire format its errors are written in (None: guessed from the request).
        provider: The API it belongs to (a batch endpoint's), or None.
        target: The fault target it answers to (``create``, ``results``, ...), or None.
        max_body: The largest request body it reads, in bytes.
        model: Whether it is a model endpoint (answered from a recording in a replay).
        when: A further test of the call (None: the pattern decides alone).
        regex: The compiled pattern.
    """

    method: str
    pattern: str
    serve: Callable[[Call], None]
    format: Format | None = None
    provider: Provider | None = None
    target: str | None = None
    max_body: int = 1024 * 1024
    model: bool = False
    when: Callable[[Call], bool] | None = None
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))


class Call:
    """One request and its answer.

    Args:
        handler: The HTTP handler the request came through.
        mock: The server it came to.

    Attributes:
        mock: The server it came to.
        method: The HTTP method.
        path: The path and query, as sent.
        bare: The path without its query.
        params: The path parameters the endpoint's pattern named (``id``, ``model``, ...).
        query: The query parameters (the last value of each).
        headers: The request headers, names lowercased, values as sent (secrets included).
        endpoint: The endpoint serving it, or None (a 404).
        codec: The wire format its errors are written in.
        provider: The API it is for (``anthropic``, ``openai``, ``azure``, ``gemini``), or None.
        request_id: The request id it is answered with.
        fault: The fault it answers with (``ok`` unless the fault script says otherwise).
        body: What its request record keeps as the body (never a whole batch).
        stream: Whether its answer is a stream, as its request record says.
        status: The status it was answered with (0: none yet, or the connection closed).
    """

    endpoint: Endpoint | None
    params: dict[str, str]
    provider: Provider | None
    codec: Codec
    request_id: str

    def __init__(self, handler: BaseHTTPRequestHandler, mock: Server) -> None:
        self.handler = handler
        self.mock = mock
        self.store = mock.batch_store
        self.method = handler.command
        self.path = handler.path
        self.bare = handler.path.split("?", 1)[0]
        self.query = {k: v[-1] for k, v in parse_qs(handler.path.partition("?")[2]).items()}
        self.headers = {k.lower(): v for k, v in handler.headers.items()}
        self.fault: Fault = OK
        self.exchange: Exchange | None = None  # what MockServer(record=...) keeps of it
        self.body: Any = None
        self.stream = False
        self.extra: dict[str, str] = {}  # headers every answer carries (rate limits, ...)
        self.status = 0
        self.started = False  # the status line has been sent
        self.recorded = False
        self._body_read = False
        self._raw: bytes | None = None
        self._buffer: list[bytes] = []
        self._buffered = 0
        self.bind(None, {})

    def bind(self, endpoint: Endpoint | None, params: dict[str, str]) -> None:
        """Aim the call at an endpoint, with its path parameters.

        Args:
            endpoint: The endpoint to serve it (None: no endpoint, a 404).
            params: The path parameters its pattern named.
        """
        self.endpoint = endpoint
        self.params = params
        self.provider = endpoint.provider if endpoint is not None else None
        fmt = endpoint.format if endpoint is not None else None
        self.codec = CODECS[fmt] if fmt is not None else guess_codec(self.headers, self.path)
        self.request_id = self.codec.new_request_id()

    # --- the request ----------------------------------------------------------------------------

    @property
    def identity(self) -> dict[str, str]:
        """The headers that say who the client is (its key, its SDK), as sent."""
        return {k: self.headers[k] for k in IDENTITY_HEADERS if k in self.headers}

    @property
    def api(self) -> Provider:
        """The batch API the call is for (only a batch endpoint's call asks)."""
        assert self.provider is not None
        return self.provider

    def header(self, name: str) -> str:
        """One request header.

        Args:
            name: The header's name, in any case.

        Returns:
            Its value, or "" when the request has none.
        """
        return self.headers.get(name.lower(), "")

    def base_url(self) -> str:
        """The address the client reached the mock at, for URLs it is to follow.

        Returns:
            ``http://`` and the host the client named (the loopback port when it named none).
        """
        return f"http://{self.header('host') or f'127.0.0.1:{self.mock.port}'}"

    def read_body(self) -> bytes:
        """The request body (read once; a second read gets the same bytes).

        Returns:
            The body's bytes (empty when it has none).

        Raises:
            CallError: The content-length is not a number, or the body is larger than the
                endpoint reads (400 or 413, in the format's words).
        """
        if self._raw is not None:
            return self._raw
        self._body_read = True
        given = self.header("content-length") or "0"
        if not given.isdecimal():
            self.refuse(400, "Bad content-length.")
        length = int(given)
        limit = self.endpoint.max_body if self.endpoint is not None else MAX_BODY
        if length > limit:
            self.handler.close_connection = True  # the rest of the body is never read
            body = self.codec.status_error(413, "", self.request_id, "1")
            raise CallError(self.codec.http_status(413), body)
        self._raw = self.handler.rfile.read(length) if length else b""
        return self._raw

    def json_body(self) -> Any:
        """The request body read as JSON.

        Returns:
            The parsed body (``{}`` when it is empty).
        """
        raw = self.read_body()
        try:
            return json.loads(raw) if raw else {}
        except (ValueError, UnicodeDecodeError):
            self.refuse(400, "There was an error parsing the body as JSON.")

    def int_query(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number query parameter, refused (400) outside ``low``..``high``.

        Args:
            name: The parameter.
            default: Its value when the query has none.
            low: The smallest value taken.
            high: The largest value taken.

        Returns:
            The value.
        """
        raw = self.query.get(name)
        if raw is None:
            return default
        value = int(raw) if raw.isdecimal() else low - 1
        if not low <= value <= high:
            message = f"{name}: must be a whole number from {low} to {high}, got {raw!r}."
            self.refuse(400, message, name)
        return value

    def refuse(self, status: int, message: str, param: str | None = None) -> NoReturn:
        """Refuse the request with the format's invalid-request error.

        Args:
            status: The HTTP status to answer with.
            message: What the error body says.
            param: The request field at fault, where the format names one.

        Raises:
            CallError: Always: the route table answers it.
        """
        raise CallError(status, self.codec.error_body(400, message, self.request_id, param))

    # --- keeping it -----------------------------------------------------------------------------

    def record(self, status: int, *, fault: str | None = None, stream: bool | None = None) -> None:
        """Keep the request in `MockServer.requests` (once), before it is answered, so a
        client that got its answer finds the record there: filed under the endpoint's wire
        format (None where the endpoint has none), with the call's `body`.

        Args:
            status: The status it is answered with.
            fault: The fault to name (None: the call's).
            stream: Whether the answer is a stream (None: the call's `stream`).
        """
        if self.recorded:
            return
        self.recorded = True
        self.status = status
        self.mock.record(
            method=self.method,
            path=redact_path(self.path),
            format=self.codec.name if self.endpoint is not None and self.endpoint.format else None,
            body=self.body,
            headers=redact_headers(self.headers),
            fault=str(self.fault) if fault is None else fault,
            status=status,
            request_id=self.request_id,
            stream=self.stream if stream is None else stream,
        )

    # --- the answer -----------------------------------------------------------------------------

    def id_headers(self) -> dict[str, str]:
        """The headers every answer to this call carries.

        Returns:
            The request id header, ``x-should-retry`` when the fault sets it, and the extras
            (rate limits, ...).
        """
        headers = {self.codec.id_header: self.request_id} if self.codec.id_header else {}
        if self.fault.should_retry is not None:
            headers["x-should-retry"] = "true" if self.fault.should_retry else "false"
        return headers | self.extra

    def head(
        self, status: int, ctype: str, headers: dict[str, str], length: int | None = None
    ) -> None:
        """Send the status line and headers (the request body is read first when nobody did, so
        the next request on the connection starts where it should).

        Args:
            status: The HTTP status.
            ctype: The content type.
            headers: Further headers.
            length: The body's length in bytes (None: chunked).
        """
        self.drain()
        self.started = True
        self.status = status
        handler = self.handler
        handler.send_response(status)
        handler.send_header("content-type", ctype)
        if length is None:
            handler.send_header("transfer-encoding", "chunked")
        else:
            handler.send_header("content-length", str(length))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if self.exchange is not None:  # what MockServer(record=...) keeps of the head
            self.exchange.response(status, {"content-type": ctype, **headers})

    def send(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
        """Answer with a whole body.

        Args:
            status: The HTTP status.
            data: The body.
            ctype: The content type.
            headers: Further headers.
        """
        self.head(status, ctype, headers, len(data))
        self.write(data)

    def send_json(self, status: int, body: Any) -> None:
        """Answer with a JSON body and the call's headers.

        Args:
            status: The HTTP status.
            body: The body, as JSON.
        """
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send(status, data, "application/json", self.id_headers())

    def error(self, status: int, payload: Any, **record: Any) -> None:
        """Answer an error body (kept first, with `record`'s fields).

        Args:
            status: The HTTP status.
            payload: The error body, as JSON.
            **record: Fields for `record`.
        """
        self.record(status, **record)
        self.send_json(status, payload)

    def _put(self, wire: bytes, data: bytes = b"") -> None:
        """Write `wire` to the client; `data` is what of it the recording keeps."""
        try:
            self.handler.wfile.write(wire)
        except OSError as err:
            raise Hangup from err
        if self.exchange is not None and data:
            self.exchange.chunk(data)

    def write(self, data: bytes) -> None:
        """Write bytes of the body as they are (after `head` with a length).

        Args:
            data: The bytes.
        """
        self._put(data, data)

    def chunk(self, data: bytes) -> None:
        """Add to the chunked body being written (sent once enough is buffered).

        Args:
            data: The bytes to add.
        """
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Send what `chunk` has buffered as one chunk."""
        if not self._buffered:
            return
        payload = b"".join(self._buffer)
        self._buffer, self._buffered = [], 0
        self._put(b"%x\r\n%s\r\n" % (len(payload), payload), payload)

    def end(self) -> None:
        """End the chunked body."""
        self.flush()
        self._put(b"0\r\n\r\n")

    def hang_up(self, status: int = 0) -> NoReturn:
        """Close the connection without (the rest of) an answer.

        Args:
            status: The status to record (0: none was sent).

        Raises:
            Hangup: Always: the handler closes the connection.
        """
        self.record(status)
        self.handler.close_connection = True
        with contextlib.suppress(OSError):
            self.handler.connection.shutdown(socket.SHUT_RDWR)
        raise Hangup

    def drain(self) -> None:
        """Read a body nobody read (the call was refused first), so the next request on the
        connection starts where it should; one too large to read closes the connection."""
        if self._body_read:
            return
        try:
            self.read_body()
        except CallError:
            self.handler.close_connection = True
