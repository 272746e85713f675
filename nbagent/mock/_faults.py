"""Fault specifications for the mock server: the grammar, parsing, and the per-request plan.

A fault string is ``[target:]kind[=value][:key=value[,key=value]]``, for example ``"ok"``,
``"500"``, ``"429:retry_after=2"``, ``"drop_after_tokens=20"``, ``"stall=0.5:should_retry=false"``,
``"no_finish_reason"``, ``"cut_after_done"``.

Without a target an entry is for the next model request: a live request, or one item of a
provider batch (the items of a batch take their entries in submission order, when the batch is
created). With a target (``create``, ``upload``, ``retrieve``, ``list``, ``cancel``, ``results``,
``delete``) it waits for the next call to that batch endpoint, whatever came in between:
``["create:429", "ok", "500", "results:cut"]`` refuses the first create, gives the two items of
the batch created next ``ok`` and ``500``, and cuts the first results download half way. Entries
aimed at an endpoint take the kinds a status or a connection can show: a status (``429``,
``500``, ...), ``quota``, ``close`` (no answer, nothing done), ``lost`` (done, then the
connection is closed before the answer: a create that made a batch its caller never heard of),
``slow=S`` (done, answered S seconds later), ``malformed`` (half a JSON body), and for
``results`` and ``retrieve`` ``cut`` (the body stops half way and the connection closes) and
``stall=S`` (the body pauses S seconds half way), and for ``create`` ``failed`` (the batch is
accepted, then fails: OpenAI's ``failed`` with ``token_limit_exceeded``, Gemini's
``BATCH_STATE_FAILED``; Anthropic has no failed batches, so there every item ends errored).
``invalid`` is another name for ``400`` and ``overloaded`` for ``529``.
"""

from __future__ import annotations

import math
import random
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Kinds answered with an HTTP error status before any model output.
STATUS_KINDS: frozenset[str] = _words("400 401 402 403 404 408 409 413 429 500 502 503 504 529")
# Kinds that take a value after ``=`` in the head of the spec, and what the value means.
_VALUE_KINDS: dict[str, str] = {
    "drop_after_tokens": "a whole number of text deltas",
    "stall": "a number of seconds",
    "slow": "a number of seconds",
}
# Kinds applied while a 200 stream is being written.
STREAM_KINDS: frozenset[str] = _words(
    "drop_after_tokens malformed stall overloaded_midstream no_finish_reason cut_after_done"
)
# Kinds that change a structured answer before it is sent (`_answer_faults`): not JSON, off
# the schema, refused, cut at max_tokens.
ANSWER_KINDS: frozenset[str] = _words("invalid_json schema_mismatch refusal truncated")
ALL_KINDS: frozenset[str] = (
    STATUS_KINDS | STREAM_KINDS | ANSWER_KINDS | _words("ok quota overflow close empty slow")
)
# Other names a script may use for a kind, read as the kind itself.
ALIASES: dict[str, str] = {"invalid": "400", "overloaded": "529"}
# The batch endpoints a fault can be aimed at with a ``target:`` prefix.
TARGETS: frozenset[str] = _words("create upload retrieve list cancel results delete")
# What each target can show: what a status or a connection can do to that call.
_ENDPOINT_KINDS: frozenset[str] = STATUS_KINDS | _words("ok quota close lost slow malformed")
# The kinds only some targets show: what they are, and which targets.
_ONLY_AT: dict[str, tuple[str, tuple[str, ...]]] = {
    "cut": ("breaks a long answer", ("results", "retrieve")),
    "stall": ("breaks a long answer", ("results", "retrieve")),
    "failed": ("is a batch that fails after it was accepted", ("create",)),
}
_TARGETED_ONLY: frozenset[str] = frozenset({"lost", "cut", "failed"})
_MAX_SECONDS = 3600.0
_STATUS_OF = {
    "quota": 429,
    "overflow": 400,
}  # the statuses of the HTTP error faults not named by one


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour of the mock server for one model request or batch endpoint call.

    ``kind`` is one of ``ALL_KINDS`` (or, aimed at a batch endpoint, ``lost`` or ``cut``).
    ``tokens`` is set for ``drop_after_tokens``; ``seconds`` for ``stall`` and ``slow``;
    ``retry_after_s`` for ``429``. ``should_retry`` adds the ``x-should-retry`` header when not
    None. ``target`` is the batch endpoint the fault waits for (one of ``TARGETS``), or None for
    a model request or a batch item.

    The stream faults: ``drop_after_tokens=N`` closes the connection after N text deltas;
    ``stall=S`` goes silent for S seconds after a few deltas; ``malformed`` sends a broken
    event; ``overloaded_midstream`` an error event. Two faults end a stream with its end marker
    (OpenAI Chat's ``data: [DONE]``, Anthropic's ``message_stop``) but no finish reason before
    it, then end the body cleanly: ``no_finish_reason`` after the whole answer and a usage
    report, as a server that leaves the reason out does (Snowflake Cortex: a complete answer);
    ``cut_after_done`` after a few text deltas, with no usage report either, as
    llama-cpp-python's server ends a stream its ``interrupt_requests`` stops for another request
    (a cut one). The Responses and Gemini formats have no such end marker: there the stream
    ends cleanly without its end event or finish reason.

    Attributes:
        kind: The fault: an HTTP status ("500", "429", ...), "quota", "overflow", "close",
            "empty", "malformed", "overloaded_midstream", "drop_after_tokens", "stall",
            "slow", or "ok"; aimed at a batch endpoint also "lost", "cut" or "failed".
        tokens: For "drop_after_tokens": how many tokens stream before the connection drops.
        seconds: For "stall" and "slow": how long, in seconds.
        retry_after_s: For "429": the Retry-After it sends, in seconds.
        should_retry: The `x-should-retry` header to add, or None for none.
        target: The batch endpoint the fault waits for (one of ``TARGETS``: "create",
            "results", ...), or None for a model request or a batch item.
    """

    kind: str = "ok"
    tokens: int | None = None
    seconds: float | None = None
    retry_after_s: float | None = None
    should_retry: bool | None = None
    target: str | None = None

    @property
    def is_ok(self) -> bool:
        """Whether it is no fault at all."""
        return self.kind == "ok"

    @property
    def status(self) -> int | None:
        """The HTTP status this fault answers with, or None when it is not a status fault."""
        if self.kind in STATUS_KINDS:
            return int(self.kind)
        return _STATUS_OF.get(self.kind)

    def __str__(self) -> str:
        head = self.kind
        if self.kind == "drop_after_tokens":
            head = f"{self.kind}={self.tokens}"
        elif self.kind in ("stall", "slow"):
            head = f"{self.kind}={_fmt_number(self.seconds or 0.0)}"
        if self.target is not None:
            head = f"{self.target}:{head}"
        params: list[str] = []
        if self.retry_after_s is not None:
            params.append(f"retry_after={_fmt_number(self.retry_after_s)}")
        if self.should_retry is not None:
            params.append(f"should_retry={'true' if self.should_retry else 'false'}")
        return head + (":" + ",".join(params) if params else "")


OK = Fault("ok")
FaultRates = Mapping[str, float] | Mapping[Fault, float] | Mapping[str | Fault, float]
"""Random-fault probabilities keyed by fault string (or `Fault`): {"500": 0.1, "429": 0.05}."""


def _fmt_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _bad(entry: str, what: str) -> ValueError:
    """The refusal of the fault string ``entry``, in one sentence: ``what`` is wrong with it."""
    return ValueError(f"Fault {entry!r}: {what}")


def _seconds(entry: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(entry, f"{what} must be a number of seconds, got {text!r}.") from None
    if not math.isfinite(value) or value < 0 or value > _MAX_SECONDS:
        raise _bad(entry, f"{what} must be between 0 and {_MAX_SECONDS:g} seconds, got {text!r}.")
    return value


def parse_fault(entry: str) -> Fault:
    """Parse one fault string.

    Args:
        entry: ``[target:]kind[=value][:key=value[,key=value]]``, e.g. ``"429:retry_after=2"``
            or ``"results:cut"``.

    Returns:
        The `Fault` it describes.

    Raises:
        ValueError: one sentence naming the bad entry and what is wrong with it.
    """
    if not isinstance(entry, str):
        raise ValueError(f"Fault {entry!r} must be a string such as '500' or '429:retry_after=2'.")
    text = entry.strip()
    target: str | None = None
    first, colon, rest = text.partition(":")
    if colon and first.strip().lower() in TARGETS:
        target, text = first.strip().lower(), rest.strip()
    head, _, param_text = text.partition(":")
    kind, has_value, value = head.strip().partition("=")
    kind = kind.strip().lower()
    kind = ALIASES.get(kind, kind)
    _check_kind(entry, kind, target)
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
                raise _bad(entry, f"{kind} must be a whole number, got {value!r}.") from None
            if tokens < 0:
                raise _bad(entry, "drop_after_tokens must not be negative.")
        else:
            seconds = _seconds(entry, kind, value.strip())
    elif has_value:
        raise _bad(entry, f"kind {kind!r} takes no '=value' in its name.")

    retry_after: float | None = None
    should_retry: bool | None = None
    if param_text.strip():
        for item in param_text.split(","):
            key, eq, raw = item.partition("=")
            key = key.strip().lower()
            raw = raw.strip()
            if not eq or not key:
                raise _bad(entry, f"parameter {item.strip()!r} is not key=value.")
            if key == "should_retry":
                if raw.lower() not in ("true", "false"):
                    raise _bad(entry, "should_retry must be true or false.")
                should_retry = raw.lower() == "true"
            elif key == "retry_after" and kind == "429":
                retry_after = _seconds(entry, "retry_after", raw)
            else:
                allowed = "retry_after, should_retry" if kind == "429" else "should_retry"
                raise _bad(
                    entry, f"unknown parameter {key!r} for kind {kind!r} (allowed: {allowed})."
                )
    if kind == "429" and retry_after is None:
        retry_after = 1.0
    return Fault(kind, tokens, seconds, retry_after, should_retry, target)


def _check_kind(entry: str, kind: str, target: str | None) -> None:
    if target is None:
        if kind in _TARGETED_ONLY:
            raise _bad(
                entry,
                f"kind {kind!r} is for a batch endpoint, so aim it at one, "
                f"as in {'results' if kind == 'cut' else 'create'}:{kind}.",
            )
        if kind not in ALL_KINDS:
            known = ", ".join(sorted(ALL_KINDS | set(ALIASES)))
            raise ValueError(f"Fault {entry!r} has unknown kind {kind!r}; known kinds are {known}.")
        return
    why, where = _ONLY_AT.get(kind, ("", tuple(TARGETS)))
    if target not in where:
        raise _bad(entry, f"kind {kind!r} {why}, so it is for {' or '.join(where)}, not {target}.")
    if kind not in _ENDPOINT_KINDS | set(_ONLY_AT):
        known = ", ".join(sorted(_ENDPOINT_KINDS | set(_ONLY_AT) | set(ALIASES)))
        raise _bad(
            entry,
            f"kind {kind!r} cannot be aimed at the {target} endpoint; "
            f"kinds for an endpoint are {known}.",
        )


def parse_faults(entries: Iterable[str | Fault]) -> list[Fault]:
    """Parse a fault script; ``Fault`` objects pass through unchanged.

    Args:
        entries: Fault strings or `Fault`s.

    Returns:
        The faults, in order.

    Raises:
        ValueError: An entry does not parse, or one string was given instead of a list.
    """
    if isinstance(entries, str):
        raise ValueError(f"Faults must be a list of strings, not the single string {entries!r}.")
    return [e if isinstance(e, Fault) else parse_fault(e) for e in entries]


def parse_fault_rates(rates: FaultRates) -> list[tuple[Fault, float]]:
    """Check random-fault rates: each a probability, those of one target summing to at most 1."""
    parsed: list[tuple[Fault, float]] = []
    for spec, rate in rates.items():
        fault = spec if isinstance(spec, Fault) else parse_fault(spec)
        if not isinstance(rate, (int, float)) or not (0.0 <= float(rate) <= 1.0):
            raise ValueError(f"Fault rate for {str(spec)!r} must be a probability in 0..1.")
        parsed.append((fault, float(rate)))
    for target in {fault.target for fault, _ in parsed}:
        total = sum(rate for fault, rate in parsed if fault.target == target)
        if total > 1.0 + 1e-9:
            where = "" if target is None else f" aimed at {target}"
            raise ValueError(
                f"Fault rates{where} add up to {total:g}; their sum must be at most 1."
            )
    return parsed


class FaultPlan:
    """Which fault the next model request, batch item or batch endpoint call gets. Thread-safe.

    The script is consumed first: entries without a target one per model request or batch item,
    in order; entries with a target one per call to that endpoint, in order among themselves.
    After it, each draws from the ``fault_rates`` of its target with a seeded ``random.Random``
    (deterministic for a given order of requests), or is ``ok`` when there are none.

    Args:
        script: The fault script.
        seed: Seeds the random draws.
        fault_rates: Random-fault probabilities, by fault string or `Fault` ({"500": 0.1,
            "retrieve:503": 0.05}); each call after the script draws one for its target, or none.

    Raises:
        ValueError: A fault or a rate does not parse.
    """

    def __init__(
        self,
        script: Sequence[str | Fault] = (),
        *,
        seed: int | None = None,
        fault_rates: FaultRates | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.set_script(script)
        self.set_rates(fault_rates, seed)

    def set_script(self, script: Sequence[str | Fault]) -> None:
        """Replace the script; its first entries are the next ones given out.

        Args:
            script: fault strings or `Fault` objects.

        Raises:
            ValueError: an entry does not parse.
        """
        queues: dict[str | None, deque[Fault]] = {}
        for fault in parse_faults(script):
            queues.setdefault(fault.target, deque()).append(fault)
        with self._lock:
            self._queues = queues

    def set_rates(self, fault_rates: FaultRates | None, seed: int | None) -> None:
        """Replace the random faults drawn once the script is used up.

        Args:
            fault_rates: probability per fault string (or `Fault`), or None for none.
            seed: the seed of the draws.

        Raises:
            ValueError: a rate is not a probability, or the rates of one target sum above 1.
        """
        rates = parse_fault_rates(fault_rates or {})
        with self._lock:
            self._rates = rates
            self._random = random.Random(seed)

    @property
    def remaining(self) -> int:
        """How many scripted faults are still to be consumed (for every target)."""
        with self._lock:
            return sum(len(queue) for queue in self._queues.values())

    def next(self, target: str | None = None) -> Fault:
        """The fault for the next call.

        Args:
            target: the batch endpoint being called (one of ``TARGETS``), or None for a model
                request or a batch item.

        Returns:
            The next scripted entry for that target, else a random draw, else ``ok``.
        """
        with self._lock:
            queue = self._queues.get(target)
            if queue:
                return queue.popleft()
            rates = [(fault, rate) for fault, rate in self._rates if fault.target == target]
            if not rates:
                return OK
            draw = self._random.random()
            for fault, rate in rates:
                if draw < rate:
                    return fault
                draw -= rate
            return OK
