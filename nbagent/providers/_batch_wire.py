"""What every provider's batch API shares: a batch's status, one item's result, the HTTP calls.

A batch API is four calls and a download: create, retrieve (poll), list, cancel, and the
results as JSON lines. Each wire format's module (`_anthropic_batch`, `_openai_batch`,
`_gemini_batch`) knows its URLs, its field names and its status words, in one table per provider
(Anthropic's `canceling` has one l, OpenAI's `cancelling`/`cancelled` two: each table is tested
against its provider's own spellings), and turns them into the values here:

* `BatchStatus`: the batch as nbagent reads it (`phase` running | canceling | ended, the
  provider's own word in `status`, the provider's counts under nbagent's five names);
* `ItemResult`: one line of the results (`succeeded` with the answer's body, `errored` with
  the typed error its body classifies as, `expired`, `canceled`), keyed by `custom_id`.

`BatchHTTP` makes the calls with the provider's key, client, timeouts and size caps: a non-2xx
answer is the same typed error a live request would get (`error_from_response`), so a 429 on a
create or a poll is retried by the attempt loop like any other; results are streamed and split
into lines as they arrive, never read whole.

Providers know wire formats, not policy: nothing here retries, waits or decides.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import httpx

from ..errors import InvalidResponse, ProviderError, StreamInterrupted
from ._http import USER_AGENT
from ._http_errors import redact, request_id_from
from ._limits import guarded_chunks, read_body, transport_error
from ._server_wish import server_wish

if TYPE_CHECKING:
    from ._http import HTTPProvider

__all__ = [
    "COUNT_NAMES",
    "BatchCaps",
    "BatchHTTP",
    "BatchStatus",
    "Body",
    "ItemKind",
    "ItemResult",
    "Phase",
    "joined",
    "rfc3339",
]

Phase = Literal["running", "canceling", "ended"]
ItemKind = Literal["succeeded", "errored", "expired", "canceled"]
COUNT_NAMES: tuple[str, ...] = ("processing", "succeeded", "errored", "expired", "canceled")
"""The provider's counts under nbagent's names (Anthropic's own; OpenAI and Gemini mapped)."""

Body = Callable[[], AsyncIterator[bytes]]
"""A request body that can be sent again (each attempt of a create calls it anew)."""


@dataclass(frozen=True)
class BatchCaps:
    """How large one batch may be: requests and bytes of the create payload."""

    max_requests: int
    max_bytes: int


@dataclass(frozen=True)
class BatchStatus:
    """A batch as the provider last described it.

    `phase` is nbagent's reading of `status` (the provider's own word); `counts` the provider's
    counts under `COUNT_NAMES`; `failure` why a batch failed as a whole (OpenAI's `errors`), with
    its items then all `errored` with it; `tag` the nbagent tag the batch carries (metadata or
    display name), where the provider keeps one; `retry_after` a wait the server asked for on
    this poll; `doc` the provider's document (where its results are).
    """

    id: str
    phase: Phase
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float | None = None
    tag: str | None = None
    failure: str | None = None
    retry_after: float | None = None
    doc: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def total(self) -> int:
        return sum(self.counts.get(name, 0) for name in COUNT_NAMES)


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome, by its `custom_id`: `body` the answer (succeeded), `error` the typed
    error its error body is (errored; also the reason of an expired or canceled item)."""

    custom_id: str
    kind: ItemKind
    body: Any = None
    error: ProviderError | None = None
    request_id: str | None = None


def rfc3339(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (`2024-09-24T18:37:24.100435Z`), or None."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    if "." in text:  # Python before 3.11 takes a fraction of exactly 3 or 6 digits
        head, _, rest = text.partition(".")
        n = len(rest) - len(rest.lstrip("0123456789"))  # the fraction's digits, not the offset's
        text = f"{head}.{rest[:n][:6].ljust(6, '0')}{rest[n:]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class BatchHTTP:
    """The HTTP calls of a batch API, with `provider`'s key, client, timeouts and caps."""

    def __init__(self, provider: HTTPProvider, *, accept: str = "application/json") -> None:
        self.provider = provider
        self.accept = accept

    @property
    def name(self) -> str:
        return self.provider.name

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        out = {"user-agent": USER_AGENT}
        out.update(self.provider._headers())
        out["accept"] = self.accept
        out.update(self.provider._extra_headers)
        out.update(extra or {})
        return out

    def error(
        self, status: int, raw: bytes | Any, headers: Mapping[str, str] | None = None
    ) -> ProviderError:
        """The typed error of an answer with this status and body (as a live request's)."""
        return self.provider._http_error(status, raw, headers or {})

    @contextlib.asynccontextmanager
    async def _send(
        self,
        method: str,
        url: str,
        *,
        content: bytes | Body | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        p = self.provider
        body: Any = content() if callable(content) else content
        request = p._http().build_request(
            method,
            url,
            content=body,
            headers=self.headers(headers),
            params={k: v for k, v in (params or {}).items() if v is not None} or None,
            timeout=p.limits.httpx_timeout(),
        )
        try:
            response = await p._http().send(request, stream=True)
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            err = transport_error(
                exc, provider=p.name, limits=p.limits, after_response=False, secrets=p._secrets
            )
            raise err from None
        try:
            if not 200 <= response.status_code < 300:
                raw = await read_body(
                    response, provider=p.name, limits=p.limits, secrets=p._secrets
                )
                raise self.error(response.status_code, raw, response.headers)
            yield response
        finally:
            await response.aclose()

    async def call(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        content: bytes | Body | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        max_bytes: int | None = None,
    ) -> tuple[dict[str, Any], float | None]:
        """One call whose answer is a JSON object: (the object, the server's wait wish).
        `max_bytes`: a larger cap than the provider's `max_body_bytes` for this answer."""
        extra = dict(headers or {})
        if json_body is not None:
            content = self.provider._encode(json_body)
            extra.setdefault("content-type", "application/json")
        p = self.provider
        limits = p.limits if max_bytes is None else replace(p.limits, max_body_bytes=max_bytes)
        async with self._send(method, url, content=content, headers=extra, params=params) as r:
            raw = await read_body(r, provider=p.name, limits=limits, secrets=p._secrets)
            try:
                doc = json.loads(raw.decode("utf-8", errors="replace")) if raw.strip() else {}
            except (ValueError, RecursionError):
                doc = None
            if not isinstance(doc, dict):
                raise p._invalid_body(r, raw, "a batch API answer that is not a JSON object")
            if 200 <= r.status_code < 300 and doc.get("error") and r.status_code != 204:
                raise self.error(r.status_code, raw, r.headers)
            return doc, server_wish(r.headers)

    async def lines(
        self, url: str, *, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The JSON objects of a JSON-lines download, one per line as the bytes arrive.

        A line longer than the provider's `max_body_bytes` is `InvalidResponse`; a download
        that breaks off is `StreamInterrupted` (the caller reads it again: results are keyed,
        so a line read twice counts once)."""
        p = self.provider
        cap = p.limits.max_body_bytes
        async with self._send("GET", url, headers=headers) as r:
            rid = request_id_from(r.headers, secrets=p._secrets)
            pending = b""
            chunks = guarded_chunks(
                r,
                provider=p.name,
                limits=p.limits,
                secrets=p._secrets,
                request_id=rid,
                broke_off="the results download",
            )
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    pending += chunk
                    if b"\n" not in chunk:
                        if len(pending) > cap:
                            raise self._line_too_long(cap, rid)
                        continue
                    *whole, pending = pending.split(b"\n")
                    for line in whole:
                        if line.strip():
                            yield self._line(line, rid)
            if pending.strip():
                yield self._line(pending, rid)

    def _line(self, line: bytes, rid: str | None) -> dict[str, Any]:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict):
            snippet = redact(line[:200].decode("utf-8", errors="replace"), self.provider._secrets)
            raise StreamInterrupted(
                f"a results line that is not a JSON object: {snippet!r}",
                provider=self.name,
                request_id=rid,
            )
        return doc

    def _line_too_long(self, cap: int, rid: str | None) -> InvalidResponse:
        return InvalidResponse(
            f"one results line is larger than the {cap}-byte cap (max_body_bytes)",
            provider=self.name,
            request_id=rid,
        )


async def joined(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    """Bytes as an async body (httpx streams it; `content-length` says how long it is)."""
    for part in parts:
        yield part
