"""Fault specifications for the mock server: the grammar, parsing, and the per-request plan.

A fault string is ``kind[=value][:key=value[,key=value]]``, for example ``"ok"``, ``"500"``,
``"429:retry_after=2"``, ``"drop_after_tokens=20"``, ``"stall=0.5:should_retry=false"``.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Kinds answered with an HTTP error status before any model output.
STATUS_KINDS: frozenset[str] = frozenset(
    {
        "400",
        "401",
        "402",
        "403",
        "404",
        "408",
        "409",
        "413",
        "429",
        "500",
        "502",
        "503",
        "504",
        "529",
    }
)
# Kinds that take a value after ``=`` in the head of the spec, and what the value means.
_VALUE_KINDS: dict[str, str] = {
    "drop_after_tokens": "a whole number of text deltas",
    "stall": "a number of seconds",
    "slow": "a number of seconds",
}
# Kinds applied while a 200 stream is being written.
STREAM_KINDS: frozenset[str] = frozenset(
    {"drop_after_tokens", "malformed", "stall", "overloaded_midstream"}
)
# Kinds that change a structured answer before it is sent (`_answer_faults`): not JSON, off
# the schema, refused, cut at max_tokens.
ANSWER_KINDS: frozenset[str] = frozenset(
    {"invalid_json", "schema_mismatch", "refusal", "truncated"}
)
_PLAIN_KINDS: frozenset[str] = frozenset(
    {"ok", "quota", "overflow", "close", "empty", "malformed", "overloaded_midstream"}
    | ANSWER_KINDS
)
ALL_KINDS: frozenset[str] = STATUS_KINDS | _PLAIN_KINDS | frozenset(_VALUE_KINDS)
_MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour of the mock server for one model request.

    ``kind`` is one of ``ALL_KINDS``. ``tokens`` is set for ``drop_after_tokens``; ``seconds`` for
    ``stall`` and ``slow``; ``retry_after_s`` for ``429``. ``should_retry`` adds the
    ``x-should-retry`` header when not None.
    """

    kind: str = "ok"
    tokens: int | None = None
    seconds: float | None = None
    retry_after_s: float | None = None
    should_retry: bool | None = None

    @property
    def is_ok(self) -> bool:
        return self.kind == "ok"

    @property
    def status(self) -> int | None:
        """The HTTP status this fault answers with, or None when it is not a status fault."""
        if self.kind in STATUS_KINDS:
            return int(self.kind)
        if self.kind == "quota":
            return 429
        if self.kind == "overflow":
            return 400
        return None

    def __str__(self) -> str:
        head = self.kind
        if self.kind == "drop_after_tokens":
            head = f"{self.kind}={self.tokens}"
        elif self.kind in ("stall", "slow"):
            head = f"{self.kind}={_fmt_number(self.seconds or 0.0)}"
        params: list[str] = []
        if self.retry_after_s is not None:
            params.append(f"retry_after={_fmt_number(self.retry_after_s)}")
        if self.should_retry is not None:
            params.append(f"should_retry={'true' if self.should_retry else 'false'}")
        return head + (":" + ",".join(params) if params else "")


OK = Fault("ok")
# Random-fault probabilities keyed by fault string (or Fault): {"500": 0.1, "429": 0.05}.
FaultRates = Mapping[str, float] | Mapping[Fault, float] | Mapping[str | Fault, float]


def _fmt_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _seconds(entry: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"Fault {entry!r}: {what} must be a number of seconds, got {text!r}."
        ) from None
    if not math.isfinite(value) or value < 0 or value > _MAX_SECONDS:
        raise ValueError(
            f"Fault {entry!r}: {what} must be between 0 and {_MAX_SECONDS:g} seconds, got {text!r}."
        )
    return value


def parse_fault(entry: str) -> Fault:
    """Parse one fault string; raise ``ValueError`` with one sentence naming the bad entry."""
    if not isinstance(entry, str):
        raise ValueError(f"Fault {entry!r} must be a string such as '500' or '429:retry_after=2'.")
    text = entry.strip()
    head, _, param_text = text.partition(":")
    kind, has_value, value = head.strip().partition("=")
    kind = kind.strip().lower()
    if kind not in ALL_KINDS:
        known = ", ".join(sorted(ALL_KINDS))
        raise ValueError(f"Fault {entry!r} has unknown kind {kind!r}; known kinds are {known}.")
    tokens: int | None = None
    seconds: float | None = None
    if kind in _VALUE_KINDS:
        if not has_value or not value.strip():
            raise ValueError(
                f"Fault {entry!r} needs a value: write {kind}=N with N {_VALUE_KINDS[kind]}."
            )
        if kind == "drop_after_tokens":
            try:
                tokens = int(value.strip())
            except ValueError:
                raise ValueError(
                    f"Fault {entry!r}: drop_after_tokens must be a whole number, got {value!r}."
                ) from None
            if tokens < 0:
                raise ValueError(f"Fault {entry!r}: drop_after_tokens must not be negative.")
        else:
            seconds = _seconds(entry, kind, value.strip())
    elif has_value:
        raise ValueError(f"Fault {entry!r}: kind {kind!r} takes no '=value' in its name.")

    retry_after: float | None = None
    should_retry: bool | None = None
    if param_text.strip():
        for item in param_text.split(","):
            key, eq, raw = item.partition("=")
            key = key.strip().lower()
            raw = raw.strip()
            if not eq or not key:
                raise ValueError(f"Fault {entry!r}: parameter {item.strip()!r} is not key=value.")
            if key == "should_retry":
                if raw.lower() not in ("true", "false"):
                    raise ValueError(f"Fault {entry!r}: should_retry must be true or false.")
                should_retry = raw.lower() == "true"
            elif key == "retry_after" and kind == "429":
                retry_after = _seconds(entry, "retry_after", raw)
            else:
                allowed = "retry_after, should_retry" if kind == "429" else "should_retry"
                raise ValueError(
                    f"Fault {entry!r}: unknown parameter {key!r} for kind {kind!r} "
                    f"(allowed: {allowed})."
                )
    if kind == "429" and retry_after is None:
        retry_after = 1.0
    return Fault(kind, tokens, seconds, retry_after, should_retry)


def parse_faults(entries: Iterable[str | Fault]) -> list[Fault]:
    """Parse a fault script; ``Fault`` objects pass through unchanged."""
    if isinstance(entries, str):
        raise ValueError(f"Faults must be a list of strings, not the single string {entries!r}.")
    return [e if isinstance(e, Fault) else parse_fault(e) for e in entries]


def parse_fault_rates(rates: FaultRates) -> list[tuple[Fault, float]]:
    """Check random-fault rates: each a probability, all of them summing to at most 1."""
    parsed: list[tuple[Fault, float]] = []
    for spec, rate in rates.items():
        fault = spec if isinstance(spec, Fault) else parse_fault(spec)
        if not isinstance(rate, (int, float)) or not (0.0 <= float(rate) <= 1.0):
            raise ValueError(f"Fault rate for {str(spec)!r} must be a probability in 0..1.")
        parsed.append((fault, float(rate)))
    total = sum(rate for _, rate in parsed)
    if total > 1.0 + 1e-9:
        raise ValueError(f"Fault rates add up to {total:g}; their sum must be at most 1.")
    return parsed


class FaultPlan:
    """Which fault the next model request gets. Thread-safe.

    The script is consumed first, one entry per request; after it, each request draws from
    ``fault_rates`` with a seeded ``random.Random`` (deterministic for a given request order), or
    is ``ok`` when no rates are set.
    """

    def __init__(
        self,
        script: Sequence[str | Fault] = (),
        *,
        seed: int | None = None,
        fault_rates: FaultRates | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._script: list[Fault] = parse_faults(script)
        self._position = 0
        self._rates = parse_fault_rates(fault_rates or {})
        self._random = random.Random(seed)

    def set_script(self, script: Sequence[str | Fault]) -> None:
        faults = parse_faults(script)
        with self._lock:
            self._script = faults
            self._position = 0

    def set_rates(self, fault_rates: FaultRates | None, seed: int | None) -> None:
        rates = parse_fault_rates(fault_rates or {})
        with self._lock:
            self._rates = rates
            self._random = random.Random(seed)

    @property
    def remaining(self) -> int:
        """How many scripted faults are still to be consumed."""
        with self._lock:
            return len(self._script) - self._position

    def next(self) -> Fault:
        with self._lock:
            if self._position < len(self._script):
                fault = self._script[self._position]
                self._position += 1
                return fault
            if not self._rates:
                return OK
            draw = self._random.random()
            for fault, rate in self._rates:
                if draw < rate:
                    return fault
                draw -= rate
            return OK
