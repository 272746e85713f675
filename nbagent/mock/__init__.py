"""The loopback mock provider and the offline demo model.

``serve()`` / ``MockServer`` run a real HTTP server on 127.0.0.1 speaking the Anthropic Messages
(``POST /v1/messages``) and OpenAI Chat Completions (``POST /v1/chat/completions``) wire formats,
with scripted or random faults, a token-bucket rate limiter and a context window.
``shared_server()`` is the process-wide server behind ``model="demo"``.

Fault strings: ``kind[=value][:key=value[,key=value]]``. Kinds: ``ok``, ``429`` (``retry_after``),
``quota``, ``529``, ``overloaded_midstream``, ``500``/``502``/``503``/``504``, ``400``, ``401``,
``402``, ``403``, ``404``, ``408``, ``409``, ``413``, ``overflow``, ``close``,
``drop_after_tokens=N``, ``malformed``, ``stall=S``, ``empty``, ``slow=S``; any of them takes
``should_retry=true|false``.
"""

from nbagent.mock.cli import main
from nbagent.mock.conversation import Conversation, parse_request
from nbagent.mock.demo_model import DemoReply, DemoToolCall, demo_reply
from nbagent.mock.faults import Fault, FaultPlan, parse_fault, parse_faults
from nbagent.mock.ratelimit import RateDecision, RateLimit
from nbagent.mock.records import RequestRecord
from nbagent.mock.server import MockServer, serve, shared_server

__all__ = [
    "Conversation",
    "DemoReply",
    "DemoToolCall",
    "Fault",
    "FaultPlan",
    "MockServer",
    "RateDecision",
    "RateLimit",
    "RequestRecord",
    "demo_reply",
    "main",
    "parse_fault",
    "parse_faults",
    "parse_request",
    "serve",
    "shared_server",
]
