"""The server's listing as tool specs, and its results as tool outcomes the model reads."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from .._core._messages import ImageBlock, TextBlock
from .._loop._tools import ToolCall, ToolOutcome
from ..providers._base import ToolSpec
from ..providers._error_text import redact

log = logging.getLogger("nbagent._mcp")

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def to_specs(tools: list[Any], server: str) -> tuple[list[ToolSpec], dict[str, str]]:
    """The tools a model can be offered, and those skipped with why (model APIs refuse some
    names; a name listed twice would make calls ambiguous)."""
    specs: list[ToolSpec] = []
    skipped: dict[str, str] = {}
    for t in tools:
        name = str(getattr(t, "name", ""))
        if not _TOOL_NAME.match(name):
            skipped[name] = (
                "its name is not 1-64 letters, digits, '_' or '-', which model APIs require"
            )
            log.warning("MCP server `%s`: skipping tool %r: bad name", server, name)
            continue
        if any(s.name == name for s in specs):
            skipped[name] = "the server listed it twice"
            continue
        schema = getattr(t, "input_schema", None)
        schema = dict(schema) if isinstance(schema, dict) else {}
        schema.setdefault("type", "object")
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
        description = str(getattr(t, "description", None) or getattr(t, "title", None) or "")
        specs.append(ToolSpec(name, description, schema))
    return specs, skipped


def to_outcome(call: ToolCall, result: Any, secrets: tuple[str, ...] = ()) -> ToolOutcome:
    """A `CallToolResult` as the model's tool result. A server that echoes the credentials it
    was sent gets them masked: they would reach the model, the events and the widget."""
    parts: list[TextBlock | ImageBlock] = []
    for item in getattr(result, "content", None) or []:
        parts.extend(_content_part(item))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(TextBlock(json.dumps(structured, ensure_ascii=False, default=str)))
    is_error = bool(getattr(result, "is_error", False))
    if not parts:
        parts.append(TextBlock("(the tool reported an error)" if is_error else "(no output)"))
    if secrets:
        parts = [
            TextBlock(redact(p.text, secrets)) if isinstance(p, TextBlock) else p for p in parts
        ]
    return ToolOutcome(call.id, tuple(parts), is_error, "tool_error" if is_error else "")


def _content_part(item: Any) -> list[TextBlock | ImageBlock]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextBlock(str(getattr(item, "text", "")))]
    if kind == "image":
        mime = getattr(item, "mime_type", None) or "image/png"
        return [ImageBlock(str(getattr(item, "data", "")), str(mime))]
    if kind == "audio":
        mime = getattr(item, "mime_type", None) or "audio"
        size = len(str(getattr(item, "data", ""))) * 3 // 4
        return [TextBlock(f"[audio content ({mime}, about {size} bytes) not shown]")]
    if kind == "resource":
        res = getattr(item, "resource", None)
        uri = str(getattr(res, "uri", ""))
        text = getattr(res, "text", None)
        if text is not None:
            return [TextBlock(f"[resource {uri}]\n{text}")]
        mime = getattr(res, "mime_type", None) or "binary"
        return [TextBlock(f"[resource {uri} ({mime}) not shown]")]
    if kind == "resource_link":
        uri = str(getattr(item, "uri", ""))
        name = str(getattr(item, "name", "") or "")
        return [TextBlock(f"[resource link {name}: {uri}]" if name else f"[resource link {uri}]")]
    dump = getattr(item, "model_dump", None)
    data = dump(mode="json", exclude_none=True) if callable(dump) else item
    return [TextBlock(json.dumps(data, ensure_ascii=False, default=str))]
