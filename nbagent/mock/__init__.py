"""The loopback mock provider.

``with serve(...)`` or ``with MockServer(...)`` runs a real HTTP server on 127.0.0.1 speaking
the Anthropic Messages (``POST /v1/messages``), OpenAI Chat Completions
(``POST /v1/chat/completions``, also at Azure's paths), OpenAI Responses
(``POST /v1/responses``) and Gemini
(``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``) wire formats, found by path,
with scripted or random faults, a token-bucket rate limiter and a context window. It keeps a bounded
window of the requests it received (``max_records``; ``dropped_requests`` counts the rest).
``shared_server()`` is the process-wide server behind ``model="demo"``. What it answers comes
from a responder (the demo model, `nbagent.demo.demo_reply`, unless another is given).
``MockServer(record=path)`` appends every exchange it serves to a recording
(`nbagent.recording`); ``MockServer(replay=path, speed=1.0)`` answers with a recording's answers
instead, in order and at their recorded pace, and names a request that does not match.

It also emulates the providers' batch APIs (Anthropic's Message Batches, OpenAI's Batch API and
Files, Gemini's batch mode), each item answered through the fault script and the responder, on a
batch clock a test can move (``batch_duration_s``, ``expire_after_s``, ``batch_clock``,
``advance_batches``); see `nbagent.mock._batches` for the endpoints, options, faults and counters.

Every endpoint is a row of one route table (method, path pattern, handler; `nbagent.mock._routes`)
and every request one `Call` (method, path ``params``, ``query``, ``headers``, ``identity``, the
body, and the ways to answer). ``MockServer(routes=[(method, pattern, handler), ...])`` and
``MockServer.add_route(method, pattern, handler)`` add rows, tried before the built-in ones;
``handler(call)`` keeps the request (``call.record(status)``) and answers it
(``call.send_json(status, body)``, or ``call.head``, ``call.chunk`` and ``call.end`` for a
stream). ``MockServer(on_request=hook)`` calls ``hook(call, status)`` after each request is
answered (0: the connection closed without an answer), for counting arrivals by status or by
client.

Fault strings: ``kind[=value][:key=value[,key=value]]``. Kinds: ``ok``, ``429`` (``retry_after``),
``quota``, ``529``, ``overloaded_midstream``, ``500``/``502``/``503``/``504``, ``400``, ``401``,
``402``, ``403``, ``404``, ``408``, ``409``, ``413``, ``overflow``, ``close``,
``drop_after_tokens=N``, ``malformed``, ``stall=S``, ``no_finish_reason`` (the whole answer, a
usage report and the end marker with no finish reason, then a clean end), ``cut_after_done`` (a
few deltas and the end marker, with neither, then a clean end), ``empty``, ``slow=S``
(``invalid`` is ``400``, ``overloaded`` is ``529``); for structured answers ``invalid_json``
(not JSON), ``schema_mismatch`` (valid JSON off the schema), ``refusal`` (the format's own
refusal) and ``truncated`` (cut at max_tokens); any of them takes ``should_retry=true|false``.
A ``target:`` prefix aims an entry at a batch endpoint instead (``create:429``, ``create:lost``,
``retrieve:503``, ``results:cut``), where ``lost`` and ``cut`` also apply. In Gemini's format
``429`` is a per-minute quota whose wait is in the body (``RetryInfo``), ``quota`` a per-day
quota, and ``529`` a 503 ``UNAVAILABLE``.
"""

from ._answer_faults import answer_fault
from ._batches import BatchCounts, MockBatch
from ._call import Call, Endpoint
from ._cli import main
from ._codec import Route
from ._conversation import (
    Conversation,
    ToolResult,
    ToolUse,
    Turn,
    estimate_tokens,
)
from ._faults import Fault, FaultPlan, parse_fault, parse_faults
from ._formats import parse_request, route
from ._ratelimit import RateDecision, RateLimit
from ._records import RequestRecord
from ._reply import (
    MockReply,
    MockToolCall,
    Responder,
    StopReason,
    default_responder,
    set_default_responder,
    split_words,
)
from ._server import MockServer, serve, shared_server

__all__ = [
    "BatchCounts",
    "Call",
    "Conversation",
    "Endpoint",
    "Fault",
    "FaultPlan",
    "MockBatch",
    "MockReply",
    "MockServer",
    "MockToolCall",
    "RateDecision",
    "RateLimit",
    "RequestRecord",
    "Responder",
    "Route",
    "StopReason",
    "ToolResult",
    "ToolUse",
    "Turn",
    "answer_fault",
    "default_responder",
    "estimate_tokens",
    "main",
    "parse_fault",
    "parse_faults",
    "parse_request",
    "route",
    "serve",
    "set_default_responder",
    "shared_server",
    "split_words",
]
