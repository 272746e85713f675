"""Output schemas in each provider's dialect, transformed as the providers' SDKs document it.

A structured answer's schema is JSON Schema; what each API accepts of it differs:

* **OpenAI strict mode** (Chat `response_format`, Responses `text.format`; openai-python
  `lib/_pydantic.py` `to_strict_json_schema`): every object `additionalProperties: false` and
  every property in `required`; `oneOf` becomes `anyOf`; a `$ref` with siblings is unravelled;
  `title`, `default` and `$schema` are dropped; keywords strict mode does not take (lengths,
  `uniqueItems`, `patternProperties`, ...) move into the description. An object whose extra
  keys are free (`dict[str, int]`: `additionalProperties` a schema) cannot be made strict, and
  is refused here, naming the field and the keyword, before anything is sent.
* **Anthropic** (`output_config.format`; anthropic-sdk-python `lib/_parse/_transform.py`
  `transform_schema`): keeps `type`, `anyOf` (`oneOf` becomes it), `allOf`, `$ref`/`$defs`,
  `enum`, `properties`, `required`, `items`, `minItems` of 0 or 1 and a set of string
  `format`s, forces `additionalProperties: false`, and moves every other keyword into the
  description (`{minimum: 1, maximum: 10}`); a `const` becomes a one-value `enum` (kept, where
  the SDK moves it). A node with no type, enum or union is refused.
* **Gemini** (`generationConfig.responseJsonSchema`; python-genai `types.py`,
  `GenerateContentConfig.response_json_schema`: "only the following properties are
  supported"): `$id`, `$defs`, `$ref`, `$anchor`, `type`, `format`, `title`, `description`,
  `enum`, `items`, `prefixItems`, `minItems`, `maxItems`, `minimum`, `maximum`, `anyOf`, `oneOf`,
  `properties`, `additionalProperties`, `required`, `propertyOrdering`; a `const` becomes a
  one-value `enum`, `$schema` is dropped (Gemini answers "Unknown name" for it), any other
  keyword moves into the description.

What moves into a description is still enforced afterwards: nbagent validates every answer
against the schema as the user gave it (`_loop._output_schema.OutputSchema`).
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import ConfigError

# -- OpenAI strict ---------------------------------------------------------------------------

_OPENAI_KEEP = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "enum",
        "const",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "description",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_DROP = frozenset({"title", "default", "$schema", "discriminator", "examples", "$id"})
_OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Keywords whose values are schemas, lists of schemas, maps of schemas.
_SUB = ("items", "not", "contains", "propertyNames", "additionalProperties")
_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")
_MAPS = ("properties", "patternProperties", "$defs")


def _where(path: tuple[str, ...]) -> str:
    """A schema path as the answer's field path ("items[].price"), for the sentences."""
    out = ""
    i = 0
    while i < len(path):
        part = path[i]
        if part in ("properties", "$defs") and i + 1 < len(path):
            out += f".{path[i + 1]}" if out else path[i + 1]
            i += 2
            continue
        if part in _LISTS:
            i += 2  # which branch of a union: the field is the same
            continue
        if part == "items":
            out += "[]"
        i += 1
    return f"field `{out}`" if out else "the answer's root"


def _moved(node: dict[str, Any], extra: dict[str, Any]) -> None:
    """Put keywords the dialect does not take into the description, as the SDKs do."""
    if not extra:
        return
    notes = "{" + ", ".join(f"{k}: {v}" for k, v in extra.items()) + "}"
    described = node.get("description")
    node["description"] = f"{described}\n\n{notes}" if described else notes


def _kept(
    node: dict[str, Any], path: tuple[str, ...], walk: Any, keep: frozenset[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keywords of `node` its dialect takes (`keep`), the schemas among their values
    `walk`ed, and the rest, for the description (`_moved`)."""
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in node.items():
        if key not in keep:
            extra[key] = value
        elif key in _MAPS and isinstance(value, dict):
            out[key] = {k: walk(v, (*path, key, k)) for k, v in value.items()}
        elif key in _LISTS and isinstance(value, list):
            out[key] = [walk(v, (*path, key, str(i))) for i, v in enumerate(value)]
        elif key in _SUB and isinstance(value, dict):
            out[key] = walk(value, (*path, key))
        else:
            out[key] = value
    return out, extra


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = root
    for key in ref.removeprefix("#/").split("/"):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ConfigError(f"output= schema: the reference {ref!r} points nowhere in the schema")
    return node


def openai_strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as OpenAI's strict mode takes it (see the module docstring).

    Args:
        schema: The converted JSON Schema (references inlined).

    Returns:
        A copy with every property required and `additionalProperties: false` on every object.

    Raises:
        ConfigError: A field whose extra keys are free (`additionalProperties` a schema, as
            `dict[str, ...]` gives), naming the field and the keyword.
    """
    root = copy.deepcopy(schema)

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:
            resolved = {**_resolve(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(resolved, path)
        node = {("anyOf" if k == "oneOf" else k): v for k, v in node.items() if k not in _DROP}
        known = node.get("format", "date") in _OPENAI_FORMATS  # another format: described
        out, extra = _kept(node, path, walk, _OPENAI_KEEP if known else _OPENAI_KEEP - {"format"})
        all_of = out.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            out = {**all_of[0], **{k: v for k, v in out.items() if k != "allOf"}}
        if out.get("type") == "object" or "properties" in out:
            more = out.get("additionalProperties", False)
            if more not in (False, None):
                raise ConfigError(
                    f"output= schema: {_where(path)} has `additionalProperties` (free keys, as "
                    "dict[str, ...] gives), which OpenAI's strict structured outputs refuse; "
                    "give it fixed fields, or pass output_mode='tool' or 'prompted'"
                )
            out["additionalProperties"] = False
            props = out.get("properties")
            out["required"] = list(props) if isinstance(props, dict) else []
            out.setdefault("properties", {})
        _moved(out, extra)
        return out

    result: dict[str, Any] = walk(root, ())
    return result


# -- Anthropic -------------------------------------------------------------------------------

# the string formats OpenAI takes, and `uri`
_ANTHROPIC_FORMATS = _OPENAI_FORMATS | {"uri"}


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as Anthropic's structured outputs take it (see the module docstring).

    Args:
        schema: The converted JSON Schema (references inlined).

    Returns:
        A copy with the keywords Anthropic does not take moved into descriptions (nbagent's own
        validation still enforces them) and `additionalProperties: false` on every object.

    Raises:
        ConfigError: A node with no `type`, `enum` or union (an `Any` field), naming the field.
    """

    def walk(node: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise ConfigError(f"output= schema: {_where(path)} is not a schema object")
        node = dict(node)
        out: dict[str, Any] = {}
        defs = node.pop("$defs", None)
        if isinstance(defs, dict):
            out["$defs"] = {k: walk(v, (*path, "$defs", k)) for k, v in defs.items()}
        ref = node.pop("$ref", None)
        if isinstance(ref, str):
            out["$ref"] = ref
            return out
        kind = node.pop("type", None)
        enum = node.pop("enum", None)
        unions = {k: node.pop(k, None) for k in ("anyOf", "oneOf", "allOf")}
        if isinstance(enum, list):
            out["enum"] = enum
        elif "const" in node:
            out["enum"] = [node.pop("const")]  # a one-value enum: kept, where the SDK moves it
        elif isinstance(unions["anyOf"], list) or isinstance(unions["oneOf"], list):
            variants = unions["anyOf"] if isinstance(unions["anyOf"], list) else unions["oneOf"]
            out["anyOf"] = [walk(v, (*path, "anyOf", str(i))) for i, v in enumerate(variants)]
        elif isinstance(unions["allOf"], list):
            out["allOf"] = [
                walk(v, (*path, "allOf", str(i))) for i, v in enumerate(unions["allOf"])
            ]
        elif kind is None:
            raise ConfigError(
                f"output= schema: {_where(path)} has no `type` (an Any field?), which "
                "Anthropic's structured outputs need; give it a type, or pass "
                "output_mode='tool' or 'prompted'"
            )
        if kind is not None:
            out["type"] = kind
        for key in ("description", "title"):
            if isinstance(node.get(key), str):
                out[key] = node.pop(key)
        node.pop("$schema", None)
        if kind == "object":
            props = node.pop("properties", {})
            out["properties"] = {
                k: walk(v, (*path, "properties", k))
                for k, v in (props.items() if isinstance(props, dict) else ())
            }
            node.pop("additionalProperties", None)
            out["additionalProperties"] = False
            if isinstance(node.get("required"), list):
                out["required"] = node.pop("required")
        elif kind == "string":
            fmt = node.pop("format", None)
            if fmt in _ANTHROPIC_FORMATS:
                out["format"] = fmt
            elif fmt is not None:
                node["format"] = fmt
        elif kind == "array":
            items = node.pop("items", None)
            if isinstance(items, dict):
                out["items"] = walk(items, (*path, "items"))
            least = node.pop("minItems", None)
            if least in (0, 1):
                out["minItems"] = least
            elif least is not None:
                node["minItems"] = least
        if "default" in node and node["default"] is None:
            del node["default"]  # says nothing a nullable type does not
        _moved(out, node)
        return out

    return walk(copy.deepcopy(schema), ())


# -- Gemini ----------------------------------------------------------------------------------


_GEMINI_KEEP = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as Gemini's `responseJsonSchema` takes it (see the module docstring)."""

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        node = {k: v for k, v in node.items() if k != "$schema" and (k, v) != ("default", None)}
        const = node.get("const")
        if isinstance(const, (str, int, float)) and "enum" not in node:
            node["enum"] = [node.pop("const")]
        out, extra = _kept(node, path, walk, _GEMINI_KEEP)
        _moved(out, extra)
        return out

    result: dict[str, Any] = walk(schema, ())
    return result
