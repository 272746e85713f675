"""JSON-safe values for the timeline's state: numbers the browser can parse, text of bounded size.

The state is synced to the browser up to ten times a second and written into exported pages, so
every number in it must survive `JSON.parse` (no NaN, no Infinity) and every text is capped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from .._core._budget import Usage
from ..errors import describe

# Caps on text kept in the state: it is synced to the browser up to ten times a second.
TEXT_LIMIT = 20_000
TOOL_TEXT_LIMIT = 8_000
STREAM_LIMIT = 100_000


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters)"


def clip_head(text: str, limit: int) -> str:
    """Keep the end of a long stream: the newest text is what a reader watches."""
    if len(text) <= limit:
        return text
    return f"({len(text) - limit:,} earlier characters) …" + text[-limit:]


def num(value: float | None) -> float | None:
    """A JSON-safe number: JavaScript's JSON.parse rejects NaN and Infinity. The events' fields
    are typed numbers already: only the two non-finite values need catching."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def seconds(value: float | None) -> str:
    """Seconds as the widget writes them ("1.5s"); "—" for none."""
    if value is None:
        return "—"
    return f"{float(value):.1f}s"


def usage_dict(usage: Usage) -> dict[str, Any]:
    """A run's `Usage` as JSON-safe numbers, under its own field names (the counts are ints)."""
    raw = dataclasses.asdict(usage)
    return {k: num(v) if k == "cost_usd" else v for k, v in raw.items()}


def json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def failure_text(kind: str, status_code: int | None, message: str) -> str:
    text = describe(kind) if kind else "error"
    if status_code is not None:
        text += f" (HTTP {status_code})"
    if message:
        text += f": {message}"
    return text
