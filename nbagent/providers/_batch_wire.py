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

The calls go through the provider's one request path (`HTTPProvider.request`, `read_json`):
its key, client, deadline, recorder and caps, and a non-2xx answer is the same typed error a
live request would get, so a 429 on a create or a poll is retried by the attempt loop like any
other.

Providers know wire formats, not policy: nothing here retries, waits or decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ProviderError

Phase = Literal["running", "canceling", "ended"]
ItemKind = Literal["succeeded", "errored", "expired", "canceled"]
Ending = Literal["expired", "canceled"]
"""Why an ended batch left items unrun, as its provider's status word says (its table reads it)."""
COUNT_NAMES: tuple[str, ...] = ("processing", "succeeded", "errored", "expired", "canceled")
"""The provider's counts under nbagent's names (Anthropic's own; OpenAI and Gemini mapped)."""


def counts_of(succeeded: int, errored: int, rest: int, ending: Ending | None) -> dict[str, int]:
    """Counts under `COUNT_NAMES` of a batch that counts what succeeded, what errored and the
    rest: still processing, or expired or canceled as the batch's `ending` says."""
    counts = {**dict.fromkeys(COUNT_NAMES, 0), "succeeded": succeeded, "errored": errored}
    counts[ending or "processing"] = rest
    return counts


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
    its items then all `errored` with it; `ending` whether the whole batch expired or was
    canceled, when its status word says so (None: its counts and its items' lines say it);
    `tag` the nbagent tag the batch carries (metadata or display name), where the provider
    keeps one; `retry_after` a wait the server asked for on this poll; `doc` the provider's
    document (where its results are).
    """

    id: str
    phase: Phase
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float | None = None
    tag: str | None = None
    failure: str | None = None
    ending: Ending | None = None
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
