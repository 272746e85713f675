"""nbagent: an LLM agent loop for Jupyter that makes every failure visible.

Each failure while producing the next message gets one of four actions: retry with backoff,
compact and retry, a tool error result the model can read, or a typed hard failure.
"""

from .agent import Agent, RunHandle, RunResult
from .batch import BatchResult, amap, map
from .budget import Budget, Usage
from .clock import RealClock, VirtualClock
from .compaction import DefaultCompaction, StubOldToolOutput, Summarize, TokenEstimator
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
    Overloaded,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    ScriptExhausted,
    ServerError,
    SessionFileError,
    StreamInterrupted,
    ToolPairingError,
    TransportError,
    classify,
)
from .limiter import RateLimiter, RetryBudget
from .mcp_source import MCPSource
from .messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    load_session,
    save_session,
)
from .providers.scripted import Partial, Reply, ScriptedModel, ToolUse, fault
from .retry import RetryPolicy
from .tools import Tool, ToolCall, ToolOutcome, ToolSource, tool

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "Action",
    "Agent",
    "AuthFailed",
    "BadRequest",
    "BatchResult",
    "Budget",
    "BudgetExceeded",
    "ConfigError",
    "ContentFiltered",
    "ContextOverflow",
    "DefaultCompaction",
    "EmptyResponse",
    "HostError",
    "ImageBlock",
    "InvalidResponse",
    "LengthResumeExhausted",
    "MCPSource",
    "Message",
    "ModelNotFound",
    "NbAgentError",
    "Overloaded",
    "Partial",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "RateLimiter",
    "RealClock",
    "Reply",
    "RetryBudget",
    "RetryPolicy",
    "RunHandle",
    "RunResult",
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
    "amap",
    "classify",
    "fault",
    "load_session",
    "map",
    "save_session",
    "tool",
]


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext nbagent`: register the `%%agent` cell magic and `%agent_reset`."""
    from .notebook.magic import load_ipython_extension as load

    load(ipython)
