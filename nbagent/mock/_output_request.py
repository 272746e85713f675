"""Structured outputs at the mock server: what a request asks for, read from its body.

Each wire format as its provider documents it:

* Anthropic: the schema in `output_config.format.schema` (the beta `output_format.schema`
  too); a forced tool in `tool_choice: {type: "tool", name}` or `{type: "any"}`.
* OpenAI Chat: `response_format.json_schema.schema` (llama.cpp's `json_object` with a
  `schema` too); `tool_choice: {type: "function", function: {name}}` or `"required"`.
* Responses: `text.format.schema`; `tool_choice: {type: "function", name}` or `"required"`.
* Gemini: `generationConfig.responseJsonSchema` (or `responseSchema`); `toolConfig.
  functionCallingConfig` in mode `ANY`: one of `allowedFunctionNames` (the only tools the
  model may call then, `gemini_callable`), or any tool.

JSON mode without a schema (Chat's and Responses' `json_object`, Gemini's `responseMimeType:
application/json`) is a contract too: the answer is a JSON object, `JSON_OBJECT` (the schema,
if any, is then in the prompt, where a responder can read it).

A request's schema becomes `Conversation.output_schema`, its forced tool
`Conversation.forced_tool` (`ANY_TOOL` when any tool will do), so a responder can answer in
the shape asked for.
"""

from __future__ import annotations

from typing import Any

ANY_TOOL = "*"  # a request that forces some tool call, not a named one
JSON_OBJECT: dict[str, Any] = {"type": "object"}  # JSON mode's contract when it names no schema
Output = tuple[dict[str, Any] | None, str | None]  # the schema asked for, and the forced tool


def _schema(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def anthropic_output(body: dict[str, Any]) -> Output:
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


def openai_output(body: dict[str, Any]) -> Output:
    fmt = body.get("response_format")
    schema = None
    if isinstance(fmt, dict):
        spec = fmt.get("json_schema")
        if isinstance(spec, dict):
            schema = _schema(spec.get("schema"))
        elif fmt.get("type") == "json_object":
            schema = _schema(fmt.get("schema")) or JSON_OBJECT
    return schema, _openai_choice(body.get("tool_choice"))


def responses_output(body: dict[str, Any]) -> Output:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    schema = _schema(fmt.get("schema")) if isinstance(fmt, dict) else None
    if schema is None and isinstance(fmt, dict) and fmt.get("type") == "json_object":
        schema = JSON_OBJECT
    return schema, _openai_choice(body.get("tool_choice"))


def gemini_output(body: dict[str, Any]) -> Output:
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    schema = _schema(config.get("responseJsonSchema") or config.get("responseSchema"))
    if schema is None and config.get("responseMimeType") == "application/json":
        schema = JSON_OBJECT
    forced = None
    names = _gemini_allowed(body)
    if names is not None:
        forced = names[0] if len(names) == 1 else ANY_TOOL
    return schema, forced


def _gemini_allowed(body: dict[str, Any]) -> list[str] | None:
    """The tool names a request in mode `ANY` allows (`[]`: any tool), or None (not `ANY`)."""
    tool_config = body.get("toolConfig")
    calling = tool_config.get("functionCallingConfig") if isinstance(tool_config, dict) else None
    if not isinstance(calling, dict) or calling.get("mode") != "ANY":
        return None
    names = calling.get("allowedFunctionNames")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def gemini_callable(
    body: dict[str, Any], tools: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The declared tools a Gemini request lets the model call: in mode `ANY` with
    `allowedFunctionNames`, only those."""
    names = _gemini_allowed(body)
    return {n: s for n, s in tools.items() if n in names} if names else tools
