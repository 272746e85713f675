"""What a run reads: of its agent (`AgentParts`), and of itself (`RunState`).

A run's collaborators (`Requester` in `_request.py`, `Run` in `_run.py`, the doors in
`_running.py`) read the agent's configuration directly, when they use it, instead of having each
setting handed to them one by one. `AgentParts` names what they read, so none of them imports
`_agent.py` (which imports them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._core._budget import Usage

if TYPE_CHECKING:
    import random

    from .._core._budget import Budget
    from .._core._clock import Clock
    from .._core._messages import Message
    from .._core._pacing import Pacer
    from .._core._retry import RetryPolicy
    from ..events import EventBus, Subscriber
    from ..providers import Provider
    from ._compaction import Compactor
    from ._output_schema import OutputMode, OutputSchema, OutputValidator
    from ._toolbox import Toolbox


@dataclass
class RunState:
    """What one run knows about itself while it runs."""

    run_id: str
    started: float
    deadline: float | None
    turn: int = 0
    usage: Usage = field(default_factory=Usage)
    model_index: int = 0
    reasks: int = 0  # structured answers asked for again, this run


class AgentParts(Protocol):
    """What a run reads of its `Agent` (see `Agent` for what each is)."""

    _run: RunState | None
    _providers: list[Provider]
    _rng: random.Random
    _validators: list[OutputValidator]
    toolbox: Toolbox
    output: OutputSchema | None
    output_mode: OutputMode
    output_retries: int
    clock: Clock
    budget: Budget
    events: EventBus
    agent_id: str
    compaction: Compactor
    system: str | None
    compaction_threshold: float
    max_tokens: int
    options: dict[str, Any]
    cache: bool
    context_window: int | None
    max_compactions_per_step: int
    max_length_resumes: int
    history: list[Message]

    @property
    def models(self) -> list[str]: ...
    @property
    def retry(self) -> RetryPolicy: ...
    def pacer_for(self, provider: Provider) -> Pacer | None: ...
    def subscribe(self, fn: Subscriber) -> Callable[[], None]: ...
    def _commit(self, history: list[Message], new: list[Message]) -> int: ...
    async def aclose(self) -> None: ...
