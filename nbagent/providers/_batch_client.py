"""One provider's batch API, as the batch backend uses it: the seam between nbagent's batch
runner and a wire format's batch endpoints.

`BatchClient` is what each format's module fills in (`AnthropicBatches`, `OpenAIBatches` and
`AzureBatches`, `GeminiBatches`): how one request becomes an item of the create payload, the
create / retrieve / list / cancel calls, and the results as `ItemResult`s. What it shares is
here: the item's request body is the live request's (`build_body` without the stream switch),
and a succeeded item's answer is read by the live stream's reader (`_whole_body.whole_body` and
`replay`) and priced at the batch price. `_models.batch_client(provider)` finds the client of
a provider.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from .._core._messages import Message, TextBlock
from ..errors import InvalidResponse, ProviderError, ServerError, StreamInterrupted
from ._base import Completed, ModelRequest, OutputFormat, ToolSpec
from ._batch_wire import BatchCaps, BatchStatus, ItemResult, Phase
from ._error_text import redact, request_id_from
from ._http import HTTPProvider
from ._limits import guarded_chunks, too_large
from ._parts import json_or_none
from ._whole_body import replay, whole_body

Items = Callable[[], Iterable[bytes]]
"""The encoded items of one batch, in order; called again for each attempt of a create."""

_STREAM_KEYS = ("stream", "stream_options")


class BatchClient:
    """A provider's batch API. Subclasses set `label` and `default_caps`, and implement
    the calls; an item's answer is read by the provider's own reader."""

    label: ClassVar[str] = ""
    default_caps: ClassVar[BatchCaps] = BatchCaps(1, 1)

    def __init__(self, provider: HTTPProvider, *, caps: BatchCaps | None = None) -> None:
        self.provider = provider
        self.caps = caps or self.default_caps

    @property
    def name(self) -> str:
        return self.provider.name

    # -- items ----------------------------------------------------------------------------

    def request(
        self,
        prompt: str,
        *,
        system: str | None,
        max_tokens: int,
        options: dict[str, Any],
        tools: tuple[ToolSpec, ...] = (),
        output: OutputFormat | None = None,
        after: Sequence[Message] = (),
    ) -> ModelRequest:
        """The request of one prompt: one user message (then `after`: a structured answer's
        reask), `tools` and `output` as a structured answer asks; no prompt-cache marks (a
        cache write costs more than the prompt it would save, for requests answered once
        each)."""
        messages = (Message("user", (TextBlock(prompt),)), *after)
        return ModelRequest(
            messages, system, tools, max_tokens, dict(options), cache=False, output=output
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The live request's body, without the switch that asks for a stream."""
        body: dict[str, Any] = self.provider.build_body(request)
        for key in _STREAM_KEYS:
            body.pop(key, None)
        return body

    def item(self, custom_id: str, body: dict[str, Any]) -> bytes:
        """One item of the create payload, encoded."""
        raise NotImplementedError

    def overhead(self, count: int) -> int:
        """At most how many bytes the create payload holds besides its `count` items (its
        framing and separators), for splitting under the size cap: a JSON frame of at most
        256 bytes (Gemini's, with the tag) and a comma between items, unless a format says
        otherwise."""
        return 256 + count

    # -- calls ----------------------------------------------------------------------------

    async def post_items(
        self,
        url: str,
        items: Items,
        *,
        head: bytes,
        tail: bytes,
        count: int,
        size: int,
        sep: bytes = b",",
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """POST `head`, the `count` items (`size` bytes) joined by `sep`, then `tail`: a create
        payload, streamed as it is made (never held whole), its length said up front."""

        async def parts() -> AsyncIterator[bytes]:
            yield head
            for i, item in enumerate(items()):
                yield sep + item if i else item
            yield tail

        length = len(head) + size + len(sep) * max(0, count - 1) + len(tail)
        headers = {"content-type": content_type, "content-length": str(length)}
        doc, _ = await self.provider.read_json("POST", url, content=parts(), headers=headers)
        return doc

    async def create(self, items: Items, *, count: int, size: int, tag: str) -> BatchStatus:
        """Create a batch of `count` items (`size` bytes of items, framing not counted)
        carrying `tag`."""
        raise NotImplementedError

    def batch_url(self, batch_id: str) -> str:
        """The URL of the batch `batch_id` (its retrieve; its cancel is under it)."""
        raise NotImplementedError

    async def retrieve(self, batch_id: str) -> BatchStatus:
        doc, wish = await self.provider.read_json("GET", self.batch_url(batch_id))
        return self.status(doc, retry_after=wish)

    async def recent(self, since: float) -> list[BatchStatus]:
        """The batches created since `since` (Unix seconds), newest first."""
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> BatchStatus:
        doc, _ = await self.provider.read_json("POST", f"{self.batch_url(batch_id)}/cancel")
        return self.status(doc)

    def status(self, doc: dict[str, Any], *, retry_after: float | None = None) -> BatchStatus:
        """A batch's document as a `BatchStatus` (`made` of what the format's fields say)."""
        raise NotImplementedError

    def made(
        self,
        doc: dict[str, Any],
        batch_id: Any,
        word: str,
        phase: Phase,
        *,
        tag: Any = None,
        **fields: Any,
    ) -> BatchStatus:
        """The `BatchStatus` of `doc`: its id (`InvalidResponse` without one), its status
        `word` and the `phase` the API's status-word table reads in it, its tag where it is a
        string, and the other `fields` as `BatchStatus` takes them."""
        if not isinstance(batch_id, str) or not batch_id:
            snippet = redact(json.dumps(doc)[:200], self.provider._secrets)
            raise InvalidResponse(f"a batch without an id: {snippet}", provider=self.name)
        tag = tag if isinstance(tag, str) else None
        return BatchStatus(batch_id, phase, word or "unknown", tag=tag, doc=doc, **fields)

    def failure_error(self, status: BatchStatus) -> ProviderError:
        """The error every item of a batch that failed as a whole (`status.failure`) gets."""
        return ServerError(status.failure or "the batch failed", provider=self.name)

    async def listed(
        self, url: str, cursor: str, since: float, *, size: str = "limit"
    ) -> list[BatchStatus]:
        """The batches of a paged listing, newest first, page by page (the `size` and `cursor`
        parameters naming a page) until one older than `since` (at most 20 pages of 100)."""
        out: list[BatchStatus] = []
        after: str | None = None
        for _ in range(20):
            params = {size: 100, cursor: after}
            doc, _ = await self.provider.read_json("GET", url, params=params)
            page = [self.status(d) for d in self._page(doc) if isinstance(d, dict)]
            out += page
            after = self._next_page(doc, page)
            oldest = min((s.created_at for s in page if s.created_at), default=None)
            if not page or not after or (oldest is not None and oldest < since):
                break
        return out

    def _page(self, doc: dict[str, Any]) -> Any:
        """The batches of one page of a listing: `data` (Anthropic's and OpenAI's)."""
        return doc.get("data") if isinstance(doc.get("data"), list) else []

    def _next_page(self, doc: dict[str, Any], page: list[BatchStatus]) -> str | None:
        """The cursor of the next page, None after the last (`has_more`, `last_id`)."""
        return str(doc.get("last_id") or page[-1].id) if doc.get("has_more") and page else None

    def results(self, status: BatchStatus) -> AsyncGenerator[ItemResult, None]:
        """The items' results of an ended batch, as they arrive (in any order)."""
        raise NotImplementedError

    async def adopt(
        self, tag: str, *, since: float, count: int, known: frozenset[str]
    ) -> BatchStatus | None:
        """The batch a create whose answer was lost made, if it exists: the recent batch that
        carries `tag` (and is not one of `known`)."""
        for status in await self.recent(since):
            if status.tag == tag and status.id not in known:
                return status
        return None

    # -- answers --------------------------------------------------------------------------

    async def read(self, result: ItemResult) -> Completed:
        """A succeeded item's answer, read as a live answer is, priced at the batch price."""
        es = whole_body(self.provider, result.body, request_id=result.request_id, batch=True)
        return replay(self.provider, es)

    async def lines(
        self, url: str, *, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The JSON objects of a JSON-lines download, one per line as the bytes arrive (never
        read whole).

        A line longer than the provider's `max_body_bytes` is `InvalidResponse`; a download
        that breaks off, or a line that is not an object, is `StreamInterrupted` (the caller
        reads it again: results are keyed, so a line read twice counts once)."""
        p = self.provider
        cap = p.limits.max_body_bytes
        async with p.request("GET", url, headers=headers) as r:
            rid = request_id_from(r.headers, secrets=p._secrets)
            pending = b""
            chunks = guarded_chunks(r, p.sender, request_id=rid, broke_off="the results download")
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    *whole, pending = (pending + chunk).split(b"\n")
                    if len(pending) > cap:
                        raise too_large(p.sender, r, "one results line", cap)
                    for line in (w for w in whole if w.strip()):
                        yield self._line(line, rid)
            if pending.strip():
                yield self._line(pending, rid)

    def _line(self, line: bytes, rid: str | None) -> dict[str, Any]:
        doc = json_or_none(line)
        if not isinstance(doc, dict):
            snippet = redact(line[:200].decode("utf-8", errors="replace"), self.provider._secrets)
            raise StreamInterrupted(
                f"a results line that is not a JSON object: {snippet!r}",
                provider=self.name,
                request_id=rid,
            )
        return doc
