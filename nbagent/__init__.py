"""nbagent: an LLM agent loop for Jupyter that makes every failure visible.

Each failure while producing the next message gets one of four actions: retry with backoff,
compact and retry, a tool error result the model can read, or a typed hard failure.
"""

from ._core._budget import Budget, Usage
from ._core._clock import Clock, RealClock, VirtualClock
from ._core._jitter import (
    DecorrelatedJitter,
    EqualJitter,
    FullJitter,
    Jitter,
    NoJitter,
    ProportionalJitter,
)
from ._core._messages import (
    ImageBlock,
    Message,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    load_session,
    save_session,
)
from ._core._pacing import Pacer, PaceRequest
from ._core._policy import JitterSpec
from ._core._presenter import set_presenter as _set_presenter
from ._core._retry import RetryPolicy
from ._loop._agent import Agent
from ._loop._args import ModelSpec
from ._loop._compaction import CompactionContext, CompactionResult, Compactor, StubOldToolOutput
from ._loop._durable_layout import LogTarget
from ._loop._estimate import TokenEstimator
from ._loop._limiter import RateLimiter
from ._loop._output_schema import OutputMode, OutputSchema
from ._loop._results import RunHandle, RunResult
from ._loop._retry_budget import RetryBudget
from ._loop._summaries import DefaultCompaction, Summarize
from ._loop._tools import Tool, ToolCall, ToolOutcome, ToolSource, tool
from ._mcp import MCPSource
from ._watch import RetryAmplification, Watcher, guard, watch, watching
from .batch import BatchEstimate, BatchHandle, BatchResult, amap, map
from .batch import start as start_map
from .demo import install as _install_demo
from .errors import (
    Aborted,
    Action,
    AuthFailed,
    BadRequest,
    BudgetExceeded,
    ConfigError,
    ContentFiltered,
    ContextOverflow,
    EmptyResponse,
    HostError,
    InvalidResponse,
    LengthResumeExhausted,
    ModelNotFound,
    NbAgentError,
    OutputInvalid,
    OutputIssue,
    OutputTruncated,
    Overloaded,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    RecordingFileError,
    SchemaRejected,
    ScriptExhausted,
    ServerError,
    SessionFileError,
    StreamInterrupted,
    ToolPairingError,
    TransportError,
    classify,
)
from .notebook import NotebookPresenter as _NotebookPresenter
from .providers._scripted import Partial, Reply, ScriptedModel, ToolUse, fault
from .tracing import instrument

# The one place the version lives: hatchling reads it ([tool.hatch.version] in pyproject.toml),
# so the package metadata and `nbagent --version` say the same. Add its CHANGELOG.md entry.
__version__ = "0.1.0"

# The seams the core defines, filled here, explicitly: the model string "demo" (the demo model
# behind the loopback mock server) and how a run is shown in a notebook (the live widget).
_install_demo()
_set_presenter(_NotebookPresenter())

__all__ = [
    "Aborted",
    "Action",
    "Agent",
    "AuthFailed",
    "BadRequest",
    "BatchEstimate",
    "BatchHandle",
    "BatchResult",
    "Budget",
    "BudgetExceeded",
    "Clock",
    "CompactionContext",
    "CompactionResult",
    "Compactor",
    "ConfigError",
    "ContentFiltered",
    "ContextOverflow",
    "DecorrelatedJitter",
    "DefaultCompaction",
    "EmptyResponse",
    "EqualJitter",
    "FullJitter",
    "HostError",
    "ImageBlock",
    "InvalidResponse",
    "Jitter",
    "JitterSpec",
    "LengthResumeExhausted",
    "LogTarget",
    "MCPSource",
    "Message",
    "ModelNotFound",
    "ModelSpec",
    "NbAgentError",
    "NoJitter",
    "OpaqueBlock",
    "OutputInvalid",
    "OutputIssue",
    "OutputMode",
    "OutputSchema",
    "OutputTruncated",
    "Overloaded",
    "PaceRequest",
    "Pacer",
    "Partial",
    "ProportionalJitter",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "RateLimiter",
    "RealClock",
    "RecordingFileError",
    "RedactedThinkingBlock",
    "Reply",
    "RetryAmplification",
    "RetryBudget",
    "RetryPolicy",
    "RunHandle",
    "RunResult",
    "SchemaRejected",
    "ScriptExhausted",
    "ScriptedModel",
    "ServerError",
    "SessionFileError",
    "StreamInterrupted",
    "StubOldToolOutput",
    "Summarize",
    "TextBlock",
    "ThinkingBlock",
    "TokenEstimator",
    "Tool",
    "ToolCall",
    "ToolOutcome",
    "ToolPairingError",
    "ToolResultBlock",
    "ToolSource",
    "ToolUse",
    "ToolUseBlock",
    "TransportError",
    "Usage",
    "VirtualClock",
    "Watcher",
    "amap",
    "classify",
    "fault",
    "guard",
    "instrument",
    "load_session",
    "map",
    "save_session",
    "start_map",
    "tool",
    "watch",
    "watching",
]


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext nbagent`: register the `%%agent` cell magic and `%agent_reset`."""
    from ._magic import load_ipython_extension as load

    load(ipython)
