"""nbagent's error taxonomy, and `classify`, the one place where failures become actions.

Every failure while the agent produces its next message gets exactly one of four actions
(`Action.RETRY`, `Action.COMPACT`, `Action.TOOL_RESULT`, `Action.FAIL`); a structured answer
that breaks its schema gets the third action's other form, `Action.REASK`: the errors go back to
the model, as a failed tool's do. The tree::

    NbAgentError
    ├── ConfigError                 missing key, malformed URL, unknown model, bad argument
    │   ├── RecordingFileError      a recording that cannot be read or written
    │   └── SchemaRejected          a provider's 400 refusing the output schema -> FAIL, never
    │                               retried (also a BadRequest: the provider's fields are kept)
    ├── SessionFileError            a session file that cannot be read back
    ├── ToolPairingError            a tool_use without its tool_result (strict loading)
    ├── HostError                   an event handler, widget or session save raised
    ├── Aborted                     cancellation: task.cancel(), Stop button, KeyboardInterrupt
    ├── BudgetExceeded              cost, tokens, wall clock or turns passed
    ├── LengthResumeExhausted       max_tokens with no content, again and again
    ├── ScriptExhausted             a ScriptedModel was asked for more than its script holds
    ├── OutputInvalid               a structured answer: not JSON, off the schema, a validator
    │                               said no (its `OutputIssue`s: path, message) -> REASK
    ├── OutputTruncated             a structured answer cut at max_tokens -> FAIL, never reasked
    └── ProviderError               anything a model provider answered (or failed to)
        ├── RateLimited             429                                  -> RETRY
        │   └── QuotaExceeded       quota, credits, spend cap, far reset  -> FAIL
        ├── Overloaded              529 / overloaded_error               -> RETRY
        ├── ServerError             500 502 503 504 408 409 425          -> RETRY
        ├── TransportError          connect, DNS, TLS, reset, timeouts   -> RETRY
        ├── StreamInterrupted       broken stream, bad SSE, error event  -> RETRY
        ├── EmptyResponse           200 with an empty message            -> RETRY (once)
        ├── ContextOverflow         400 "prompt is too long" & co.       -> COMPACT
        ├── AuthFailed              401, 403                             -> FAIL
        ├── ModelNotFound           404 model                            -> FAIL (or fallback)
        ├── BadRequest              other 4xx, a request-validation body -> FAIL
        ├── InvalidResponse         2xx that does not decode, too large  -> FAIL
        └── ContentFiltered         content_filter, refusal, safety      -> FAIL

Errors meant for the model (a failed tool) are not exceptions of this tree: they become a
`ToolResult(is_error=True)` that the model reads. `classify(error, phase="tool")` says so.
A refusal of a structured answer is a `ContentFiltered` like any other refusal: never reasked.
"""

from __future__ import annotations

from ._base import (
    Aborted,
    Action,
    BudgetExceeded,
    ConfigError,
    HostError,
    LengthResumeExhausted,
    NbAgentError,
    OutputInvalid,
    OutputIssue,
    OutputTruncated,
    ScriptExhausted,
    SessionFileError,
    ToolPairingError,
)
from ._base import (
    RecordingFileError as RecordingFileError,
)
from ._classify import classify
from ._classify import error_class as error_class
from ._provider import (
    AuthFailed,
    BadRequest,
    ContentFiltered,
    ContextOverflow,
    EmptyResponse,
    InvalidResponse,
    ModelNotFound,
    Overloaded,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    SchemaRejected,
    ServerError,
    StreamInterrupted,
    TransportError,
    describe,
)
from ._provider import (
    set_provider_label as set_provider_label,
)

__all__ = [
    "Aborted",
    "Action",
    "AuthFailed",
    "BadRequest",
    "BudgetExceeded",
    "ConfigError",
    "ContentFiltered",
    "ContextOverflow",
    "EmptyResponse",
    "HostError",
    "InvalidResponse",
    "LengthResumeExhausted",
    "ModelNotFound",
    "NbAgentError",
    "OutputInvalid",
    "OutputIssue",
    "OutputTruncated",
    "Overloaded",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "SchemaRejected",
    "ScriptExhausted",
    "ServerError",
    "SessionFileError",
    "StreamInterrupted",
    "ToolPairingError",
    "TransportError",
    "classify",
    "describe",
]

for _name in (*__all__, "RecordingFileError", "set_provider_label"):
    globals()[_name].__module__ = __name__  # shown, pickled and documented as nbagent.errors.X
