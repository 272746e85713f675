"""Google API error bodies: the `google.rpc` details that decide what a Gemini error means.

Gemini answers `{"error": {"code", "message", "status", "details": [...]}}`. The details say
what the status alone does not:

* `google.rpc.RetryInfo.retryDelay` ("48s"): Gemini's Retry-After, in the body, not a header;
* `google.rpc.QuotaFailure.violations[].quotaId`: which quota ran out. A per-day quota
  (`...PerDay...`) also carries a short `retryDelay` in the recordings, but waiting 48 s does not
  clear a daily quota: that 429 is final (`QuotaExceeded`), with a sentence naming the quota, the
  model and when daily quotas reset (midnight Pacific time). A quota whose limit is 0 (the free
  tier does not cover this model for this project) is final too;
* `google.rpc.ErrorInfo.reason` (`API_KEY_INVALID`): a bad key arrives as a 400.

The same details reach nbagent through a gateway that flattens the upstream body into its own
message (the LiteLLM proxy); `_http_errors` finds them there too.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass, field
from typing import Any

from .._core._policy import format_duration
from ._parts import json_object
from ._server_wish import parse_duration, wish_in_text

AUTH_REASONS = frozenset(
    {"api_key_invalid", "api_key_expired", "api_key_service_blocked", "access_token_expired"}
)
_LIMIT_ZERO = re.compile(r"limit:\s*0\b")
_PACIFIC = "America/Los_Angeles"


@dataclass(frozen=True)
class QuotaViolation:
    quota_id: str = ""
    metric: str = ""
    model: str = ""
    value: str = ""


@dataclass(frozen=True)
class GoogleDetails:
    """What the `google.rpc` details of one error say (all empty for other providers' errors)."""

    status: str = ""
    reasons: frozenset[str] = frozenset()
    retry_delay: float | None = None
    violations: tuple[QuotaViolation, ...] = ()
    limit_zero: bool = False
    extra_codes: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_google(self) -> bool:
        return bool(self.status or self.reasons or self.violations or self.retry_delay is not None)

    @property
    def daily(self) -> tuple[QuotaViolation, ...]:
        """The violations of a per-day quota."""
        return tuple(v for v in self.violations if "perday" in v.quota_id.lower())

    @property
    def final_quota(self) -> bool:
        """True when waiting will not help: a per-day quota, or a quota of zero."""
        return bool(self.daily) or self.limit_zero

    def quota_sentence(self, model: str, now_wall: float | None = None) -> str:
        """One sentence naming the quota, the model and when it resets."""
        chosen = self.daily[0] if self.daily else (self.violations or (QuotaViolation(),))[0]
        name = chosen.quota_id or chosen.metric or "the request quota"
        who = chosen.model or model or "this model"
        if self.limit_zero:
            return (
                f"the quota {name} is 0 for {who}: this project's tier does not include the "
                "model (enable billing or choose another model); waiting will not help."
            )
        per = f" ({chosen.value} requests a day)" if chosen.value else ""
        left = seconds_to_reset(now_wall)
        when = f", in {format_duration(left)}" if left is not None else ""
        return (
            f"the daily quota {name}{per} for {who} is used up; daily quotas reset at midnight "
            f"Pacific time{when}."
        )


def seconds_to_reset(now_wall: float | None = None) -> float | None:
    """Seconds until the next midnight in Pacific time, when Gemini's daily quotas reset; None
    when this machine has no time-zone data."""
    try:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(_PACIFIC)
    except Exception:  # ZoneInfoNotFoundError, or no tzdata at all
        return None
    now = dt.datetime.fromtimestamp(time.time() if now_wall is None else now_wall, tz=zone)
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(0), tzinfo=zone)
    return max(0.0, midnight.timestamp() - now.timestamp())


def _type_of(detail: dict[str, Any]) -> str:
    kind = detail.get("@type")
    return kind.rsplit(".", 1)[-1] if isinstance(kind, str) else ""


def google_details(error: dict[str, Any], message: str = "") -> GoogleDetails:
    """The `google.rpc` details of an error object (the value of the body's `error`)."""
    status = error.get("status")
    status = status if isinstance(status, str) else ""
    reasons: set[str] = set()
    retry: float | None = None
    violations: list[QuotaViolation] = []
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, dict):
            continue
        kind = _type_of(detail)
        if kind == "ErrorInfo" and isinstance(detail.get("reason"), str):
            reasons.add(detail["reason"].lower())
        elif kind == "RetryInfo":
            delay = detail.get("retryDelay")  # a protobuf duration: "48s", "48.180526505s"
            retry = parse_duration(delay) if isinstance(delay, str) else None
        elif kind == "QuotaFailure":
            for v in detail.get("violations") or ():
                if not isinstance(v, dict):
                    continue
                model = json_object(v, "quotaDimensions").get("model")
                violations.append(
                    QuotaViolation(
                        quota_id=str(v.get("quotaId") or ""),
                        metric=str(v.get("quotaMetric") or ""),
                        model=model if isinstance(model, str) else "",
                        value=str(v.get("quotaValue") or ""),
                    )
                )
    if retry is None and status == "RESOURCE_EXHAUSTED":
        retry = wish_in_text(message)  # the message says it too: "Please retry in 58.2s."
    limit_zero = status == "RESOURCE_EXHAUSTED" and bool(_LIMIT_ZERO.search(message))
    codes = {status.lower()} if status else set()
    return GoogleDetails(
        status=status,
        reasons=frozenset(reasons),
        retry_delay=retry,
        violations=tuple(violations),
        limit_zero=limit_zero,
        extra_codes=frozenset(codes | reasons),
    )
