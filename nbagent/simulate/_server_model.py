"""What a server did over time, read from a recording or an attempt frame, as a model that can
answer another policy's attempts in virtual time (`what_if`).

The model, and its limits:

- **Answers by time.** An attempt at time t gets the answer recorded last at or before t
  (sample and hold): a server that was failing at 3.5 s and answering at 7.5 s is taken to fail
  until 7.5 s. After the last recorded answer it keeps giving that answer. What the server
  answered did not depend on what the client sent, so a policy that sends more often meets
  the same failures, not more.
- **Unless the recording shows a rate limit.** When it holds 429s that are a rate limit (not a
  quota), those 429s come from a token bucket instead, fitted to the recording: its capacity
  from the `*-ratelimit-*-limit` headers (or the requests admitted before the first 429), its
  rate from what was admitted and the Retry-Afters the server sent. Then sending more does
  meet more 429s, and a Retry-After says when the next token comes (or, for a server that
  always asked for the same wait, such as Gemini's 58 s, that wait). A fixed per-minute window
  is approximated by the bucket.
- **A quota comes after as many successes as it did.** A quota (a per-day limit, a spend
  cap: `QuotaExceeded`) is taken to count requests, not time: once the new policy's clients
  have had as many successful answers as the recording had before its first quota answer,
  every later attempt gets that answer.
- **The workload is the recorded one.** Attempts that sent the same body (the same digest; in
  a frame, the same run and turn) are retries of one request; the pause before each new
  request (the user, a tool) is kept; a successful answer takes as long as it took.
- Not modelled: a server whose state changed because of the load (other than the bucket),
  answers that depend on the request's content, tokens-per-minute limits, and streaming that
  stalls part way (an attempt takes its recorded time).
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import errors
from .._loop._rate_headers import request_limits
from .._watch._reading import ReplyReader, RequestFacts, decoded
from ..errors import (
    InvalidResponse,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    ServerError,
    StreamInterrupted,
    TransportError,
    error_class,
)
from ..providers._models import reader_of
from ..recording import RecordedExchange, Recording, read_recording
from ..recording._paths import wire_path
from ._backoff import TokenBucket

_TIE = 1e-6  # an attempt this close after a recorded answer meets that answer


@dataclass(frozen=True)
class Answer:
    """One recorded answer: when (seconds from the first request), how long, what it was."""

    at: float
    duration_s: float
    error: ProviderError | None
    request: int  # which logical request it belonged to

    @property
    def rate_limited(self) -> bool:
        return isinstance(self.error, RateLimited) and not isinstance(self.error, QuotaExceeded)


@dataclass(frozen=True)
class Request:
    """One logical request of the recorded workload: the pause before it, how long a success
    took."""

    gap_s: float
    ok_duration_s: float


@dataclass(frozen=True)
class Bucket:
    """The token bucket a recording's 429s were fitted to.

    Attributes:
        capacity: The bucket's size, in requests.
        rate: Its refill, in requests per second.
        sends_retry_after: Whether its 429s carried a Retry-After.
        reject_duration_s: How long a rejection took.
        same_wish_s: The one wait the server always asked for (Gemini's 58 s), or None.
    """

    capacity: float
    rate: float  # tokens per second
    sends_retry_after: bool
    reject_duration_s: float
    same_wish_s: float | None = None  # a server that always asked for this wait (Gemini's 58 s)

    def wish(self, until_token_s: float) -> float | None:
        """The Retry-After a rejected request is given.

        Args:
            until_token_s: Seconds until the bucket holds a token again.

        Returns:
            The Retry-After in seconds (the one wait the server always asked for, when it did),
                or None when it sends none.
        """
        if not self.sends_retry_after:
            return None
        return self.same_wish_s if self.same_wish_s is not None else until_token_s

    def __repr__(self) -> str:
        wish = f", always asks for {self.same_wish_s:g} s" if self.same_wish_s is not None else ""
        return (
            f"Bucket(capacity={self.capacity:g}, rate={self.rate:.4g}/s, "
            f"sends_retry_after={self.sends_retry_after}{wish})"
        )


@dataclass(frozen=True)
class Quota:
    """The first quota answer of a recording, and how many successes came before it."""

    after_successes: int
    answer: Answer


@dataclass
class ServerModel:
    """The server's answers over time, the fitted rate limit (if any) and the workload.

    Attributes:
        answers: What the server answered, in time order.
        requests: The recorded workload: when each request was sent.
        bucket: The fitted rate limit, or None when the recording shows none.
        model: The model the recording asked.
        provider: The provider's name.
        source: Where it was read from (a path, or "attempt frame").
        quota: The first quota answer and the successes before it, or None.
    """

    answers: list[Answer]
    requests: list[Request]
    bucket: Bucket | None
    model: str
    provider: str
    source: str
    quota: Quota | None = None
    _held: list[Answer] = field(default_factory=list, repr=False)
    _times: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        limited = self.bucket is not None
        self._held = [
            a
            for a in self.answers
            if not (limited and a.rate_limited) and not isinstance(a.error, QuotaExceeded)
        ]
        self._times = [a.at for a in self._held]

    def held(self, t: float) -> Answer | None:
        """The time-governed answer at `t` (None: the recording has none; take it as a success).

        Args:
            t: Seconds since the workload started.

        Returns:
            The answer the server gave at that time, or None.
        """
        if not self._held:
            return None
        i = bisect.bisect_right(self._times, t + _TIE) - 1
        return self._held[max(0, i)]


def _error_of(ex: RecordedExchange) -> ProviderError | None:
    """How a recorded answer ended, read as a watched SDK's answer is (`ReplyReader`)."""
    model = ex.model or ""
    reader = reader_of(wire_path(ex.path), model=model, base_url="http://recorded", secrets=())
    provider = reader.name if reader is not None else ""
    if ex.status is None:
        return TransportError(
            f"no answer ({ex.error or 'the connection closed'})", provider=provider
        )
    facts = RequestFacts(provider, model, None, ("", "", ""), "", (), reader)
    # the body is fed decoded (a reader scans a stream's bytes as they come off the wire)
    plain = {k: v for k, v in ex.headers.items() if k.lower() != "content-encoding"}
    answer = ReplyReader(facts, ex.status, plain)
    answer.feed(decoded(ex.body_data, ex.headers.get("content-encoding", "")))
    error = answer.ending().error
    if error is None and (ex.error is not None or not ex.complete):
        return StreamInterrupted("the answer broke off", provider=provider)
    if error is None or isinstance(error, ProviderError):
        return error
    return InvalidResponse(str(error), provider=provider)  # read, but not as an answer


def _from_recording(rec: Recording) -> tuple[list[Answer], list[float], str, str]:
    if not rec.exchanges:
        raise errors.ConfigError(f"the recording {rec.path} holds no requests: nothing to model.")
    t0 = rec.exchanges[0].at
    answers: list[Answer] = []
    limits: list[float] = []
    logical = -1
    previous: tuple[str, bool] | None = None
    for ex in rec.exchanges:
        error = _error_of(ex)
        if previous is None or previous[1] or previous[0] != ex.body_sha256:
            logical += 1
        previous = (ex.body_sha256, error is None)
        answers.append(Answer(ex.at - t0, ex.duration_s, error, logical))
        limit = request_limits(ex.headers).limit
        if limit is not None:
            limits.append(limit)
    first = rec.exchanges[0]
    # the provider whose wire format it speaks, named as the one that reads a watched SDK's is
    reader = reader_of(wire_path(first.path), model="", base_url="http://recorded", secrets=())
    return answers, limits, first.model or "recorded", reader.name if reader is not None else ""


def _row_error(row: Any) -> ProviderError | None:
    if row.outcome == "ok":
        return None
    kind = str(row.error_kind) if isinstance(row.error_kind, str) else "ServerError"
    cls = error_class(kind, ProviderError) or ServerError
    status = None if pd.isna(row.status_code) else int(row.status_code)
    wish = None if pd.isna(row.retry_after_s) else float(row.retry_after_s)
    message = row.message if isinstance(row.message, str) else kind
    error: ProviderError = cls(message, status_code=status, retry_after=wish)
    return error


def _from_frame(df: pd.DataFrame) -> tuple[list[Answer], list[float], str, str]:
    rows = df[df["phase"] == "request"].sort_values("started_at", kind="stable")
    if rows.empty:
        raise errors.ConfigError("the attempt frame holds no request attempts: nothing to model.")
    t0 = float(rows["started_at"].min())
    answers: list[Answer] = []
    logical = -1
    last: tuple[Any, Any] | None = None
    for row in rows.itertuples(index=False):
        key = (row.run_id, row.turn)
        if last != key or int(row.attempt) == 1:
            logical += 1
        last = key
        duration = row.duration_s if not pd.isna(row.duration_s) else 0.0
        answers.append(
            Answer(float(row.started_at) - t0, float(duration), _row_error(row), logical)
        )
    model = str(rows["model"].iloc[0]) if "model" in rows else "recorded"
    return answers, [], model, ""


def by_request(answers: list[Answer]) -> list[list[Answer]]:
    """The answers of each logical request, the requests in order."""
    groups: dict[int, list[Answer]] = {}
    for a in answers:
        groups.setdefault(a.request, []).append(a)
    return list(groups.values())


def _workload(answers: list[Answer]) -> list[Request]:
    oks = [a.duration_s for a in answers if a.error is None]
    typical = statistics.median(oks) if oks else 0.0
    requests: list[Request] = []
    end = 0.0
    for mine in by_request(answers):
        done = [a.duration_s for a in mine if a.error is None]
        requests.append(
            Request(max(0.0, mine[0].at - end) if requests else 0.0, done[0] if done else typical)
        )
        end = mine[-1].at + mine[-1].duration_s
    return requests


def _admit(rate: float, capacity: float, sends: list[float]) -> tuple[int, list[float]]:
    """How many of `sends` a full bucket admits, and the wait it would name for each."""
    bucket = TokenBucket(capacity, rate)
    waits = [bucket.take(t) for t in sends]
    return waits.count(None), [w or 0.0 for w in waits]


def _fit_bucket(answers: list[Answer], limits: list[float]) -> Bucket | None:
    limited = [a for a in answers if a.rate_limited]
    if not limited:
        return None
    sends = [a.at for a in answers]
    target = sum(not a.rate_limited for a in answers)
    if limits:
        capacity = max(limits)
    else:
        first = next(i for i, a in enumerate(answers) if a.rate_limited)
        capacity = float(max(1, first))

    # the rate is searched on a log scale: `lo`, `hi`, `mid` are its logarithms
    def bound(smallest: bool) -> float:
        lo, hi = math.log(1e-7), math.log(1e5)
        for _ in range(60):
            mid = (lo + hi) / 2
            count = _admit(math.exp(mid), capacity, sends)[0]
            if (count >= target) if smallest else (count > target):
                hi = mid
            else:
                lo = mid
        return hi if smallest else lo

    lo, hi = bound(True), bound(False)
    rate = math.exp(lo)
    wished = [(i, a.error.retry_after) for i, a in enumerate(answers) if a.rate_limited and a.error]
    wished_known = [(i, w) for i, w in wished if w is not None]
    if wished_known and hi > lo:
        best = math.inf
        for k in range(41):
            candidate = math.exp(lo + (hi - lo) * k / 40)
            waits = _admit(candidate, capacity, sends)[1]
            cost = sum((waits[i] - w) ** 2 for i, w in wished_known)
            if cost < best:
                best, rate = cost, candidate
    durations = [a.duration_s for a in limited]
    values = [w for _, w in wished_known]
    same = None
    if len(values) >= 2 and max(values) - min(values) <= 0.05 * max(values):
        same = statistics.median(values)
    return Bucket(capacity, rate, bool(wished_known), statistics.median(durations), same)


def server_model(source: Recording | str | os.PathLike[str] | pd.DataFrame) -> ServerModel:
    """Read what the server did from a recording (or its path) or an attempt frame.

    Args:
        source: A `Recording`, a recording's path, or an attempt frame.

    Returns:
        The server's answers over time, and the rate limit they show.

    Raises:
        ConfigError: The source has no requests, or the file is not a recording.
    """
    if isinstance(source, pd.DataFrame):
        answers, limits, model, provider = _from_frame(source)
        where = "an attempt frame"
    else:
        rec = source if isinstance(source, Recording) else read_recording(Path(source))
        answers, limits, model, provider = _from_recording(rec)
        where = str(rec.path.name) if rec.path else "a recording"
    quota: Quota | None = None
    for i, a in enumerate(answers):
        if isinstance(a.error, QuotaExceeded):
            quota = Quota(sum(b.error is None for b in answers[:i]), a)
            break
    return ServerModel(
        quota=quota,
        answers=answers,
        requests=_workload(answers),
        bucket=_fit_bucket(answers, limits),
        model=model,
        provider=provider,
        source=where,
    )
