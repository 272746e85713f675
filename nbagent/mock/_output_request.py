"""Structured outputs at the mock server: what a request asks for, read from its body.

Each wire format as its provider documents it:

* Anthropic: the schema in `output_config.format.schema` (the beta `output_format.schema`
  too); a forced tool in `tool_choice: {type: "tool", name}` or `{type: "any"}`.
* OpenAI Chat: `response_format.json_schema.schema` (llama.cpp's `json_object` with a
  `schema` too); `tool_choice: {type: "function", function: {name}}` or `"required"`.
* Responses: `text.format.schema`; `tool_choice: {type: "function", name}` or `"required"`.
* Gemini: `generationConfig.responseJsonSchema` (or `responseSchema`); `toolConfig.
  functionCallingConfig` in mode `ANY` (naming one of `allowedFunctionNames`, or any).

A request's schema becomes `Conversation.output_schema`, its forced tool
`Conversation.forced_tool` (`ANY_TOOL` when any tool will do), so a responder can answer in
the shape asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ANY_TOOL",
    "anthropic_output",
    "gemini_output",
    "openai_output",
    "responses_output",
]

ANY_TOOL = "*"  # a request that forces some tool call, not a named one


def _schema(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def anthropic_output(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    if not isinstance(fmt, dict):
        beta = body.get("output_format")
        fmt = beta if isinstance(beta, dict) else None
    schema = _schema(fmt.get("schema")) if isinstance(fmt, dict) else None
    choice = body.get("tool_choice")
    forced = None
    if isinstance(choice, dict):
        if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
            forced = choice["name"]
        elif choice.get("type") == "any":
            forced = ANY_TOOL
    return schema, forced


def _openai_choice(choice: Any) -> str | None:
    if choice == "required":
        return ANY_TOOL
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else choice.get("name")
        return name if isinstance(name, str) else None
    return None


def openai_output(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    fmt = body.get("response_format")
    schema = None
    if isinstance(fmt, dict):
        spec = fmt.get("json_schema")
        if isinstance(spec, dict):
            schema = _schema(spec.get("schema"))
        elif fmt.get("type") == "json_object":
            schema = _schema(fmt.get("schema"))
    return schema, _openai_choice(body.get("tool_choice"))


def responses_output(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    schema = _schema(fmt.get("schema")) if isinstance(fmt, dict) else None
    return schema, _openai_choice(body.get("tool_choice"))


def gemini_output(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    schema = _schema(config.get("responseJsonSchema") or config.get("responseSchema"))
    tool_config = body.get("toolConfig")
    calling = tool_config.get("functionCallingConfig") if isinstance(tool_config, dict) else None
    forced = None
    if isinstance(calling, dict) and calling.get("mode") == "ANY":
        names = calling.get("allowedFunctionNames")
        only = names[0] if isinstance(names, list) and len(names) == 1 else None
        forced = only if isinstance(only, str) else ANY_TOOL
    return schema, forced
