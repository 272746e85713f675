"""`Agent(...)`'s keyword options besides `model` and `output`, as one TypedDict, so the typed
overloads of `Agent.__init__` (one per kind of `output=`) name them once, and those of
`nbagent.map` / `amap` (which hand them to each agent) build on them. What each means is in
`Agent`'s docstring; the implementation's signature, with the defaults, is the one that runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from typing_extensions import TypedDict

from .._core._budget import Budget
from .._core._clock import Clock
from .._core._messages import Message
from .._core._pacing import Pacer
from .._core._retry import RetryPolicy
from ..events import Subscriber
from ..recording import Recorder
from ._compaction import Compactor
from ._durable_layout import LogTarget
from ._output_schema import OutputMode
from ._tools import Tool, ToolSource


class AgentFields(TypedDict, total=False):
    """The keyword options of `Agent(...)` but `output=` and `limiter=` (which a batch on Ray
    also takes as "process")."""

    tools: Iterable[Tool | ToolSource | Callable[..., Any]]
    system: str | None
    retry: RetryPolicy | None
    budget: Budget | None
    compaction: Compactor | None
    clock: Clock | None
    subscribers: Iterable[Subscriber]
    max_tokens: int
    max_length_resumes: int
    max_compactions_per_step: int
    context_window: int | None
    compaction_threshold: float
    allowed_tools: Iterable[str] | None
    tool_timeout: float | None
    strict_tool_pairing: bool
    history: Sequence[Message]
    api_key: str | None
    base_url: str | None
    options: dict[str, Any] | None
    cache: bool
    log: LogTarget | None
    record: str | os.PathLike[str] | Recorder | None
    output_mode: OutputMode
    output_retries: int


class AgentOptions(AgentFields, total=False):
    """The keyword options of `Agent(...)` but `output=` (see `Agent`)."""

    limiter: Pacer | bool
