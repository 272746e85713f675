"""The shape an answer must have (`output=`): converted once, then every answer checked.

Why pydantic and jsonschema, not our own: pydantic already turns a model, a dataclass, a
TypedDict or `list[...]` of them into JSON Schema and back into those types, enforcing every
constraint the type declares (`Field(ge=1)`, validators on the model); jsonschema enforces all
of draft 2020-12 for a schema given as a dict. So a constraint a provider's dialect cannot take
(and the provider's transform moves into a description) is still enforced here, afterwards.

What stays ours: the schema the model is told about (references inlined, titles dropped, a root
that is not an object wrapped as `{"result": ...}`, since providers want an object there), the
errors as `OutputIssue`s (a dotted path and a sentence, which the reask hands to the model), and
reading the answer out of a message in each mode. `OutputSchema.of` caches the conversion: an
agent, a batch of a thousand prompts or a provider batch's items pay for it once.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._core._messages import Message, TextBlock, ToolUseBlock
from .._core._words import shortened
from ..errors import ConfigError, OutputInvalid, OutputIssue
from ._schema import _inline_refs, compiled, first_few

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from pydantic import TypeAdapter


OutputMode = Literal["auto", "native", "tool", "prompted"]
"""How the schema reaches the model: `native` the provider's own constrained decoding, `tool`
one forced output tool, `prompted` the schema in the instructions; `auto` picks per provider
and model."""

OutputValidator = Callable[[Any], Any]
"""A check of the user's on a validated answer: returns the value (or a replacement; None keeps
it) or raises `ValueError` / `AssertionError` with a sentence the model can act on."""

ANSWER_TOOL = "final_answer"
"""The output tool's name in tool mode."""
WRAP_KEY = "result"
"""Where a schema whose root is not an object (`list[Review]`) goes inside the object sent."""

_MAX_ISSUES = 10  # the reask stays short
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\s*$", re.S)


def _name_of(target: Any, schema: Mapping[str, Any]) -> str:
    """A name the providers accept (`^[a-zA-Z0-9_-]{1,64}$`): the class's, or the schema's
    title, or "answer"."""
    if isinstance(target, Mapping):
        raw = str(schema.get("title") or "answer")
    else:
        origin = typing.get_origin(target)
        args = typing.get_args(target)
        if origin in (list, Sequence, tuple) and args:
            raw = "list_" + str(getattr(args[0], "__name__", "item"))
        else:
            raw = str(getattr(target, "__name__", "") or "answer")
    name = _NAME.sub("_", raw).strip("_")[:64]
    return name or "answer"


@dataclasses.dataclass(frozen=True)
class _Given:
    """A schema's JSON as given, riding along a cache key without being part of it."""

    text: str = dataclasses.field(compare=False)


def _is_object(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" and "anyOf" not in schema and "oneOf" not in schema


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    """`{"result": schema}` as an object, with the definitions kept at the root."""
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {WRAP_KEY: inner},
        "required": [WRAP_KEY],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]
    return wrapped


def issues_of(error: Any) -> list[OutputIssue]:
    """A pydantic `ValidationError`'s errors as issues: `loc` joined with dots, pydantic's
    message."""
    out: list[OutputIssue] = []
    for err in error.errors(include_url=False):
        loc = [str(p) for p in err.get("loc", ())]
        message = str(err.get("msg") or "is not valid")
        if err.get("type") == "json_invalid":
            message = f"not valid JSON ({message.removeprefix('Invalid JSON: ')})"
        out.append(OutputIssue(".".join(loc), message))
    return _capped(out)


def _capped(issues: Iterable[OutputIssue]) -> list[OutputIssue]:
    return first_few(issues, _MAX_ISSUES, lambda rest: OutputIssue("", f"and {rest} more"))


def _unfenced(text: str) -> str:
    """The JSON inside a Markdown code fence, when the whole answer is one (prompted mode)."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


class OutputSchema:
    """The shape a structured answer must have, converted once.

    Build one with `OutputSchema.of(schema)` (cached): `schema` is a pydantic model, a
    dataclass, a TypedDict, `list[...]` of those (any type pydantic can describe), or a JSON
    Schema dict. Outside an agent it checks answers too: `parse(text)` for the text of an
    answer, `read(message)` for a whole assistant message (a provider batch's items, say).

    Args:
        target: The schema: a type pydantic can describe, or a JSON Schema dict.

    Raises:
        ConfigError: The schema cannot be described as JSON Schema, or refers to nothing.

    Attributes:
        target: The schema as given.
        json_schema: What the model is told: JSON Schema with references inlined, always an
            object at the root (a list is wrapped as `{"result": [...]}`).
        name: A name the providers accept, from the class or the schema's title.
        description: The schema's description (a model's docstring), or "".
        wrapped: Whether `json_schema` wraps a root that is not an object.
        fields: The answer's top-level fields (empty when the root is not an object).
    """

    def __init__(self, target: Any) -> None:
        self.target = target
        self._adapter: TypeAdapter[Any] | None = None
        self._validator: Validator | None = None
        if isinstance(target, Mapping):
            raw = self._from_dict(dict(target))
        else:
            raw = self._from_type(target)
        self.name = _name_of(target, raw)
        # read from the inlined schema: a recursive model's root is a `$ref` to an object
        told = _inline_refs(raw)
        self.description = str(told.get("description") or "")
        self.wrapped = not _is_object(told)
        self.json_schema: dict[str, Any] = _wrap(told) if self.wrapped else told
        props = told.get("properties") if not self.wrapped else None
        self.fields: tuple[str, ...] = tuple(props) if isinstance(props, dict) else ()

    # -- conversion ---------------------------------------------------------------------------

    def _from_type(self, target: Any) -> dict[str, Any]:
        import pydantic
        from pydantic import TypeAdapter

        _check_a_type(target)
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(target)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pydantic.json_schema.PydanticJsonSchemaWarning)
                schema = adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            first = str(exc).splitlines()[0].rstrip(".")
            raise ConfigError(
                f"output={_type_name(target)} has no JSON schema ({first}); use a pydantic "
                "model, a dataclass, a TypedDict or list[...] of those"
            ) from None
        self._adapter = adapter
        return schema

    def _from_dict(self, schema: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import exceptions

        try:
            json.dumps(schema, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"output= schema is not plain JSON ({exc})") from None
        if not schema:
            raise ConfigError("output= got an empty JSON Schema; describe the answer's fields")
        try:
            self._validator = compiled(schema)
        except exceptions.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path)
            at = f"the keyword `{where}`" if where else "its root"
            raise ConfigError(f"output= is not a valid JSON Schema: {at}: {exc.message}") from None
        return schema

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _cached(key: Any) -> OutputSchema:
        return OutputSchema(key)

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _cached_json(key: str, given: _Given) -> OutputSchema:
        # one per schema, whatever its keys' order; built from the first as given, since the
        # order of its properties is the order of the answer's fields (and a batch's columns)
        del key
        return OutputSchema(json.loads(given.text))

    @classmethod
    def of(cls, schema: Any) -> OutputSchema:
        """The converted schema for `schema`, built once per distinct schema (cached).

        Args:
            schema: A pydantic model, a dataclass, a TypedDict, `list[...]` of those, a JSON
                Schema dict, or an `OutputSchema` (returned as it is).

        Returns:
            The converted schema.

        Raises:
            ConfigError: `schema` cannot describe an answer (no JSON schema, invalid JSON
                Schema), in one sentence naming what is wrong.
        """
        if isinstance(schema, OutputSchema):
            return schema
        if isinstance(schema, Mapping):
            try:
                key = json.dumps(schema, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError):
                return OutputSchema(schema)  # which refuses it, saying why
            return cls._cached_json(key, _Given(json.dumps(schema)))
        try:
            hash(schema)
        except TypeError:
            return OutputSchema(schema)
        return cls._cached(schema)

    @property
    def returns_dict(self) -> bool:
        """A JSON Schema dict's answers are plain JSON values (a dict for an object)."""
        return self._validator is not None

    def __repr__(self) -> str:
        return f"OutputSchema({self.name!r}, fields={list(self.fields)!r})"

    # -- checking answers ---------------------------------------------------------------------

    def parse(self, text: str) -> Any:
        """The validated value of an answer's text (JSON; a Markdown code fence around it is
        taken off).

        Args:
            text: The answer as the model wrote it.

        Returns:
            An instance of the schema's type (a model, a dataclass, a list of them ...), or
            the JSON value itself for a JSON Schema dict.

        Raises:
            OutputInvalid: The text is not JSON or breaks the schema; its `errors` name each
                field and what is wrong, its `raw` is `text`.
        """
        body = _unfenced(text)
        if self._validator is not None or self.wrapped:
            return self.validate(_decoded(body, text), raw=text)
        adapter = self._adapter
        assert adapter is not None
        return _by_pydantic(lambda: adapter.validate_json(body), text)

    def validate(self, value: Any, *, raw: str = "") -> Any:
        """The validated value of an answer already decoded from JSON (a tool call's
        arguments); wrapped schemas take the wrapper object.

        Args:
            value: The decoded answer.
            raw: Its text, for the error.

        Returns:
            The validated value, as `parse` gives it.

        Raises:
            OutputInvalid: The value breaks the schema.
        """
        if self.wrapped and isinstance(value, dict) and WRAP_KEY in value:
            # the wrapper the model was told about (a bare value is fine too); its errors are
            # named from the wrapper down, as the model knows the fields
            try:
                return self._validated(value[WRAP_KEY], raw)
            except OutputInvalid as exc:
                issues = [OutputIssue(_joined(WRAP_KEY, e.path), e.message) for e in exc.errors]
                raise OutputInvalid(issues, raw) from None
        return self._validated(value, raw)

    def _validated(self, value: Any, raw: str) -> Any:
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
            if errors:
                issues = [
                    OutputIssue(
                        ".".join(str(p) for p in e.absolute_path), shortened(e.message, 300)
                    )
                    for e in errors
                ]
                raise OutputInvalid(_capped(issues), raw)
            return value
        adapter = self._adapter
        assert adapter is not None
        return _by_pydantic(lambda: adapter.validate_python(value), raw)

    def read(self, message: Message, *, mode: OutputMode = "native") -> Any:
        """The validated value of an assistant message's structured answer.

        Args:
            message: The assistant message (a live reply, or a provider batch's item).
            mode: How it was asked for: "tool" reads the output tool's arguments, the other
                modes the message's text.

        Returns:
            The validated value.

        Raises:
            OutputInvalid: No answer in the message, or one that breaks the schema.
        """
        raw, call = answer_text(message, mode)
        if call is not None:
            if call.raw_input is not None and not call.input:
                return self.parse(call.raw_input)
            return self.validate(call.input, raw=raw)
        if not raw.strip():
            what = f"call the {ANSWER_TOOL} tool" if mode == "tool" else "answer with JSON"
            raise OutputInvalid([OutputIssue("", f"there was no answer: {what}")], raw)
        return self.parse(raw)


def _by_pydantic(
    validate: Callable[[], Any],
    raw: str,
    own: tuple[type[Exception], ...] = (ValueError, TypeError, AssertionError),
) -> Any:
    """`validate()`: pydantic's check of an answer, or a validator of the user's; pydantic's
    errors, and a validator's own (`own`), as `OutputInvalid`."""
    try:
        return validate()
    except _pydantic_error() as exc:
        raise OutputInvalid(issues_of(exc), raw) from None
    except own as exc:  # a model validator's own
        raise OutputInvalid([OutputIssue("", _sentence(exc))], raw) from None


def _decoded(body: str, raw: str) -> Any:
    """The JSON value of an answer's text, or `OutputInvalid` saying where it stops being JSON."""
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        issue = OutputIssue(
            "", f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        )
        raise OutputInvalid([issue], raw) from None
    except (ValueError, RecursionError) as exc:
        raise OutputInvalid([OutputIssue("", f"not valid JSON ({exc})")], raw) from None


def answer_text(message: Message, mode: OutputMode) -> tuple[str, ToolUseBlock | None]:
    """The raw text of a message's structured answer and, in tool mode, the output tool's call.

    Tool mode: the arguments of the first call of `ANSWER_TOOL` (the text, as JSON), else the
    message's text. Other modes: the text blocks joined.
    """
    if mode == "tool":
        for block in message.blocks:
            if isinstance(block, ToolUseBlock) and block.name == ANSWER_TOOL:
                raw = block.raw_input if block.raw_input is not None and not block.input else None
                return (raw if raw is not None else json.dumps(block.input)), block
    return "".join(b.text for b in message.blocks if isinstance(b, TextBlock)), None


def run_validators(value: Any, validators: Sequence[OutputValidator], raw: str) -> Any:
    """The value after the user's validators (each may replace it); one that raises
    `ValueError` or `AssertionError` makes it an `OutputInvalid` (reasked like a schema error).
    Other exceptions are bugs in the validator, and propagate."""
    for fn in validators:
        result = _by_pydantic(functools.partial(fn, value), raw, (ValueError, AssertionError))
        if inspect.isawaitable(result):
            raise ConfigError(
                f"output validator {getattr(fn, '__name__', fn)!r} is async; "
                "validators are plain functions"
            )
        if result is not None:
            value = result
    return value


@functools.cache
def _pydantic_error() -> type[Exception]:
    """pydantic's ValidationError, imported once (pydantic resolves its names lazily, through a
    module `__getattr__` that costs more than the check it guards on a small answer; an
    `except` clause only evaluates this when something was raised)."""
    from pydantic import ValidationError

    return ValidationError


def _joined(head: str, path: str) -> str:
    return f"{head}.{path}" if path else head


def _sentence(exc: BaseException) -> str:
    return shortened(str(exc).strip() or type(exc).__name__, 300)


_TAKES = (
    "output= takes a pydantic model, a dataclass, a TypedDict, list[...] of those or a JSON "
    "Schema dict"
)


def _check_a_type(target: Any) -> None:
    """Refuse what is not a type before pydantic reads it: a function would be read as its
    arguments' schema, `object` as "anything", and the error would then blame the provider."""
    if target is None or isinstance(target, (str, bytes, int, float, bool)):
        raise ConfigError(f"{_TAKES}, not {target!r}")
    if inspect.isroutine(target) or isinstance(target, functools.partial):
        name = getattr(target, "__name__", None) or repr(target)
        raise ConfigError(
            f"{_TAKES}, not the function `{name}`; a function that checks answers goes to "
            "@agent.output_validator"
        )
    if target is object or target is Any or repr(target) == "typing_extensions.Any":
        raise ConfigError(
            f"{_TAKES}; `{_type_name(target)}` says nothing about the answer: for plain text "
            "leave output= out, for a free-form object pass {'type': 'object'}"
        )
    is_type = isinstance(target, type) or typing.get_origin(target) is not None
    if not is_type and (dataclasses.is_dataclass(target) or hasattr(target, "model_fields")):
        raise ConfigError(f"{_TAKES}; {target!r} is an instance: pass its class")


def _type_name(target: Any) -> str:
    name = getattr(target, "__name__", None)
    if name and not typing.get_args(target):
        return str(name)
    return repr(target)


def field_types(schema: OutputSchema) -> dict[str, Any]:
    """Top-level field name -> its annotation (pydantic model, dataclass, TypedDict), for the
    batch's typed columns; empty for a JSON Schema dict or a wrapped root."""
    target = schema.target
    if schema.wrapped or schema.returns_dict:
        return {}
    fields = getattr(target, "model_fields", None)
    if isinstance(fields, dict):
        return {name: f.annotation for name, f in fields.items()}
    if dataclasses.is_dataclass(target):
        hints = typing.get_type_hints(target)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(target)}
    try:
        return dict(typing.get_type_hints(target))
    except TypeError:
        return {}
