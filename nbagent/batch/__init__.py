"""Batch prompting: `nbagent.map` / `amap` / `start`, one agent per prompt under one rate
budget, in this process or on Ray (`backend="ray"`), or one request per prompt through the
provider's own batch API (`backend="provider"`, picked up again with `resume`)."""

from ._estimate import BatchEstimate
from ._frames import RESULT_COLUMNS, BatchResult
from ._map import BatchHandle, amap, map, resume, start
from ._options import Prompts
from ._progress import BatchProgress

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
