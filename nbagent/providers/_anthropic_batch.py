"""Anthropic's Message Batches (`/v1/messages/batches`), and the `demo` model's (the mock).

Wire facts (anthropic-sdk-python `resources/messages/batches.py`, `types/messages/`; the API
reference): `POST /v1/messages/batches` with `{"requests": [{"custom_id", "params"}]}` (at most
100,000 requests or 256 MB; `custom_id` `^[a-zA-Z0-9_-]{1,64}$`); `GET .../{id}`; `GET
/v1/messages/batches?limit=` (newest first); `POST .../{id}/cancel`. A batch has
`processing_status` `in_progress`, `canceling` (one l) or `ended`, `request_counts {processing,
succeeded, errored, canceled, expired}`, RFC 3339 `created_at`, and once ended a `results_url`
(an absolute URL, fetched with `Accept: application/binary`) of JSON lines `{custom_id, result}`,
`result.type` `succeeded` (with `message`), `errored` (with `error: {type: "error", error:
{type, message}}`), `canceled` or `expired`, in no particular order.

A batch carries no metadata, so a create whose answer was lost is recognised among the recent
batches by what nbagent knows of it: created after the create call began, with as many
requests, and not one of the batches nbagent already holds.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidResponse, ServerError
from ._batch_client import BatchClient, Items
from ._batch_wire import COUNT_NAMES, BatchCaps, BatchStatus, ItemResult, Phase
from ._error_text import ANTHROPIC_TYPE_STATUS
from ._http import HTTPProvider
from ._parts import json_object, whole_number
from ._server_wish import rfc3339

STATUS: dict[str, Phase] = {"in_progress": "running", "canceling": "canceling", "ended": "ended"}
"""Anthropic's `processing_status` words, as nbagent reads them (one l in `canceling`)."""

CLOCK_SKEW_S = 120.0
"""How much earlier than our clock says a lost create's batch may have been stamped."""


def expired_error(provider: str, why: str) -> ServerError:
    """An item the provider did not get to in time: retryable (a new batch may finish it)."""
    return ServerError(why, provider=provider, code="expired")


class AnthropicBatches(BatchClient):
    """Message Batches against `provider`'s endpoint (the demo's mock server too)."""

    label = "Anthropic Message Batches"
    default_caps = BatchCaps(100_000, 256 * 1024 * 1024)

    def __init__(self, provider: HTTPProvider, **kw: Any) -> None:
        super().__init__(provider, **kw)
        self.url = provider.api_url("messages/batches")

    def item(self, custom_id: str, body: dict[str, Any]) -> bytes:
        return self.provider.encode({"custom_id": custom_id, "params": body})

    def overhead(self, count: int) -> int:
        return len(b'{"requests":[]}') + max(0, count - 1)

    async def create(self, items: Items, *, count: int, size: int, tag: str) -> BatchStatus:
        doc = await self.post_items(
            self.url, items, head=b'{"requests":[', tail=b"]}", count=count, size=size
        )
        return self.status(doc)

    def batch_url(self, batch_id: str) -> str:
        return f"{self.url}/{batch_id}"

    async def recent(self, since: float) -> list[BatchStatus]:
        out = await self.listed(self.url, "after_id", since)
        return [s for s in out if s.created_at is None or s.created_at >= since - CLOCK_SKEW_S]

    async def adopt(
        self, tag: str, *, since: float, count: int, known: frozenset[str]
    ) -> BatchStatus | None:
        candidates = [s for s in await self.recent(since) if s.id not in known and s.total == count]
        # the earliest after the create began: a later one is another create's
        candidates.sort(key=lambda s: s.created_at or 0.0)
        return candidates[0] if candidates else None

    def status(self, doc: dict[str, Any], *, retry_after: float | None = None) -> BatchStatus:
        word = str(doc.get("processing_status") or "")
        counts = json_object(doc, "request_counts")
        return self.made(
            doc,
            doc.get("id"),
            word,
            STATUS.get(word, "running"),
            counts={name: whole_number(counts.get(name)) or 0 for name in COUNT_NAMES},
            created_at=rfc3339(doc.get("created_at")),
            retry_after=retry_after,
        )

    async def results(self, status: BatchStatus) -> AsyncGenerator[ItemResult, None]:
        url = status.doc.get("results_url")
        if not isinstance(url, str) or not url:
            doc, _ = await self.provider.read_json("GET", self.batch_url(status.id))
            url = doc.get("results_url")
        if not isinstance(url, str) or not url:
            raise InvalidResponse(
                f"batch {status.id} ended without a results_url", provider=self.name
            )
        if urlsplit(url).netloc != urlsplit(self.url).netloc:
            raise InvalidResponse(  # the key goes only where the batches are
                f"batch {status.id}'s results_url is on another host ({urlsplit(url).netloc})",
                provider=self.name,
            )
        async for line in self.lines(url, headers={"accept": "application/binary"}):
            yield self._item(line)

    def _item(self, line: dict[str, Any]) -> ItemResult:
        cid = str(line.get("custom_id") or "")
        result = json_object(line, "result")
        kind = result.get("type")
        if kind == "succeeded":
            return ItemResult(cid, "succeeded", body=result.get("message"))
        if kind == "canceled":
            return ItemResult(cid, "canceled")
        if kind == "expired":
            why = "the batch expired (24 h) before this request was processed"
            return ItemResult(cid, "expired", error=expired_error(self.name, why))
        error = result.get("error")
        error = error if isinstance(error, dict) else {"error": {"message": str(result)[:200]}}
        itype = json_object(error, "error").get("type")
        status = ANTHROPIC_TYPE_STATUS.get(str(itype), 500)
        rid = error.get("request_id") if isinstance(error.get("request_id"), str) else None
        err = self.provider.http_error(status, error)
        return ItemResult(cid, "errored", error=err, request_id=rid)
