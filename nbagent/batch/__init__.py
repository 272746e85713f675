"""Batch prompting: `nbagent.map` / `nbagent.amap`, one agent per prompt under one rate budget."""

from ._map import RESULT_COLUMNS, BatchProgress, BatchResult, amap, map

__all__ = ["RESULT_COLUMNS", "BatchProgress", "BatchResult", "amap", "map"]
