"""Batch prompting: `nbagent.map` / `amap` / `start`, one agent per prompt under one rate
budget, in this process or on Ray (`backend="ray"`), or one request per prompt through the
provider's own batch API (`backend="provider"`, picked up again with `resume`)."""

from ._map import (
    RESULT_COLUMNS,
    BatchEstimate,
    BatchHandle,
    BatchProgress,
    BatchResult,
    amap,
    map,
    resume,
    start,
)
from ._options import Prompts

__all__ = [
    "RESULT_COLUMNS",
    "BatchEstimate",
    "BatchHandle",
    "BatchProgress",
    "BatchResult",
    "Prompts",
    "amap",
    "map",
    "resume",
    "start",
]
