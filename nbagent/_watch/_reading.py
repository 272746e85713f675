"""What one watched exchange says: the wire format, the model, and how the attempt ended.

The request shows the format (by its path: `recording._paths.wire_path`), the model and the SDK's
retry count; the answer is read by the provider of that format (`providers._models.reader_of`):
its error reading for statuses and bodies, its own `read_events` for what a stream or a whole
body says (usage, the stop reason, an error event, a cut end), so a watched attempt is read and
classified exactly as the agent's would be.

A streamed reply is scanned, not parsed: each chunk's complete events are decoded only when
they hold one of the provider's `stream_markers` (usage, the stop reason, an error, the end
marker), with a bytes search per chunk; the reader reads those events at the end. That keeps
watching cheap on a 20,000-delta stream.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from ..errors import (
    Aborted,
    InvalidResponse,
    NbAgentError,
    ProviderError,
    StreamInterrupted,
    TransportError,
)
from ..providers._base import Completed
from ..providers._error_text import redact, request_id_from
from ..providers._http import HTTPProvider
from ..providers._http_errors import error_from_response
from ..providers._models import reader_of
from ..providers._sse import ServerSentEvent, SSEParser
from ..providers._whole_body import WholeBody, WholeEvents, replay, whole_body
from ..recording._format import SECRET_HEADERS, digest, json_or_none
from ..recording._paths import wire_path

MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 8 * 1024 * 1024
MAX_PENDING_EVENT = 8 * 1024 * 1024

# POSTs to these do work that sending them twice would do twice: a file uploaded, a batch created
_NOT_TWICE = ("/files", "/uploads", "/batches", ":batchGenerateContent")


@dataclass(frozen=True)
class RequestFacts:
    """What the request shows. `secrets` are the credential values it carries, kept only to
    redact them from what the answer says (never shown, never in a repr). `idempotent` is
    False when sending it twice could do its work twice (a file upload, a batch created; a
    model request is answered again, which costs tokens, not correctness)."""

    provider: str
    model: str
    retry_count: int | None
    key: tuple[str, str, str]  # method, path, the body's digest: the same request sent again
    prompt: str
    secrets: tuple[str, ...]
    reader: HTTPProvider | None  # the provider that reads the answer (None: no known format)
    idempotent: bool = True

    def __repr__(self) -> str:
        return f"RequestFacts(provider={self.provider!r}, model={self.model!r})"


@dataclass
class Ending:
    """How an attempt ended: `error` None for a success, and the answer as the provider's
    reader read it (`completed`: its usage, stop reason and ids), when it has a reader."""

    error: BaseException | None = None
    request_id: str | None = None
    completed: Completed | None = None


def _last_user_text(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or body.get("contents")
    if isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict):
        content = msgs[-1].get("content", msgs[-1].get("parts"))
    else:
        content = body.get("input")
    if isinstance(content, str):
        return content[:500]
    if isinstance(content, list):
        texts = [c.get("text") for c in content if isinstance(c, dict)]
        return " ".join(t for t in texts if isinstance(t, str))[:500]
    return ""


def request_secrets(request: Any) -> tuple[str, ...]:
    """The keys an httpx/httpx2 request carries (auth headers, a `?key=`): to mask, never keep."""
    headers = request.headers
    secrets = tuple(
        v.split(" ", 1)[-1] for name in SECRET_HEADERS if (v := headers.get(name)) is not None
    )
    key = request.url.params.get("key")
    return (*secrets, key) if key else secrets


def request_body(request: Any) -> bytes:
    """The body of an httpx/httpx2 request as sent; empty for a streamed one (it cannot be read
    without consuming it)."""
    try:
        content: bytes = request.content
    except Exception:  # httpx's RequestNotRead, httpx2's own
        return b""
    return content


def read_request(request: Any) -> RequestFacts:
    """The facts of an httpx/httpx2 request (read from its bytes; nothing is changed)."""
    url = request.url
    path = url.path
    bare = path.rstrip("/")
    twice = bare.endswith(_NOT_TWICE) or "/uploads/" in bare or "/upload/" in bare
    query = url.query.decode("ascii", "replace") if isinstance(url.query, bytes) else url.query
    route = wire_path(f"{path}?{query}" if query else path, url.host)
    headers = request.headers
    secrets = request_secrets(request)
    raw = headers.get("x-stainless-retry-count")
    retry_count = int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None
    content = request_body(request)
    body = json_or_none(content) if content and route is not None else None
    model, prompt = "", ""
    if isinstance(body, dict):
        model = str(body.get("model") or "")
        prompt = _last_user_text(body)
    model = route.model if route is not None and route.model else model
    reader = reader_of(route, model=model, base_url=f"{url.scheme}://{url.host}", secrets=secrets)
    return RequestFacts(
        provider=reader.name if reader is not None else "http",
        model=model,
        retry_count=retry_count,
        key=(request.method, path, digest(content)),
        prompt=str(redact(prompt, secrets)),
        secrets=secrets,
        reader=reader,
        idempotent=not (request.method.upper() == "POST" and twice),
    )


def decoded(raw: bytes, coding: str) -> bytes:
    """A body as its `content-encoding` says it was sent: gzip or deflate decompressed, else
    (or when it does not decompress) the bytes as they are."""
    coding = coding.strip().lower()
    if coding in ("gzip", "deflate") and raw:
        try:
            return zlib.decompress(raw, 47 if coding == "gzip" else 15)
        except zlib.error:
            try:
                return zlib.decompress(raw, -15)  # a raw deflate stream
            except zlib.error:
                return raw
    return raw


def transport_failure(
    exc: BaseException, facts: RequestFacts, *, after_response: bool
) -> BaseException:
    """An exception of the transport (httpx or httpx2, by name) read as nbagent's typed error."""
    import asyncio

    if isinstance(exc, NbAgentError):
        return exc
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
        return Aborted("the call was cancelled")
    detail = str(redact(f"{type(exc).__name__}: {exc}".rstrip(": "), facts.secrets))
    if after_response and not type(exc).__name__.endswith("Timeout"):
        return StreamInterrupted(f"the stream broke off ({detail})", provider=facts.provider)
    return TransportError(detail, provider=facts.provider)


class ReplyReader:
    """Reads a reply's body as it passes (see the module docstring); `ending()` at the end."""

    def __init__(self, facts: RequestFacts, status: int, headers: Any) -> None:
        self.facts = facts
        self.status = status
        self.headers = headers
        ctype = headers.get("content-type", "")
        self.sse = 200 <= status < 300 and "event-stream" in ctype
        reader = facts.reader
        self._markers = reader.stream_markers if reader is not None else ()
        self._texts = tuple(m.decode() for m in self._markers)
        self._body: list[bytes] = []
        self._size = 0
        self._tail = b""
        self._events: WholeEvents = []  # the events that matter: (event name, decoded data)

    def feed(self, data: bytes) -> None:
        if not self.sse:
            cap = MAX_ERROR_BODY if self.status >= 300 else MAX_JSON_BODY
            if self._size < cap:
                self._body.append(data)
                self._size += len(data)
            return
        buf = self._tail + data if self._tail else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = buf.rfind(b"\n\n")
        if cut < 0:
            self._tail = buf if len(buf) <= MAX_PENDING_EVENT else b""
            return
        head, self._tail = buf[: cut + 2], buf[cut + 2 :]
        if any(m in head for m in self._markers):
            self._scan(SSEParser().feed(head, final=True))

    def _scan(self, events: list[ServerSentEvent]) -> None:
        for ev in events:
            if ev.data.strip() == "[DONE]":
                self._events.append((ev.event, "[DONE]"))
                continue
            if not any(m in ev.data or m == ev.event for m in self._texts):
                continue
            try:
                data = json.loads(ev.data)
            except ValueError:
                continue
            if isinstance(data, dict):
                self._events.append((ev.event, data))

    # -- the end --------------------------------------------------------------------------

    def _read(self, es: WholeBody, rid: str | None) -> Ending:
        """The ending the provider's reader reads from `es`."""
        assert self.facts.reader is not None
        try:
            return Ending(request_id=rid, completed=replay(self.facts.reader, es))
        except NbAgentError as err:
            return Ending(error=err, request_id=rid)

    def _replayed(self, rid: str | None) -> WholeBody:
        return WholeBody(
            self._events,
            provider=self.facts.provider,
            request_id=rid,
            headers=self.headers,
            status_code=self.status,
            live=True,
        )

    def early_error(self) -> BaseException | None:
        """An error event among the events read so far (a stream that failed at its start)."""
        if not self._events or self.facts.reader is None:
            return None
        es = self._replayed(None)
        err = self._read(es, None).error
        return None if err is None or any(err is e for e in es.made) else err

    def _whole_body(self) -> bytes:
        """The body as read, decoded (what the transport passes on is the bytes off the wire;
        the client decodes them)."""
        return decoded(b"".join(self._body), self.headers.get("content-encoding", ""))

    def ending(self) -> Ending:
        """How the attempt ended, the body having been read to its end."""
        f = self.facts
        rid = request_id_from(self.headers, None, f.secrets)
        if not 200 <= self.status < 300:
            err = self._error(self._whole_body())
            return Ending(error=err, request_id=err.request_id or rid)
        if f.reader is None:
            return Ending(request_id=rid)
        if self.sse:
            return self._read(self._replayed(rid), rid)
        if self._size >= MAX_JSON_BODY:
            return Ending(request_id=rid)
        try:
            body = json.loads(self._whole_body())
        except ValueError:
            return Ending(InvalidResponse("the reply is not JSON", provider=f.provider), rid)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return Ending(error=self._error(body), request_id=rid)
        try:
            es = whole_body(f.reader, body, request_id=rid, status_code=self.status)
        except InvalidResponse as err:
            return Ending(error=err, request_id=rid)
        return self._read(es, rid)

    def _error(self, body: bytes | dict[str, Any]) -> ProviderError:
        """The provider's error for this answer, read from its status, body and headers."""
        f = self.facts
        return error_from_response(
            f.provider, self.status, body, self.headers, secrets=f.secrets, model=f.model or None
        )
