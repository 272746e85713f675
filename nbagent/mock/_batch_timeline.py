"""One provider batch on the mock server: its items, kept compactly, and its timeline.

A batch's state is a function of the batch clock alone: created at ``created``, its items end
one by one in a shuffled order between a tenth and nine tenths of its duration, and it ends at
its duration, at its expiry, or a tenth of the duration after a cancel, whichever comes first.
So any reading of the clock (a retrieve, a results download, a test's assertion) sees the same
batch, and a test that moves the clock sees it progress without anything running behind it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import random
import secrets
import string
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from functools import cached_property
from typing import Any, Literal

from ._codec import Route
from ._faults import Fault

Provider = Literal["anthropic", "openai", "azure", "gemini"]
"""Which API a batch was created through (Azure is OpenAI's Batch API under ``/openai/``)."""
ItemStatus = Literal["processing", "succeeded", "errored", "expired", "canceled"]
"""Where one item of a batch stands, in Anthropic's words (OpenAI and Gemini have no per-item
status on the wire; these are what their lines and responses say)."""
EVERY: tuple[ItemStatus, ...] = ("processing", "succeeded", "errored", "expired", "canceled")
Phase = Literal[
    "validating",
    "in_progress",
    "finalizing",
    "canceling",
    "completed",
    "expired",
    "canceled",
    "failed",
]
"""Where a batch stands, in neutral words each provider module translates."""

LEAD = 0.1  # the share of the duration before the first item ends (validating / pending)
SPAN = 0.8  # the share over which the items end
CANCEL_SETTLE = 0.1  # the share of the duration a cancel takes to settle
ALNUM = string.ascii_letters + string.digits


def new_id(prefix: str, length: int, alphabet: str = ALNUM) -> str:
    """A random id in a provider's style (``msgbatch_01...``, ``batch_...``, ``file-...``)."""
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


def stable_id(seed: str, index: int, length: int = 24) -> str:
    """An id that is the same each time an item's answer is made (downloads repeat)."""
    return hashlib.blake2b(f"{seed}/{index}".encode(), digest_size=16).hexdigest()[:length]


@dataclass(frozen=True)
class ItemOutcome:
    """What an item will be once it ends, decided when the batch is created.

    ``kind``: ``ok`` (answered by the responder; ``fault`` may be ``empty``), ``fault`` (an
    error from the fault script, ``tokens`` the prompt's estimate as a live request's error
    says it), ``invalid`` (the wire format refused the request: ``message``/``param``) or
    ``overflow`` (``tokens`` over the context window ``maximum``).
    """

    kind: Literal["ok", "fault", "invalid", "overflow"]
    fault: Fault = field(default_factory=Fault)
    message: str = ""
    param: str | None = None
    tokens: int = 0
    maximum: int = 0

    @property
    def errored(self) -> bool:
        return self.kind != "ok"


OK_OUTCOME = ItemOutcome("ok")
FAILED_OUTCOME = ItemOutcome("fault", Fault("500"))  # an item of a batch that failed


@dataclass
class Items:
    """The items of one batch, compactly: one JSON line each in a shared buffer (an uploaded
    file's own bytes, or the lines joined), one from each start to the next (the last to the
    end), an id, an outcome. 100,000 items cost their request bytes plus a few dozen bytes each."""

    buffer: bytes = field(default=b"", repr=False)
    starts: InitVar[Sequence[int]] = ()
    ids: list[str | None] = field(default_factory=list)
    outcomes: list[ItemOutcome] = field(default_factory=list)

    def __post_init__(self, starts: Sequence[int]) -> None:
        self._offsets = array("Q", [*starts, len(self.buffer)])

    def __len__(self) -> int:
        return len(self.ids)

    def line(self, index: int) -> bytes:
        return bytes(self.buffer[self._offsets[index] : self._offsets[index + 1]])


@dataclass(frozen=True)
class Snapshot:
    """A batch at one reading of the clock: its phase and how many items (in finish order)
    have ended with their own outcome."""

    phase: Phase
    finished: int
    now: float
    ended_at: float | None
    in_progress_at: float | None  # when validation ended, if it has
    finalizing_at: float | None  # when the last item ended, if it has


@dataclass(eq=False)
class Batch:
    """One batch in the store: its items speak ``route``'s wire format (and model). Provider
    modules keep their own fields in ``extra``; the store gives a ``seed`` (and the batch's
    ``ordinal``) that makes its order the same every run.

    ``failed``: the errors it fails its validation with (none: it runs); ``keeps_partial``:
    whether an expired or canceled batch keeps the answers it has (Gemini's: none);
    ``request_key``: where an item's stored line holds its request (None: it is the request).
    """

    id: str
    provider: Provider
    items: Items
    _: KW_ONLY
    route: Route
    created: float
    duration: float
    expire_after: float | None
    seed: InitVar[int | None]
    ordinal: InitVar[int] = 0
    extra: dict[str, Any] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)
    keeps_partial: bool = True
    request_key: str | None = None
    cancel_at: float | None = None
    deleted: bool = False

    def __post_init__(self, seed: int | None, ordinal: int) -> None:
        n = len(self.items)
        order = list(range(n))
        # seeded, the n-th batch of a server ends its items in the same order every run (its id
        # is random, as the providers' are); unseeded, each batch differs
        random.Random(f"{seed}/{ordinal}" if seed is not None else self.id).shuffle(order)
        if n > 1 and order == sorted(order):  # results are never in request order
            order[0], order[1] = order[1], order[0]
        self.order = array("I", order)  # rank -> index: the order items end in
        self._rank = array("I", sorted(range(n), key=order.__getitem__))  # index -> rank
        outcomes = self.items.outcomes
        self._errored_ranks = [rank for rank, i in enumerate(order) if outcomes[i].errored]

    def __len__(self) -> int:
        return len(self.items)

    # --- time -----------------------------------------------------------------------------------

    def _finished_by(self, t: float) -> int:
        n = len(self.items)
        if self.duration <= 0:
            return n
        done = (t - self.created - LEAD * self.duration) * n / (SPAN * self.duration)
        return max(0, min(n, math.floor(done + 1e-9)))

    def _end(self) -> tuple[float, Phase]:
        ends: list[tuple[float, int, Phase]] = [(self.created + self.duration, 0, "completed")]
        if self.expire_after is not None and self.expire_after < self.duration:
            ends.append((self.created + self.expire_after, 1, "expired"))
        if self.cancel_at is not None:
            ends.append((self.cancel_at + CANCEL_SETTLE * self.duration, 2, "canceled"))
        at, _, phase = min(ends)
        return at, phase

    def snapshot(self, now: float) -> Snapshot:
        n = len(self.items)
        lead_end = self.created + LEAD * self.duration
        if self.failed:  # it fails its validation
            if now >= lead_end:
                return Snapshot("failed", 0, now, lead_end, None, None)
            return Snapshot("validating", 0, now, None, None, None)
        end_at, end_phase = self._end()
        last_at = self.created + (LEAD + SPAN) * self.duration
        t = min(now, end_at)  # the batch's own clock stops when it ends
        started = lead_end if t >= lead_end else None
        final = last_at if t >= last_at else None
        if now >= end_at:
            # a batch that completes has finished every item by its end
            kept = end_phase == "completed" or self.keeps_partial
            finished = self._finished_by(end_at) if kept else 0
            return Snapshot(end_phase, finished, now, end_at, started, final)
        finished = self._finished_by(now)
        phase: Phase = "in_progress"
        if self.cancel_at is not None and now >= self.cancel_at:
            phase = "canceling"
        elif started is None:
            phase = "validating"
        elif finished >= n:
            phase = "finalizing"
        return Snapshot(phase, finished, now, None, started, final)

    # --- items ----------------------------------------------------------------------------------

    def unfinished(self, snap: Snapshot) -> ItemStatus:
        """The status at ``snap`` of an item that has not ended with its own outcome."""
        if snap.ended_at is None:
            return "processing"
        return "canceled" if snap.phase == "canceled" else "expired"

    def request(self, index: int, line: Any = None) -> Any:
        """Item ``index``'s request as the batch received it (where its stored line holds it:
        Anthropic's ``params`` are the line, OpenAI's is its ``body``, Gemini's its
        ``request``); ``line``: the stored line, when the caller has read it already."""
        line = json.loads(self.items.line(index)) if line is None else line
        return line.get(self.request_key) if self.request_key else line

    def status(self, index: int, snap: Snapshot) -> ItemStatus:
        """Item ``index``'s status at ``snap`` (every item of a batch that failed errored)."""
        if snap.phase == "failed":
            return "errored"
        if self._rank[index] < snap.finished:
            return "errored" if self.items.outcomes[index].errored else "succeeded"
        return self.unfinished(snap)

    def counts(self, snap: Snapshot) -> dict[ItemStatus, int]:
        counts: dict[ItemStatus, int] = dict.fromkeys(EVERY, 0)
        if snap.phase == "failed":
            counts["errored"] = len(self.items)
            return counts
        errored = bisect.bisect_left(self._errored_ranks, snap.finished)  # errored among them
        counts["succeeded"], counts["errored"] = snap.finished - errored, errored
        counts[self.unfinished(snap)] += len(self.items) - snap.finished
        return counts

    def lines(
        self,
        snap: Snapshot,
        ended: Callable[[int], bytes | None],
        rest: Callable[[int], bytes] | None = None,
    ) -> Iterator[bytes]:
        """A results file: the line ``ended`` writes for each item that ended with its own
        outcome (None: none), in the order they ended; then, with ``rest``, one for each other
        item."""
        for rank in range(snap.finished):
            line = ended(int(self.order[rank]))
            if line is not None:
                yield line
        if rest is not None:
            for rank in range(snap.finished, len(self.order)):
                yield rest(int(self.order[rank]))


FILE_DAYS_S = 30 * 86_400


@dataclass
class StoredFile:
    """One file: uploaded (``data``) or made by a batch (``lines`` writes it when read)."""

    provider: Provider
    filename: str
    purpose: str
    created_at: int
    data: bytes | None = None
    lines: Callable[[], Iterator[bytes]] | None = None
    count: int = 0  # how many lines ``lines`` writes
    id: str = field(default_factory=lambda: new_id("file-", 22))

    def content(self) -> Iterator[bytes]:
        if self.data is not None:
            yield self.data
        elif self.lines is not None:
            yield from self.lines()

    @cached_property
    def bytes(self) -> int:
        """Its size (a batch's file is written once to count it)."""
        return sum(len(piece) for piece in self.content())

    def json(self) -> dict[str, Any]:
        expires = self.created_at + FILE_DAYS_S if self.purpose.startswith("batch") else None
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": self.created_at,
            "expires_at": expires,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }
