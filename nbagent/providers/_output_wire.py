"""Structured outputs on the wire: which modes a provider takes, and where each format puts them.

The loop asks for a structured answer with an `OutputFormat` on the `ModelRequest`; it never
sees a wire shape. Here, per wire format, as each provider documents it:

* Anthropic Messages: native `output_config: {format: {type: "json_schema", schema}}`
  (generally available; the earlier beta `output_format`, sent with `anthropic-beta:
  structured-outputs-2025-11-13`, is now refused as deprecated); tool mode `tool_choice:
  {type: "tool", name}` (`{type: "any"}` beside other tools).
* OpenAI Chat (Azure, OpenRouter, Ollama, llama.cpp, vLLM): native `response_format: {type:
  "json_schema", json_schema: {name, schema, strict}}`, or the form llama-cpp-python's server
  takes instead (its pydantic model allows only `text` and `json_object`), `{type:
  "json_object", schema}`; tool mode `tool_choice: {type: "function", function: {name}}`
  (`"required"` beside other tools).
* OpenAI Responses: native `text: {format: {type: "json_schema", name, schema, strict}}` (flat,
  no `json_schema` wrapper); tool mode `tool_choice: {type: "function", name}` (`"required"`).
* Gemini: native `generationConfig: {responseMimeType: "application/json",
  responseJsonSchema}`; tool mode `toolConfig: {functionCallingConfig: {mode: "ANY",
  allowedFunctionNames: [name]}}` (no names beside other tools).

Prompted mode puts the schema in the system prompt (the loop does), so nothing goes here.

Which mode `auto` picks (`output_modes`): native where the provider and model have it —
Anthropic's Claude 4.1 and later (Opus 4.1, Sonnet 4.5, Haiku 4.5, ...; and the demo model),
OpenAI's gpt-4o (from 2024-08-06), gpt-4.1, gpt-5 and the o-series, any other server speaking
the Chat format (it is asked with `strict: false`: llama.cpp's `llama-server` turns the schema
into a grammar, vLLM into guided decoding, Ollama into its format), Gemini 3 and later, and
Gemini 2.x when no other tool is offered (its JSON mode does not combine with function calling:
"Function calling with a response mime type: 'application/json' is unsupported",
googleapis/python-genai#867); else tool mode. When a server refuses the native form, `auto`
tries the next (`native_forms`, then tool mode) and the provider keeps the refusal
(`refused_output_forms`), so its next run starts with what it takes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from ..errors import ConfigError
from ._base import Dialect, OutputFormat, Provider, ProviderBase
from ._output_schemas import anthropic_schema, gemini_schema, openai_strict_schema

Mode = Literal["native", "tool", "prompted"]
Form = Literal["json_schema", "json_object"]

_CLAUDE_NATIVE = re.compile(r"claude-(opus|sonnet|haiku)-(4-[1-9](?!\d)|4\.[1-9]|[5-9](?!\d))")
_OPENAI_NATIVE = re.compile(
    r"(^|[/_.-])(gpt-4o(?!-2024-05-13)|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1(?!-preview|-mini)|o3|o4|"
    r"gpt-oss)",
    re.I,
)
OLD_GEMINI = re.compile(r"(^|/)gemini-(1|2)(\.|-|$)")  # 1.x and 2.x (`_gemini_body` too)
# the dialects whose schema is converted, and how (OpenAI's strict mode: strict=True)
_SCHEMAS = {"openai": openai_strict_schema, "anthropic": anthropic_schema, "gemini": gemini_schema}
_ALL: tuple[Mode, ...] = ("native", "tool", "prompted")
_NO_NATIVE: tuple[Mode, ...] = ("tool", "prompted")


def output_dialect(provider: Provider) -> Dialect | None:
    """The provider's structured-output dialect (its `output_dialect`), None when it has no
    native form (a provider of the user's own: tool and prompted modes only)."""
    return provider.output_dialect if isinstance(provider, ProviderBase) else None


def output_modes(provider: Provider, *, tools: bool) -> tuple[Mode, ...]:
    """The modes `provider` takes for its model, `auto`'s pick first. `tools`: other tools are
    offered beside the answer."""
    if not isinstance(provider, ProviderBase) or provider.output_dialect is None:
        return _NO_NATIVE
    dialect, model = provider.output_dialect, provider.model
    if dialect == "any" or dialect == "openai-compatible" or provider.native_outputs:
        return _ALL
    if dialect == "anthropic":
        native = bool(_CLAUDE_NATIVE.search(model))
    elif dialect == "openai":
        native = bool(_OPENAI_NATIVE.search(model))
    else:  # gemini
        native = not (tools and OLD_GEMINI.search(model))
    return _ALL if native else ("tool", "native", "prompted")


def native_forms(provider: Provider) -> tuple[Form, ...]:
    """The native forms `provider` may take, best first: a server speaking the Chat format
    other than OpenAI's own may refuse `json_schema` and take `json_object` with the schema
    (llama-cpp-python); every other provider has its one native form."""
    if output_dialect(provider) == "openai-compatible":
        return ("json_schema", "json_object")
    return ("json_schema",)


def wire_format(
    provider: Provider,
    mode: Mode,
    *,
    name: str,
    schema: dict[str, Any],
    description: str = "",
    form: Form = "json_schema",
) -> OutputFormat:
    """The request's `OutputFormat` for `provider`: the schema in its dialect (checked now,
    before anything is sent), and whether it is strict.

    Args:
        provider: The provider the request goes to.
        mode: "native", "tool" or "prompted".
        name: The schema's name (the output tool's, in tool mode).
        schema: The converted JSON Schema.
        description: What the answer is, for the model; "" for nothing.
        form: The native form (one of `native_forms(provider)`).

    Returns:
        What the request carries to the provider.

    Raises:
        ConfigError: The mode is native and the provider has none, or the schema cannot be put
            in the provider's dialect (a sentence naming the field and the keyword).
    """
    dialect = output_dialect(provider)
    if mode != "native":
        return OutputFormat(mode, name, schema, description)
    if dialect is None:
        raise ConfigError(
            f"output_mode='native': the provider {provider.name!r} has no native structured "
            "output; use output_mode='tool' or 'prompted' (or 'auto')"
        )
    convert = _SCHEMAS.get(dialect)
    if convert is None:  # the schema as it is, in the form asked for
        return OutputFormat(mode, name, schema, description, form=form)
    return OutputFormat(mode, name, convert(schema), description, strict=dialect == "openai")


# -- the bodies --------------------------------------------------------------------------------


def _force_tool(body: dict[str, Any], named: Any, any_tool: Any) -> None:
    """Force the output tool: by name when it is the only tool offered, else any tool."""
    tools = body.get("tools")
    body["tool_choice"] = named if isinstance(tools, list) and len(tools) == 1 else any_tool


def _openai_spec(fmt: OutputFormat) -> dict[str, Any]:
    """An OpenAI json_schema format's name, schema, strictness and description."""
    spec: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema, "strict": fmt.strict}
    if fmt.description:
        spec["description"] = fmt.description
    return spec


def add_anthropic_output(body: dict[str, Any], fmt: OutputFormat | None) -> None:
    """Anthropic Messages: native `output_config.format`, or the forced output tool."""
    if fmt is None:
        return
    if fmt.mode == "native":
        config = body.get("output_config")
        config = dict(config) if isinstance(config, dict) else {}
        config["format"] = {"type": "json_schema", "schema": fmt.schema}
        body["output_config"] = config
    elif fmt.mode == "tool" and "tool_choice" not in body:
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
            return  # a forced tool call and extended thinking do not go together: auto it is
        _force_tool(body, {"type": "tool", "name": fmt.name}, {"type": "any"})


def add_openai_output(body: dict[str, Any], fmt: OutputFormat | None) -> None:
    """OpenAI Chat Completions (and every server speaking it): `response_format` json_schema
    (or json_object with the schema), or the forced output tool."""
    if fmt is None:
        return
    if fmt.mode == "native" and fmt.form == "json_object":
        body["response_format"] = {"type": "json_object", "schema": fmt.schema}
    elif fmt.mode == "native":
        body["response_format"] = {"type": "json_schema", "json_schema": _openai_spec(fmt)}
    elif fmt.mode == "tool" and "tool_choice" not in body:
        _force_tool(body, {"type": "function", "function": {"name": fmt.name}}, "required")


def add_responses_output(body: dict[str, Any], fmt: OutputFormat | None) -> None:
    """OpenAI Responses: `text.format` (flat: no `json_schema` wrapper), or the forced tool."""
    if fmt is None:
        return
    if fmt.mode == "native":
        text = body.get("text")
        spec = {"type": "json_schema", **_openai_spec(fmt)}
        body["text"] = {**(text if isinstance(text, dict) else {}), "format": spec}
    elif fmt.mode == "tool" and "tool_choice" not in body:
        _force_tool(body, {"type": "function", "name": fmt.name}, "required")


def add_gemini_output(body: dict[str, Any], fmt: OutputFormat | None) -> None:
    """Gemini: `responseMimeType` + `responseJsonSchema` in the generationConfig, or function
    calling in mode ANY (naming the output function when it is the only one)."""
    if fmt is None:
        return
    if fmt.mode == "native":
        config = body.setdefault("generationConfig", {})
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = fmt.schema
        config.pop("responseSchema", None)  # the two are mutually exclusive
    elif fmt.mode == "tool" and "toolConfig" not in body:
        groups = body.get("tools")
        names = [
            d.get("name")
            for g in (groups if isinstance(groups, list) else [])
            if isinstance(g, dict)
            for d in g.get("functionDeclarations") or []
            if isinstance(d, dict)
        ]
        calling: dict[str, Any] = {"mode": "ANY"}
        if names == [fmt.name]:
            calling["allowedFunctionNames"] = [fmt.name]
        body["toolConfig"] = {"functionCallingConfig": calling}
