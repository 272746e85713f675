"""One item of a provider batch, answered as the mock answers a live request.

Its fault is drawn from the same script, when the batch is created; its request is parsed by the
same parser (a request the wire format refuses is an errored item); its answer comes from the
same responder and is encoded by the same `Codec` as a non-streamed live answer, when the results
are read; a structured request (its schema, its forced tool) is answered in the shape it asks
for, and the answer faults break it as they break a live answer. So a batch of the demo model
says what a live conversation would, and a fault script breaks items as it breaks requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from ._answer_faults import faulted_reply
from ._batch_timeline import FAILED_OUTCOME, OK_OUTCOME, Batch, ItemOutcome, Items, stable_id
from ._call import Call
from ._codec import Route
from ._conversation import RequestError, _dumps
from ._formats import CODECS, parse_request

# Live faults that break a connection: an item has none, so its worker failed instead.
_BROKEN = frozenset({"close", "drop_after_tokens", "malformed"})


def compact(value: Any) -> bytes:
    return _dumps(value).encode()


def outcome_of(call: Call, route: Route, request: Any) -> ItemOutcome:
    """What one item of the batch ``call`` creates will end as, with the next fault of the
    script in turn: refused by its wire format, broken by its fault, over the context window,
    or answered; in a batch that fails (``create:failed``) none runs, so none takes a fault."""
    if call.fault.kind == "failed":
        return FAILED_OUTCOME
    fault, window = call.mock.plan.next(), call.mock.context_window
    try:
        conv = parse_request(route.format, request, route)
    except RequestError as err:
        return ItemOutcome("invalid", fault, err.message, err.param)
    if fault.status is not None or fault.kind in _BROKEN or fault.kind == "overloaded_midstream":
        return ItemOutcome("fault", fault, tokens=conv.prompt_tokens)
    if window is not None and conv.prompt_tokens > window:
        return ItemOutcome("overflow", fault, tokens=conv.prompt_tokens, maximum=window)
    return OK_OUTCOME if fault.is_ok else ItemOutcome("ok", fault)


def items_of(call: Call, route: Route, entries: Iterable[tuple[Any, Any, Any]]) -> Items:
    """The items of the batch ``call`` creates, from ``(custom id, line kept, request)`` each
    (a custom id that is not a string is None), each with its outcome (`outcome_of`)."""
    listed = list(entries)
    lines = [compact(kept) for _, kept, _ in listed]
    ids = [custom_id if isinstance(custom_id, str) else None for custom_id, _, _ in listed]
    outcomes = [outcome_of(call, route, request) for _, _, request in listed]  # in turn
    starts = list(accumulate(map(len, lines), initial=0))[:-1]
    return Items(b"".join(lines), starts, ids, outcomes)


def request_id(batch: Batch, index: int) -> str:
    """Item ``index``'s request id, in its wire format's style, the same at each download."""
    return CODECS[batch.route.format].request_prefix + stable_id(batch.id + "/request", index)


def result(call: Call, batch: Batch, index: int, line: Any = None) -> tuple[int, Any]:
    """The HTTP status and body item ``index`` ended with, in its wire format: its error, or the
    provider's non-streamed answer, the responder's with the item's answer fault applied
    (`invalid_json`, `schema_mismatch`, `refusal`, `truncated`) as a live answer has
    (``line``: its stored line, when the caller has read it already)."""
    route, outcome = batch.route, batch.items.outcomes[index]
    request = batch.request(index, line)
    codec, rid = CODECS[route.format], request_id(batch, index)
    if outcome.kind == "invalid":
        return 400, codec.error_body(400, outcome.message, rid, outcome.param)
    if outcome.kind == "overflow":
        return 400, codec.overflow_error(outcome.tokens, outcome.maximum, rid)
    if outcome.errored:
        model = route.model or str(request.get("model", ""))
        window = call.mock.context_window
        return codec.fault_error(outcome.fault, model, rid, outcome.tokens, window)
    conv = parse_request(route.format, request, route)
    reply = faulted_reply(outcome.fault.kind, call.mock.responder, conv)
    return 200, codec.whole(reply, conv, codec.message_id(rid))
