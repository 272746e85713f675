"""Tool schemas: built from Python signatures by pydantic, enforced by jsonschema.

Why libraries and not our own walk over types: pydantic already maps every Python type a tool
may take (Optional, Literal, Enum, lists, dicts, tuples, dataclasses, TypedDicts, pydantic
models) to JSON Schema and turns the model's JSON back into those types; jsonschema implements
all of draft 2020-12, so the `$ref`s, `$defs` and `pattern`s that MCP servers built with
pydantic or zod send are enforced rather than skipped. What stays ours: the docstring's `Args:`
descriptions, schemas inlined for providers that do not follow `$ref`, and the wording of each
problem, which is written for the model: it has to fix its arguments from that one sentence.

pydantic and jsonschema are imported on first use: `import nbagent` should not pay for them.
"""

from __future__ import annotations

import inspect
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._core._words import counted, shortened
from ..errors import ConfigError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from pydantic import BaseModel


_MAX_PROBLEMS = 5
T = TypeVar("T")


class BadArguments(ValueError):
    """Arguments a tool cannot be called with; `problems` are sentences for the model."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# -- schemas from signatures ---------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSignature:
    """What `@tool` learned from a function: its description, the JSON schema the model is
    offered, and the pydantic model that turns the model's JSON into the parameters' types."""

    description: str
    input_schema: dict[str, Any]
    model: type[BaseModel]
    parameters: dict[str, str]  # field name in `model` -> the function's parameter name

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments for the function, converted to the annotated types (a dataclass
        parameter gets a dataclass, an Enum an Enum member). Arguments the model left out are
        left out here too, so the function's own defaults apply."""
        from pydantic import ValidationError as PydanticError

        try:
            bound = self.model.model_validate(dict(arguments))
        except PydanticError as exc:
            raise BadArguments(_pydantic_problems(exc)) from None
        return {self.parameters[f]: getattr(bound, f) for f in bound.model_fields_set}


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


def _annotated_description(annotation: Any) -> str | None:
    """A description the annotation carries itself: `Annotated[str, "the path"]` (a plain
    string, which pydantic ignores) or `Annotated[str, Field(description=...)]`."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    for meta in reversed(typing.get_args(annotation)[1:]):
        if isinstance(meta, str):
            return meta
        described = getattr(meta, "description", None)
        if isinstance(described, str):
            return described
    return None


def signature_of(fn: Callable[..., Any], name: str) -> ToolSignature:
    """The tool's description, schema and argument model. Raises `ConfigError` naming the fix."""
    import pydantic
    from pydantic import ConfigDict, Field, create_model

    try:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"tool `{name}`: cannot read its signature ({exc})") from None
    description, docs = _doc_params(fn.__doc__ or "")
    fields: dict[str, Any] = {}
    parameters: dict[str, str] = {}
    for i, (pname, param) in enumerate(sig.parameters.items()):
        where = f"tool `{name}`: parameter `{pname}`"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"{where} is *args/**kwargs, which a model cannot fill; "
                "name each parameter the tool takes"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigError(f"{where} is positional-only; tools are called with keywords")
        annotation = hints.get(pname, Any)
        info: dict[str, Any] = {"alias": pname}
        described = _annotated_description(annotation) or docs.get(pname)
        if described:
            info["description"] = described
        default = ... if param.default is param.empty else param.default
        # Fields get neutral names and the parameter as alias, so a parameter may be called
        # `json`, `schema` or `model_config` without clashing with pydantic's own attributes.
        field = f"p{i}"
        fields[field] = (annotation, Field(default, **info))
        parameters[field] = pname
    try:
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        with warnings.catch_warnings():
            # A default that is not JSON (an object, say) is left out of the schema: the
            # model need not know it, and the function still gets it.
            warnings.simplefilter("ignore", pydantic.json_schema.PydanticJsonSchemaWarning)
            raw = model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise ConfigError(_unsupported(name, fields, parameters, hints, exc)) from None
    schema = _inline_refs(raw)
    schema["required"] = list(schema.get("required", []))  # always there, even when empty
    return ToolSignature(description or f"The {name} tool.", schema, model, parameters)


def _unsupported(
    name: str,
    fields: dict[str, Any],
    parameters: dict[str, str],
    hints: dict[str, Any],
    exc: Exception,
) -> str:
    """Which parameter has a type with no JSON form, in one sentence with the fix."""
    from pydantic import PydanticSchemaGenerationError, TypeAdapter

    for field, (annotation, _) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except Exception as inner:
            tp = hints.get(parameters[field], annotation)
            tname = getattr(tp, "__name__", None) or repr(tp)
            # pydantic's advice for an arbitrary class (allow arbitrary types) would not give
            # the model a way to send one; its other messages name a real fix.
            why = (
                ""
                if isinstance(inner, PydanticSchemaGenerationError)
                else f" ({str(inner).splitlines()[0].rstrip('.')})"
            )
            return (
                f"tool `{name}`: parameter `{parameters[field]}` has type {tname}, which has no "
                f"JSON schema{why}; use str, int, float, bool, list[...], dict[str, ...], "
                "Literal[...], an Enum, a dataclass, a TypedDict or a pydantic model"
            )
    first = str(exc).splitlines()[0]
    return f"tool `{name}`: its parameters have no JSON schema ({first})"


# Keywords whose values are schemas (or lists / maps of schemas): only these are walked, so a
# `default` or `enum` value that happens to hold "title" or "$ref" keys is left as it is.
_SUB_SCHEMA = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("properties", "patternProperties")


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema with each `$ref` to `$defs` replaced by the definition, and without
    the `title`s pydantic derives from names (tokens the model does not need).

    Some providers and local-model grammars do not follow `$ref`; the old hand-written
    generator inlined everything, so the schemas models see stay as they were. A recursive type
    cannot be inlined: its definition stays in `$defs`, referenced.
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    kept: dict[str, Any] = {}

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        out: dict[str, Any] = {}
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
            target = ref[8:]
            if target in stack:  # recursive: keep the reference
                if target not in kept:
                    kept[target] = None  # reserve, so the definition is walked once
                    kept[target] = walk(defs[target], (target,))
                out["$ref"] = ref
            else:
                out.update(walk(defs[target], (*stack, target)))
        for key, value in node.items():
            if key in ("$ref", "$defs", "discriminator") or (
                key == "title" and isinstance(value, str)
            ):
                continue  # (discriminator is OpenAPI's; its mapping names the $defs dropped)
            if key in _SUB_SCHEMA:
                out[key] = walk(value, stack)
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [walk(v, stack) for v in value]
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: walk(v, stack) for k, v in value.items()}
            else:
                out[key] = value
        return out

    result: dict[str, Any] = walk(schema, ())
    if kept:
        result["$defs"] = kept
    return result


# -- checking arguments --------------------------------------------------------------------------


def compiled(schema: dict[str, Any]) -> Validator:
    """A validator for `schema` (a tool's input, an answer's output), of the draft it declares
    in `$schema`, else 2020-12, resolving `$ref`s within it only (another document is never
    fetched). Raises jsonschema's `SchemaError` for a schema that is itself broken."""
    from jsonschema import validators
    from referencing import Registry

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())


class ArgumentCheck:
    """One tool's input schema, compiled once, checking each call's arguments.

    The draft is the one the schema declares in `$schema` (MCP servers built on older SDKs send
    draft 7), else 2020-12. `$ref`s resolve within the schema only: a reference to another
    document is never fetched. A schema that is itself broken, or points outside, is not
    enforced here (the tool, or its server, still checks what it receives), so a server's
    sloppy schema cannot make all of its tools unusable.
    """

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.broken = ""  # why the schema cannot be enforced, when it cannot
        self._validator: Validator | None = None
        if not isinstance(schema, dict):
            self.broken = "the input schema is not a JSON object"
            return
        from jsonschema import exceptions

        try:
            self._validator = compiled(schema)
        except exceptions.SchemaError as exc:
            self.broken = f"the input schema is invalid: {exc.message}"

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """What is wrong with the arguments, one short clause each; empty when they conform."""
        if self._validator is None:
            return []
        from referencing.exceptions import Unresolvable

        try:
            errors = list(self._validator.iter_errors(dict(arguments)))
        except Unresolvable as exc:
            self.broken = f"the input schema has a reference that cannot be resolved ({exc})"
            self._validator = None
            return []
        return _first(_render(e) for e in errors)


def first_few(items: Iterable[T], limit: int, more: Callable[[int], T]) -> list[T]:
    """The distinct `items` in order, at most `limit` of them, then `more(how many were left)`:
    a model fixes the first few problems; a wall of them helps nobody."""
    unique = list(dict.fromkeys(items))
    if len(unique) > limit:
        unique = [*unique[:limit], more(len(unique) - limit)]
    return unique


def _first(problems: Iterable[str]) -> list[str]:
    return first_few(problems, _MAX_PROBLEMS, lambda rest: f"and {counted(rest, 'more problem')}")


def _path(parts: Iterable[Any]) -> str:
    """`'items[2].name'`: where in the arguments a problem is."""
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return f"'{text}'"


def _short(value: Any, limit: int = 60) -> str:
    return shortened(repr(value), limit)


_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"),
    (bool, "a boolean"),  # before int: a bool is one
    ((int, float), "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)
"""A JSON value's kind, as a problem names it (the first that matches)."""


def _kind(value: Any) -> str:
    return next((kind for t, kind in _KINDS if isinstance(value, t)), type(value).__name__)


def _types(value: Any) -> str:
    kinds = value if isinstance(value, list) else [value]
    return " or ".join(str(k) for k in kinds)


def _render(error: ValidationError) -> str:
    """One jsonschema error as a clause for the model: which argument, what is wrong."""
    where = list(error.absolute_path)
    at = _path(where) if where else "the arguments"
    kw, value = error.validator, error.instance
    expected: Any = error.validator_value
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kw == "required":
        missing = [r for r in expected if isinstance(value, dict) and r not in value]
        return "; ".join(f"{_path([*where, m])} is required" for m in missing) or error.message
    if kw in ("additionalProperties", "unevaluatedProperties") and isinstance(value, dict):
        known = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        extra = [k for k in value if k not in known and not any(re.search(p, k) for p in patterns)]
        names = ", ".join(known) or "none"
        if not where:
            return "; ".join(f"'{k}' is not a parameter (parameters: {names})" for k in extra)
        return "; ".join(f"{_path([*where, k])} is not allowed (allowed: {names})" for k in extra)
    if kw == "type":
        return f"{at} must be {_types(expected)}, not {_kind(value)}"
    if kw == "enum":
        allowed = ", ".join(_short(v, 40) for v in list(expected)[:20])
        return f"{at} must be one of {allowed}, not {_short(value)}"
    if kw == "const":
        return f"{at} must be {_short(expected)}, not {_short(value)}"
    if kw == "pattern":
        return f"{at} must match the pattern {expected}, not {_short(value)}"
    if kw in ("anyOf", "oneOf"):
        return _render_choice(error, at)
    simple = {
        "minimum": f"{at} must be at least {expected}",
        "maximum": f"{at} must be at most {expected}",
        "exclusiveMinimum": f"{at} must be greater than {expected}",
        "exclusiveMaximum": f"{at} must be less than {expected}",
        "multipleOf": f"{at} must be a multiple of {expected}",
        "minLength": f"{at} must have at least {expected} characters",
        "maxLength": f"{at} must have at most {expected} characters",
        "minItems": f"{at} needs at least {expected} items",
        "maxItems": f"{at} allows at most {expected} items",
        "uniqueItems": f"{at} must not repeat items",
        "minProperties": f"{at} needs at least {expected} fields",
        "maxProperties": f"{at} allows at most {expected} fields",
    }
    if kw in simple:
        return simple[str(kw)]
    message = shortened(error.message, 200)
    return f"{at}: {message}"


def _render_choice(error: ValidationError, at: str) -> str:
    """anyOf / oneOf: `Optional[int]` given a string says "must be integer or null"; other
    mixes name the branch that came closest."""
    from jsonschema.exceptions import best_match

    branches = error.context or []
    here = [e for e in branches if list(e.absolute_path) == list(error.absolute_path)]
    if branches and len(here) == len(branches) and all(e.validator == "type" for e in here):
        kinds = ", ".join(dict.fromkeys(_types(e.validator_value) for e in here))
        return f"{at} must be {kinds.replace(', ', ' or ')}, not {_kind(error.instance)}"
    if error.validator == "oneOf" and not branches:
        return f"{at} matches more than one of the allowed forms"
    # A branch of another type is not close; among those of the right type, jsonschema's
    # relevance picks the deepest problem.
    wrong_type = {e.relative_schema_path[0] for e in here if e.validator == "type"}
    shaped = [e for e in branches if e.relative_schema_path[0] not in wrong_type]
    closest = best_match(shaped or branches)
    if closest is None:
        return f"{at} does not match any of the allowed forms"
    return f"{at} does not match any of the allowed forms (closest: {_render(closest)})"


def _pydantic_problems(exc: Any) -> list[str]:
    """A pydantic ValidationError's errors as clauses, named by argument."""
    out: list[str] = []
    for err in exc.errors(include_url=False):
        loc = list(err.get("loc", ()))
        at = _path(loc) if loc else "the arguments"
        if err.get("type") == "extra_forbidden" and len(loc) == 1:
            out.append(f"{at} is not a parameter")
            continue
        message = str(err.get("msg", "is not valid"))
        out.append(f"{at}: {message[:1].lower()}{message[1:]}")
    return _first(out)
