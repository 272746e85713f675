"""Answers as the fault says: an HTTP error fault's error body (any endpoint), and the batch
endpoints' answers as their endpoint fault allows: done, then lost, late, cut, stalled or
malformed (``results:cut``, ``create:slow``, ...)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ._call import Call
from ._faults import Fault
from ._ratelimit import RateDecision, format_seconds


def reply(call: Call, body: Any) -> None:
    """Answer 200 with a JSON body (done, then lost, late, cut, stalled or broken, as the
    fault says).

    Args:
        call: The call to answer.
        body: The body, as JSON.
    """
    data = json.dumps(body, ensure_ascii=False).encode()
    kind = call.fault.kind
    if kind in ("cut", "stall"):
        half = max(1, len(data) // 2)
        reply_stream(call, [data[:half], data[half:]], "application/json", 2)
        return
    _after_action(call)
    if kind == "malformed":
        data = data[: len(data) // 2]
    call.send(200, data, "application/json", call.id_headers())


def reply_stream(call: Call, chunks: Iterable[bytes], ctype: str, count: int) -> None:
    """Answer 200 with a body made piece by piece, in chunked encoding: a ``cut`` fault ends
    it after half of the pieces, a ``stall`` pauses there (`count` must be exact).

    Args:
        call: The call to answer.
        chunks: The pieces.
        ctype: The content type.
        count: How many pieces there are.
    """
    _after_action(call)
    call.head(200, ctype, call.id_headers())
    fault = call.fault
    halfway = count // 2 if count > 1 else 0
    for i, piece in enumerate(chunks):
        if i == halfway and fault.kind == "cut":
            call.chunk(piece[: len(piece) // 2])
            call.flush()
            call.hang_up()
        if i == halfway and fault.kind == "stall":
            call.flush()
            if call.mock.wait(fault.seconds or 0.0):
                call.hang_up()
        call.chunk(piece)
    call.end()


def _after_action(call: Call) -> None:
    kind = call.fault.kind
    if kind == "lost":
        call.hang_up()
    call.record(200)
    if kind == "slow" and call.mock.wait(call.fault.seconds or 0.0):
        call.hang_up()


def status_fault(call: Call, given: Fault, model: str = "", tokens: int = 0, **record: Any) -> bool:
    """Answer a fault that is an HTTP error (a status, ``quota``, ``overflow``) with the
    format's error body.

    Args:
        call: The call to answer.
        given: The fault to answer.
        model: The model the request named.
        tokens: The prompt's estimated size, for an overflow's message.
        **record: Fields for `record`.

    Returns:
        True when it answered; False when the fault is not an HTTP error.
    """
    if given.status is None:
        return False
    if given.kind == "429":
        seconds = given.retry_after_s or 0.0
        rate_limited(call, RateDecision(False, seconds, 50, 0, seconds), model, **record)
        return True
    window = call.mock.context_window
    status, body = call.codec.fault_error(given, model, call.request_id, tokens, window)
    call.error(status, body, **record)
    return True


def rate_limited(call: Call, decision: RateDecision, model: str, **record: Any) -> None:
    """Answer 429 for a request the rate limit refused (or a ``429`` fault): the wait said in
    the format's headers (or its body), with the buckets' headers.

    Args:
        call: The call to answer.
        decision: The rate limit's refusal.
        model: The model the request named.
        **record: Fields for `record`.
    """
    codec, wait = call.codec, decision.retry_after_s
    call.extra.update(codec.retry_headers(wait) | codec.rate_headers(decision))
    call.error(429, codec.status_error(429, model, call.request_id, format_seconds(wait)), **record)
