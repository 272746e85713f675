"""Batch prompting: `nbagent.map` / `amap` / `start`, one agent per prompt under one rate
budget, in this process or on Ray (`backend="ray"`)."""

from ._map import RESULT_COLUMNS, BatchHandle, BatchProgress, BatchResult, amap, map, start
from ._options import Prompts

__all__ = [
    "RESULT_COLUMNS",
    "BatchHandle",
    "BatchProgress",
    "BatchResult",
    "Prompts",
    "amap",
    "map",
    "start",
]
