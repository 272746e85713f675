"""`OutputSchema`: schemas converted once, answers checked into field-path issues; and, over
random nested pydantic models, conversion, every dialect, the demo model's answers and
validation agreeing with each other."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model, field_validator
from typing_extensions import TypedDict

import nbagent
from nbagent import Agent, OutputSchema
from nbagent._core._messages import Message, TextBlock, ToolUseBlock
from nbagent._loop._output_schema import run_validators
from nbagent.demo._structured import sample
from nbagent.errors import ConfigError, OutputInvalid
from nbagent.providers._output_schemas import (
    anthropic_schema,
    gemini_schema,
    openai_strict_schema,
)


class Line(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class Invoice(BaseModel):
    """An invoice."""

    number: str
    lines: list[Line]
    paid: bool = False

    @field_validator("number")
    @classmethod
    def looks_like_one(cls, value: str) -> str:
        if not value.startswith("INV-"):
            raise ValueError("an invoice number starts with INV-")
        return value


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Person(TypedDict):
    name: str
    age: int


def issues(err: OutputInvalid) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in err.errors]


def test_each_kind_of_schema_gives_its_own_kind_of_value() -> None:
    assert OutputSchema.of(Point).parse('{"x": 1, "y": 2.5}') == Point(1.0, 2.5)
    assert OutputSchema.of(Person).parse('{"name": "Ann", "age": 3}') == {"name": "Ann", "age": 3}
    lines = OutputSchema.of(list[Line]).parse('{"result": [{"sku": "a", "qty": 2}]}')
    assert lines == [Line(sku="a", qty=2)]
    as_dict = OutputSchema.of({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert as_dict.parse('{"a": 1}') == {"a": 1} and as_dict.returns_dict


def test_a_list_is_told_as_an_object_and_read_either_way() -> None:
    schema = OutputSchema.of(list[Line])
    assert schema.wrapped and schema.json_schema["type"] == "object"
    assert list(schema.json_schema["properties"]) == ["result"]
    assert schema.parse('[{"sku": "a", "qty": 1}]') == [Line(sku="a", qty=1)]
    with pytest.raises(OutputInvalid) as caught:
        schema.parse('{"result": [{"sku": "a", "qty": 0}]}')
    assert issues(caught.value) == [("result.0.qty", "Input should be greater than or equal to 1")]


def test_errors_name_each_field_and_keep_the_raw_text() -> None:
    text = '{"number": "42", "lines": [{"sku": 7, "qty": 0}], "extra": 1}'
    with pytest.raises(OutputInvalid) as caught:
        OutputSchema.of(Invoice).parse(text)
    err = caught.value
    assert err.raw == text
    assert issues(err) == [
        ("number", "Value error, an invoice number starts with INV-"),
        ("lines.0.sku", "Input should be a valid string"),
        ("lines.0.qty", "Input should be greater than or equal to 1"),
    ]


def test_not_json_says_where_it_stops_and_a_code_fence_is_taken_off() -> None:
    with pytest.raises(OutputInvalid) as caught:
        OutputSchema.of(Point).parse('{"x": 1, "y":')
    assert caught.value.errors[0].path == ""
    assert caught.value.errors[0].message.startswith("not valid JSON")
    assert OutputSchema.of(Point).parse('```json\n{"x": 0, "y": 0}\n```') == Point(0, 0)
    with pytest.raises(OutputInvalid, match="not valid JSON"):
        OutputSchema.of({"type": "object"}).parse("Sure! Here it is: {")


def test_a_json_schema_dict_is_checked_by_jsonschema_with_paths() -> None:
    schema = OutputSchema.of(
        {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
            "required": ["tags"],
        }
    )
    with pytest.raises(OutputInvalid) as caught:
        schema.parse('{"tags": ["a", 3, "c"]}')
    paths = [p for p, _ in issues(caught.value)]
    assert paths == ["tags", "tags.1"]


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (3, "output= takes"),
        ({"type": "objet"}, "the keyword `type`: 'objet' is not valid"),
        ({}, "empty JSON Schema"),
        ({"type": "object", "default": float("nan")}, "not plain JSON"),
        (type("Opaque", (), {}), "has no JSON schema"),
    ],
    ids=["a number", "a misspelt type", "empty", "NaN", "a class pydantic cannot describe"],
)
def test_a_schema_that_cannot_describe_an_answer_is_a_config_error(schema: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        OutputSchema.of(schema)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (lambda x: x, "not the function `<lambda>`; a function that checks answers goes to "),
        (print, "not the function `print`"),
        (object, "`object` says nothing about the answer"),
        (Any, "`Any` says nothing about the answer"),
        (Point(1, 2), "is an instance: pass its class"),
    ],
    ids=["a lambda", "a builtin", "object", "Any", "an instance"],
)
def test_what_is_not_a_type_is_refused_before_any_dialect(given: Any, words: str) -> None:
    # the old message blamed a provider: "field `x` has no `type` ... Anthropic's ... need"
    for make in (lambda: OutputSchema.of(given), lambda: Agent("demo", output=given)):
        with pytest.raises(ConfigError) as caught:
            make()
        said = str(caught.value)
        assert said.startswith("output= takes a pydantic model") and words in said, said
        assert "Anthropic" not in said and "has no `type`" not in said


def test_map_refuses_object_as_output_before_anything_is_sent() -> None:
    with pytest.raises(ConfigError, match="`object` says nothing about the answer"):
        nbagent.map(["a"], model="demo", output=object, show=False)


def test_a_schema_the_demo_cannot_take_natively_names_the_demo_models_dialect() -> None:
    class Loose(BaseModel):
        x: Any

    with pytest.raises(ConfigError) as caught:
        Agent("demo", output=Loose)
    said = str(caught.value)
    assert "field `x` has no `type`" in said
    assert "which the demo model's native structured outputs (Anthropic's dialect) need" in said
    assert Agent("demo", output=Loose, output_mode="tool").output is not None  # as it advises


def test_a_provider_names_its_structured_outputs_in_its_own_words_whatever_they_hold() -> None:
    # the name is text, not a regular-expression template: a backslash in it stays a backslash
    from nbagent.mock import shared_server
    from nbagent.providers import AnthropicProvider

    class Loose(BaseModel):
        x: Any

    provider = AnthropicProvider("gw", api_key="k", base_url=shared_server().url)
    provider.outputs_named = r"the gateway's outputs (see C:\docs\gateway)"
    provider.native_outputs = True
    with pytest.raises(ConfigError) as caught:
        Agent(provider, output=Loose)
    assert r"which the gateway's outputs (see C:\docs\gateway) need" in str(caught.value)


class Node(BaseModel):
    label: str
    children: list[Node] = []


def test_a_recursive_model_is_an_object_at_the_root_and_its_paths_have_no_wrapper() -> None:
    schema = OutputSchema.of(Node)
    assert not schema.wrapped and schema.fields == ("label", "children")
    assert "result" not in schema.json_schema["properties"]
    with pytest.raises(OutputInvalid) as caught:
        schema.parse('{"label": "a", "children": [{"label": "b", "children": [null]}]}')
    assert [p for p, _ in issues(caught.value)] == ["children.0.children.0"]  # not result.…


def test_conversion_happens_once_per_schema() -> None:
    assert OutputSchema.of(Invoice) is OutputSchema.of(Invoice)
    a = OutputSchema.of({"type": "object", "properties": {"a": {"type": "string"}}})
    b = OutputSchema.of({"properties": {"a": {"type": "string"}}, "type": "object"})
    assert a is b
    assert OutputSchema.of(a) is a


def test_read_takes_the_text_or_the_output_tools_arguments() -> None:
    schema = OutputSchema.of(Point)
    text = Message("assistant", (TextBlock('{"x": 1, "y": 2}'),))
    assert schema.read(text) == Point(1, 2)
    call = ToolUseBlock("c1", "final_answer", {"x": 3, "y": 4})
    assert schema.read(Message("assistant", (call,)), mode="tool") == Point(3, 4)
    with pytest.raises(OutputInvalid, match="call the final_answer tool"):
        schema.read(Message("assistant", (TextBlock(""),)), mode="tool")


def test_validators_may_replace_the_value_or_refuse_it_in_a_sentence() -> None:
    def positive(p: Point) -> Point:
        if p.x < 0:
            raise ValueError("x must not be negative")
        return Point(round(p.x), p.y)

    assert run_validators(Point(1.4, 0), [positive], "") == Point(1, 0)
    with pytest.raises(OutputInvalid) as caught:
        run_validators(Point(-1, 0), [positive], "raw")
    assert issues(caught.value) == [("", "x must not be negative")] and caught.value.raw == "raw"
    with pytest.raises(KeyError):  # a bug in a validator is not the model's to fix
        run_validators(Point(1, 1), [lambda p: {}["x"]], "")


# -- random nested models, every dialect, the demo's answers -----------------------------------

_names = itertools.count()
LEAVES: list[Any] = [
    (str, Field()),
    (str, Field(min_length=2, max_length=12)),
    (int, Field(ge=0, le=9)),
    (int, Field(gt=-5)),
    (float, Field(ge=0.5, le=2.5)),
    (bool, Field()),
    (Literal["red", "green", "blue"], Field()),
    (str | None, Field(default=None)),
]


@st.composite
def models(draw: st.DrawFn, depth: int = 0) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 4))):
        pick = draw(st.integers(0, len(LEAVES) + (2 if depth < 2 else -1)))
        if pick < len(LEAVES):
            fields[f"f{i}"] = LEAVES[pick]
        elif pick == len(LEAVES):
            fields[f"f{i}"] = (draw(models(depth + 1)), Field())
        else:
            inner = draw(models(depth + 1))
            fields[f"f{i}"] = (list[inner], Field(min_length=1, max_length=3))  # type: ignore[valid-type]
    return create_model(f"M{next(_names)}", **fields)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), prompt=st.text(min_size=0, max_size=40))
def test_every_dialect_takes_random_schemas_and_the_demo_answers_them_validly(
    model: type[BaseModel], prompt: str
) -> None:
    schema = OutputSchema.of(model)
    for dialect in (openai_strict_schema, anthropic_schema, gemini_schema, lambda s: s):
        told = dialect(schema.json_schema)
        json.dumps(told)  # plain JSON, what goes on the wire
        # what a model told in this dialect answers (moved constraints read back from the
        # descriptions) passes nbagent's own validation against the schema as given
        answer = json.dumps(sample(told, prompt))
        value = schema.parse(answer)
        assert isinstance(value, model)
    strict = openai_strict_schema(schema.json_schema)
    for node in [strict, *_objects(strict)]:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def _objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        for value in schema.values():
            if isinstance(value, dict) and value.get("type") == "object":
                found.append(value)
            found += _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            if isinstance(value, dict) and value.get("type") == "object":
                found.append(value)
            found += _objects(value)
    return found
