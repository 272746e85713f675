"""JSON schemas from Python signatures, and a validator for the schemas tools declare.

The validator covers what tool schemas use in practice (types, enum/const, properties, required,
additionalProperties, items, anyOf/oneOf, numeric and length bounds); its messages are written
for the model, which has to fix its arguments from them.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

from ..errors import ConfigError

__all__ = ["schema_from_function", "validate"]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}


def _type_schema(tp: Any, where: str) -> dict[str, Any]:
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    schema: dict[str, Any]
    if origin is typing.Annotated:
        schema = _type_schema(args[0], where)
        for meta in args[1:]:
            if isinstance(meta, str):
                schema["description"] = meta
        return schema
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a, where) for a in args]}
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple, set, frozenset):
        schema = {"type": "array"}
        if args and not (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            if origin is tuple:
                schema["prefixItems"] = [_type_schema(a, where) for a in args]
            else:
                schema["items"] = _type_schema(args[0], where)
        elif args:
            schema["items"] = _type_schema(args[0], where)
        return schema
    if origin is dict or tp is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            if args[0] is not str:
                raise ConfigError(f"{where}: dict keys must be str for a JSON schema")
            schema["additionalProperties"] = _type_schema(args[1], where)
        return schema
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    name = getattr(tp, "__name__", repr(tp))
    raise ConfigError(
        f"{where} has type {name}, which has no JSON schema; use str, int, float, bool, "
        "list[...], dict[str, ...], Literal[...], an Enum, or Optional of these"
    )


def _doc_params(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and the `Args:` entries (Google style)."""
    text = inspect.cleandoc(doc or "")
    m = re.search(r"^(Args|Arguments|Parameters):\s*$", text, flags=re.MULTILINE)
    if not m:
        return text.strip(), {}
    desc = text[: m.start()].strip()
    params: dict[str, str] = {}
    current = None
    for line in text[m.end() :].splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            break  # next section (Returns:, Raises:)
        pm = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
        if pm:
            current = pm.group(1)
            params[current] = pm.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    return desc, params


def schema_from_function(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    """(description, input_schema) for a tool function. Raises `ConfigError` naming the fix."""
    try:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"tool `{name}`: cannot read its signature ({exc})") from None
    description, docs = _doc_params(fn.__doc__ or "")
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in sig.parameters.items():
        where = f"tool `{name}`: parameter `{pname}`"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"{where} is *args/**kwargs, which a model cannot fill; "
                "name each parameter the tool takes"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigError(f"{where} is positional-only; tools are called with keywords")
        schema = _type_schema(hints[pname], where) if pname in hints else {}
        if pname in docs and "description" not in schema:
            schema["description"] = docs[pname]
        if param.default is param.empty:
            required.append(pname)
        elif param.default is None or isinstance(param.default, (str, int, float, bool)):
            schema["default"] = param.default
        props[pname] = schema
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return description or f"The {name} tool.", input_schema


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def validate(schema: Any, value: Any, path: str = "arguments", depth: int = 0) -> list[str]:
    """Problems with `value` against `schema`, as sentences; empty when it conforms."""
    if not isinstance(schema, dict) or depth > 50:
        return []
    errors: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if (
            isinstance(options, list)
            and options
            and not any(not validate(o, value, path, depth + 1) for o in options)
        ):
            errors.append(f"{path} does not match any allowed form")
            return errors
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path} must be {schema['const']!r}")
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"][:20])
        errors.append(f"{path} must be one of {allowed}, not {value!r}")
    t = schema.get("type")
    if t is not None:
        kinds = t if isinstance(t, list) else [t]
        checks = [_JSON_TYPES[k] for k in kinds if isinstance(k, str) and k in _JSON_TYPES]
        if checks and not any(c(value) for c in checks):
            errors.append(f"{path} must be {' or '.join(map(str, kinds))}, not {_kind(value)}")
            return errors
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        assert isinstance(props, dict)
        for req in schema.get("required") or []:
            if req not in value:
                errors.append(f"'{req}' is required")
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors.extend(validate(props[k], v, f"'{k}'", depth + 1))
            elif extra is False:
                known = ", ".join(props) or "none"
                errors.append(f"'{k}' is not a parameter (parameters: {known})")
            elif isinstance(extra, dict):
                errors.extend(validate(extra, v, f"'{k}'", depth + 1))
    if isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            errors.extend(validate(items, item, f"{path}[{i}]", depth + 1))
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            errors.append(f"{path} needs at least {schema['minItems']} items")
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            errors.append(f"{path} allows at most {schema['maxItems']} items")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)) and value < lo:
            errors.append(f"{path} must be at least {lo}")
        if isinstance(hi, (int, float)) and value > hi:
            errors.append(f"{path} must be at most {hi}")
    if isinstance(value, str):
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if isinstance(lo, int) and len(value) < lo:
            errors.append(f"{path} must have at least {lo} characters")
        if isinstance(hi, int) and len(value) > hi:
            errors.append(f"{path} must have at most {hi} characters")
    return errors


def _kind(value: Any) -> str:
    for name, check in _JSON_TYPES.items():
        if name != "integer" and check(value):
            return {"number": "a number", "array": "an array", "object": "an object"}.get(
                name, f"a {name}"
            )
    return type(value).__name__
