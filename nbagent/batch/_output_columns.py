"""A batch's structured answers as columns: `output`, `reasks`, and one typed column per field.

`nbagent.map(df["text"], output=Review)` should give the user their new columns to
`df.join(out.results)`: each top-level field of the schema becomes a column of the pandas dtype
its annotation says (`int` Int64, `float` float64, `bool` boolean, `str`, a `Literal` of strings
or a str `Enum` string; anything else, a list or a nested model, object). A row that failed has
its error, its raw text in `final_text` and empty fields. A field whose name is already a column
of the results is refused before the batch starts: the join would be ambiguous.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .._loop._output_schema import OutputSchema, field_types
from ..errors import ConfigError

OUTPUT_COLUMNS = ("output", "reasks")
"""What a batch with `output=` adds to the results before the fields: the validated value and
how many reasks it took."""

_DTYPES = {bool: "boolean", int: "Int64", float: "float64", str: "string"}
_JSON_TYPES = {"boolean": bool, "integer": int, "number": float, "string": str}
"""A JSON schema's scalar types, as the annotations that stand for them."""


def _dtype(annotation: Any) -> str:
    """The pandas dtype for a field's annotation, or for a JSON Schema property (a dict: by its
    scalar `type`); object when there is no better one."""
    if isinstance(annotation, dict):
        return _dtype(_JSON_TYPES.get(str(annotation.get("type"))))
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return _dtype(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        kinds = {type(a) for a in typing.get_args(annotation)}
        if kinds <= {str}:
            return "string"
        return "Int64" if kinds <= {int} else "object"
    if origin is not None and len(args) == 1 and type(None) in typing.get_args(annotation):
        return _dtype(args[0])  # Optional[X] (X | None)
    if annotation in (bool, int, float, str):  # the JSON types' own
        return _DTYPES[annotation]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string" if issubclass(annotation, str) else "object"
    return "object"


def _fields(schema: OutputSchema) -> dict[str, str]:
    """Top-level field name -> dtype."""
    if schema.returns_dict and not schema.wrapped:
        props = schema.json_schema.get("properties")
        fields = props if isinstance(props, dict) else {}
    else:
        fields = field_types(schema)
    return {str(name): _dtype(annotation) for name, annotation in fields.items()}


def check_fields(schema: OutputSchema, taken: Sequence[str]) -> None:
    """Refuse, naming it, a field whose column the results already have.

    Args:
        schema: The batch's converted schema.
        taken: The columns the results have already.

    Raises:
        ConfigError: A field of the schema is named like a result column.
    """
    clash = [name for name in _fields(schema) if name in (*taken, *OUTPUT_COLUMNS)]
    if clash:
        raise ConfigError(
            f"output= has a field named {clash[0]!r}, which is already a column of the batch's "
            f"results; rename the field (pydantic: Field(alias=...) keeps the JSON name)"
        )


def _field_value(value: Any, name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    item = getattr(value, name, None)
    if isinstance(item, enum.Enum):
        return item.value
    return item


def structured_columns(
    schema: OutputSchema, values: Sequence[Any], reasks: Sequence[int] | Any
) -> dict[str, Any]:
    """The columns a structured batch adds, in order: output, reasks, then each field.

    Args:
        schema: The batch's converted schema.
        values: Each row's validated answer (None for a row without one).
        reasks: How many reasks each row took (a list or an integer array).

    Returns:
        Column name -> array, to set on the results frame in this order.
    """
    columns: dict[str, Any] = {
        "output": pd.array(list(values), dtype="object"),
        "reasks": pd.array(reasks, dtype="Int64"),
    }
    for name, dtype in _fields(schema).items():
        cells = [_field_value(v, name) for v in values]
        try:
            columns[name] = pd.Series(cells, dtype=dtype).array
        except (TypeError, ValueError):  # a value the annotation did not foresee
            columns[name] = pd.Series(cells, dtype="object").array
    return columns
