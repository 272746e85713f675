"""What one watched exchange says: the wire format, the model, and how the attempt ended.

The request shows the format (by its path), the model and the SDK's retry count; the answer is
read with nbagent's own readers (`providers._http_errors` for statuses, bodies and mid-stream
error events; `_server_wish` for Retry-After; `_pricing` for the cost), so a watched 429 is
classified exactly as the agent would classify it.

A streamed reply is scanned, not parsed: each chunk's complete events are looked at only when
they hold one of the few markers that matter (usage, the stop reason, an error, the terminating
event), with a bytes search per chunk. That keeps watching cheap on a 20,000-delta stream.
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
from ..providers._error_text import request_id_from
from ..providers._http_errors import error_from_payload, error_from_response, redact
from ..providers._sse import ServerSentEvent, SSEParser
from ..recording._format import digest

__all__ = [
    "Ending",
    "ReplyReader",
    "RequestFacts",
    "read_request",
    "request_secrets",
    "transport_failure",
]

MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 8 * 1024 * 1024
MAX_PENDING_EVENT = 8 * 1024 * 1024

# The headers that carry credentials: never kept, their values redacted from every text.
SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization")

_MARKERS: dict[str, tuple[bytes, ...]] = {
    "anthropic": (b"message_start", b"message_delta", b"message_stop", b"error"),
    "openai": (
        b"[DONE]",
        b'"finish_reason":"',
        b'"finish_reason": "',
        b'"usage":{',
        b'"usage": {',
        b'"error"',
    ),
    "openai-responses": (
        b"response.completed",
        b"response.failed",
        b"response.incomplete",
        b"error",
    ),
    "gemini": (b"finishReason", b"usageMetadata", b'"error"'),
}


@dataclass(frozen=True)
class RequestFacts:
    """What the request shows. `secrets` are the credential values it carries, kept only to
    redact them from what the answer says (never shown, never in a repr)."""

    provider: str
    model: str
    stream: bool
    retry_count: int | None
    key: tuple[str, str, str]  # method, path, the body's digest: the same request sent again
    prompt: str
    secrets: tuple[str, ...]

    def __repr__(self) -> str:
        return f"RequestFacts(provider={self.provider!r}, model={self.model!r})"


@dataclass
class Ending:
    """How an attempt ended: `error` None for a success, with what the reply said."""

    error: BaseException | None = None
    request_id: str | None = None
    response_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    stop_reason: str | None = None


def _provider_of(path: str, host: str) -> str:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "azure" if "openai.azure.com" in host else "openai"
    if path.endswith("/responses"):
        return "azure-responses" if "openai.azure.com" in host else "openai-responses"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return "http"


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


def read_request(request: Any) -> RequestFacts:
    """The facts of an httpx/httpx2 request (read from its bytes; nothing is changed)."""
    url = request.url
    path = url.path
    provider = _provider_of(path, url.host)
    headers = request.headers
    secrets = request_secrets(request)
    raw = headers.get("x-stainless-retry-count")
    retry_count = int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None
    try:
        content = request.content
    except Exception:  # a streamed request body: nothing to read without consuming it
        content = b""
    body: Any = None
    if content and provider != "http":
        try:
            body = json.loads(content)
        except ValueError:
            body = None
    model, stream, prompt = "", False, ""
    if isinstance(body, dict):
        model = str(body.get("model") or "")
        stream = bool(body.get("stream"))
        prompt = _last_user_text(body)
    if provider == "gemini":
        model = path.rsplit("/", 1)[-1].split(":", 1)[0]
        stream = ":streamGenerateContent" in path
    return RequestFacts(
        provider=provider,
        model=model,
        stream=stream,
        retry_count=retry_count,
        key=(request.method, path, digest(content)),
        prompt=str(redact(prompt, secrets)),
        secrets=secrets,
    )


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
        self._markers = _MARKERS.get(facts.provider, ())
        self._body: list[bytes] = []
        self._size = 0
        self._tail = b""
        self._events: list[tuple[str, Any]] = []  # (event name, decoded data) that matter
        self._done = False

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
        for m in self._markers:
            if m in head:
                self._scan(SSEParser().feed(head, final=True))
                return

    def _scan(self, events: list[ServerSentEvent]) -> None:
        for ev in events:
            if ev.data.strip() == "[DONE]":
                self._done = True
                continue
            if not any(m.decode() in ev.data or m.decode() == ev.event for m in self._markers):
                continue
            try:
                self._events.append((ev.event, json.loads(ev.data)))
            except ValueError:
                continue

    # -- the end --------------------------------------------------------------------------

    def early_error(self) -> BaseException | None:
        """An error event among the events read so far (a stream that failed at its start)."""
        if not self._events:
            return None
        end = Ending()
        for name, data in self._events:
            self._read_event(name, data, end)
            if end.error is not None:
                return end.error
        return None

    def _whole_body(self) -> bytes:
        """The body as read, decompressed when the server sent it gzip- or deflate-encoded
        (what the transport passes on is the bytes off the wire; the client decodes them)."""
        raw = b"".join(self._body)
        coding = self.headers.get("content-encoding", "").strip().lower()
        if coding in ("gzip", "deflate") and raw:
            try:
                return zlib.decompress(raw, 47 if coding == "gzip" else 15)
            except zlib.error:
                try:
                    return zlib.decompress(raw, -15)  # a raw deflate stream
                except zlib.error:
                    return raw
        return raw

    def ending(self) -> Ending:
        """How the attempt ended, the body having been read to its end."""
        f = self.facts
        rid = request_id_from(self.headers, None, f.secrets)
        if self.status >= 300 or (not self.sse and not (200 <= self.status < 300)):
            err = self._error(self._whole_body())
            return Ending(error=err, request_id=err.request_id or rid)
        if not self.sse:
            return self._json_ending(rid)
        end = Ending(request_id=rid)
        for name, data in self._events:
            self._read_event(name, data, end)
            if end.error is not None:
                return end
        if not self._done and f.provider != "http":
            end.error = StreamInterrupted(
                "the stream ended without its terminating event",
                provider=f.provider,
                request_id=rid,
            )
        return end

    def _error(self, body: bytes | dict[str, Any]) -> ProviderError:
        """The provider's error for this answer, read from its status, body and headers."""
        f = self.facts
        return error_from_response(
            f.provider, self.status, body, self.headers, secrets=f.secrets, model=f.model or None
        )

    def _json_ending(self, rid: str | None) -> Ending:
        f = self.facts
        raw = self._whole_body()
        end = Ending(request_id=rid)
        if f.provider == "http" or self._size >= MAX_JSON_BODY:
            return end
        try:
            body = json.loads(raw)
        except ValueError:
            end.error = InvalidResponse("the reply is not JSON", provider=f.provider)
            return end
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            end.error = self._error(body)
            return end
        if isinstance(body, dict):
            _usage(f.provider, body, end)
        return end

    def _read_event(self, name: str, data: Any, end: Ending) -> None:
        f = self.facts
        if not isinstance(data, dict):
            return
        kind = data.get("type", name)
        if f.provider == "anthropic":
            if kind == "error" or name == "error":
                end.error = error_from_payload(f.provider, data, self.headers, secrets=f.secrets)
            elif kind == "message_start" and isinstance(data.get("message"), dict):
                _usage(f.provider, data["message"], end)
            elif kind == "message_delta":
                _usage(f.provider, data, end)
                delta = data.get("delta")
                if isinstance(delta, dict) and delta.get("stop_reason"):
                    end.stop_reason = str(delta["stop_reason"])
            elif kind == "message_stop":
                self._done = True
            return
        if f.provider in ("openai", "azure"):
            if isinstance(data.get("error"), dict):
                end.error = error_from_payload(f.provider, data, self.headers, secrets=f.secrets)
                return
            _usage(f.provider, data, end)
            return
        if f.provider in ("openai-responses", "azure-responses"):
            if kind in ("error", "response.failed"):
                payload = data.get("response", data) if kind == "response.failed" else data
                end.error = error_from_payload(f.provider, payload, self.headers, secrets=f.secrets)
            elif kind in ("response.completed", "response.incomplete"):
                self._done = True
                if isinstance(data.get("response"), dict):
                    _usage(f.provider, data["response"], end)
            return
        if f.provider == "gemini":
            if isinstance(data.get("error"), dict):
                end.error = error_from_payload(f.provider, data, self.headers, secrets=f.secrets)
                return
            _usage(f.provider, data, end)
            if end.stop_reason:
                self._done = True


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(provider: str, body: dict[str, Any], end: Ending) -> None:
    """Tokens, ids and the stop reason, where a reply (or one of its events) says them."""
    rid = body.get("id") or body.get("responseId")
    if isinstance(rid, str) and rid and end.response_id is None:
        end.response_id = rid
    if provider == "gemini":
        meta = body.get("usageMetadata")
        if isinstance(meta, dict):
            end.input_tokens = _int(meta.get("promptTokenCount"))
            out = _int(meta.get("candidatesTokenCount"))
            thoughts = _int(meta.get("thoughtsTokenCount")) or 0
            end.output_tokens = None if out is None else out + thoughts
            end.cache_read_tokens = _int(meta.get("cachedContentTokenCount"))
        cands = body.get("candidates")
        if isinstance(cands, list) and cands and isinstance(cands[0], dict):
            reason = cands[0].get("finishReason")
            if reason:
                end.stop_reason = str(reason)
        return
    usage = body.get("usage")
    if isinstance(usage, dict):
        if provider == "anthropic":
            for field, name in (
                ("input_tokens", "input_tokens"),
                ("output_tokens", "output_tokens"),
                ("cache_read_tokens", "cache_read_input_tokens"),
                ("cache_write_tokens", "cache_creation_input_tokens"),
            ):
                v = _int(usage.get(name))
                if v is not None:
                    setattr(end, field, v)
        else:
            inp = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
            out = _int(usage.get("completion_tokens", usage.get("output_tokens")))
            end.input_tokens = inp if inp is not None else end.input_tokens
            end.output_tokens = out if out is not None else end.output_tokens
            details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
            if isinstance(details, dict):
                end.cache_read_tokens = _int(details.get("cached_tokens"))
    if provider == "anthropic" and body.get("stop_reason"):
        end.stop_reason = str(body["stop_reason"])
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
        if reason:
            end.stop_reason = str(reason)
    if provider.endswith("responses") and isinstance(body.get("status"), str):
        end.stop_reason = body["status"]
