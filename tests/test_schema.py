"""Tool schemas: built from signatures by pydantic, enforced by jsonschema (all of draft 2020-12
that MCP servers send), and every broken argument an error result the model reads."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from nbagent import Agent, ScriptedModel, VirtualClock
from nbagent._core._messages import TextBlock, ToolResultBlock
from nbagent._loop import _checks
from nbagent._loop._schema import ArgumentCheck
from nbagent._loop._toolbox import Toolbox
from nbagent._loop._tools import Tool, ToolCall, ToolOutcome, tool
from nbagent.events import Event, ToolCallFinished
from nbagent.providers._base import ToolSpec
from nbagent.providers._scripted import Reply, ToolUse

# -- schemas from signatures ---------------------------------------------------------------------


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Address(TypedDict):
    street: str
    city: str


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


def test_plain_parameters_docstring_defaults_optional_and_literal() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        exact: bool = False,
        language: str | None = None,
        order: Literal["newest", "oldest"] = "newest",
        tags: list[str] | None = None,
        weights: dict[str, float] | None = None,
        anything=None,  # no annotation: any JSON
    ) -> str:
        """Search the archive.

        Args:
            query: What to look for.
            limit: At most this many
                results (a continued line).
        """
        return query

    assert search.description == "Search the archive."
    schema = search.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert list(props) == [
        "query",
        "limit",
        "exact",
        "language",
        "order",
        "tags",
        "weights",
        "anything",
    ]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {
        "type": "integer",
        "default": 10,
        "description": "At most this many results (a continued line).",
    }
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["language"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["order"] == {"enum": ["newest", "oldest"], "type": "string", "default": "newest"}
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    assert props["anything"] == {"default": None}
    assert "title" not in str(schema)  # pydantic's titles cost tokens and say nothing


def test_structured_parameters_are_inlined_and_converted() -> None:
    seen: dict[str, Any] = {}

    @tool
    def place(
        point: Point,
        address: Address,
        person: Person,
        size: Size = Size.SMALL,
        pair: tuple[int, str] = (1, "a"),
    ) -> str:
        """Place someone."""
        seen.update(point=point, address=address, person=person, size=size, pair=pair)
        return "placed"

    props = place.input_schema["properties"]
    assert "$defs" not in place.input_schema and "$ref" not in str(place.input_schema)
    assert props["point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert props["address"]["required"] == ["street", "city"]
    assert props["person"]["properties"]["age"] == {"type": "integer", "minimum": 0}
    assert props["size"] == {"enum": ["s", "l"], "type": "string", "default": "s"}
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]

    args = {
        "point": {"x": 3},
        "address": {"street": "Main St 1", "city": "Bern"},
        "person": {"name": "Ada", "age": 36},
        "size": "l",
        "pair": [2, "b"],
    }
    assert place.argument_problems(args) == []
    assert asyncio.run(place(**args)) == "placed"
    # The function gets the types it declared, not the JSON.
    assert seen["point"] == Point(3, 0)
    assert seen["address"] == {"street": "Main St 1", "city": "Bern"}
    assert seen["person"] == Person(name="Ada", age=36)
    assert seen["size"] is Size.LARGE
    assert seen["pair"] == (2, "b")


def test_left_out_arguments_take_the_functions_own_defaults() -> None:
    marker = object()  # not JSON: kept out of the schema, still the default

    @tool
    def f(a: int, b: Any = marker) -> str:
        """F."""
        return "default" if b is marker else repr(b)

    assert "default" not in f.input_schema["properties"]["b"]
    assert asyncio.run(f(a=1)) == "default"
    assert asyncio.run(f(a=1, b=[1])) == "[1]"


def test_recursive_types_keep_one_definition() -> None:
    @tool
    def draw(tree: Tree) -> str:
        """Draw a tree."""
        return tree.children[0].label

    schema = draw.input_schema
    assert schema["properties"]["tree"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Tree"
    }
    assert set(schema["$defs"]) == {"Tree"}
    good = {"tree": {"label": "root", "children": [{"label": "leaf"}]}}
    assert draw.argument_problems(good) == []
    assert asyncio.run(draw(**good)) == "leaf"
    bad = {"tree": {"label": "root", "children": [{"label": "ok"}, {"children": []}]}}
    assert draw.argument_problems(bad) == ["'tree.children[1].label' is required"]


def test_parameter_names_that_pydantic_itself_uses() -> None:
    @tool
    def dump(json: str, schema: Annotated[int, "How many."], model_config: bool = True) -> str:
        """Dump."""
        return f"{json} {schema} {model_config}"

    props = dump.input_schema["properties"]
    assert list(props) == ["json", "schema", "model_config"]
    assert props["schema"] == {"type": "integer", "description": "How many."}
    assert asyncio.run(dump(json="x", schema=2)) == "x 2 True"


def test_a_pydantic_constraint_is_in_the_schema_and_enforced() -> None:
    @tool
    def book(code: Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="IATA code.")]) -> str:
        """Book a flight."""
        return code

    assert book.input_schema["properties"]["code"] == {
        "type": "string",
        "pattern": "^[A-Z]{3}$",
        "description": "IATA code.",
    }
    assert book.argument_problems({"code": "zurich"}) == [
        "'code' must match the pattern ^[A-Z]{3}$, not 'zurich'"
    ]


def test_a_check_only_pydantic_knows_is_still_an_argument_problem() -> None:
    @tool
    def remind(when: datetime.date) -> str:
        """Set a reminder."""
        return when.isoformat()

    assert remind.input_schema["properties"]["when"] == {"type": "string", "format": "date"}
    (problem,) = remind.argument_problems({"when": "next tuesday"})
    assert problem.startswith("'when': input should be a valid date")
    assert asyncio.run(remind(when="2025-01-31")) == "2025-01-31"


# -- checking against the schemas servers send ---------------------------------------------------

# What a pydantic-built MCP server lists for `create_order(order: Order)`.
REF_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Item": {
            "properties": {
                "sku": {"title": "Sku", "type": "string", "pattern": "^[A-Z]{2}-\\d{4}$"},
                "quantity": {"title": "Quantity", "type": "integer", "minimum": 1},
            },
            "required": ["sku", "quantity"],
            "title": "Item",
            "type": "object",
        },
        "Order": {
            "properties": {
                "items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"},
                "priority": {"enum": ["low", "high"], "title": "Priority", "type": "string"},
            },
            "required": ["items"],
            "title": "Order",
            "type": "object",
        },
    },
    "properties": {"order": {"$ref": "#/$defs/Order"}},
    "required": ["order"],
    "title": "create_orderArguments",
    "type": "object",
}
PATTERN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$"}},
    "required": ["email"],
}


class Shop:
    """A tool source listing the schemas an MCP server would, and recording what reached it."""

    name = "shop"

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec("create_order", "Create an order.", REF_SCHEMA),
            ToolSpec("subscribe", "Subscribe an address.", PATTERN_SCHEMA),
        ]

    async def call_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutcome | BaseException]:
        self.received += [(c.name, dict(c.input)) for c in calls]
        return [ToolOutcome(c.id, (TextBlock(f"{c.name}: done"),)) for c in calls]


def run_agent(calls: list[ToolUse], tools: list[Any]) -> tuple[list[ToolResultBlock], list[Event]]:
    """One agent run: the model makes `calls`, then answers; the results it was sent back."""
    events: list[Event] = []
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    agent = Agent(model, tools=tools, clock=VirtualClock(), subscribers=[events.append])
    result = asyncio.run(agent.run("Go.", show=False))
    assert result.final_text == "Done."
    (results_message,) = [m for m in agent.history if m.tool_results]
    return results_message.tool_results, events


def result_text(block: ToolResultBlock) -> str:
    return "".join(p.text for p in block.content if isinstance(p, TextBlock))


def test_a_ref_schema_rejects_a_bad_argument_as_an_error_result() -> None:
    shop = Shop()
    good = {"order": {"items": [{"sku": "AB-1234", "quantity": 2}], "priority": "high"}}
    bad_item = {"order": {"items": [{"sku": "AB-1234", "quantity": 0}]}}
    bad_enum = {"order": {"items": [], "priority": "urgent"}}
    results, events = run_agent(
        [
            ToolUse("create_order", good, id="ok"),
            ToolUse("create_order", bad_item, id="item"),
            ToolUse("create_order", bad_enum, id="enum"),
        ],
        [shop],
    )
    assert [r.tool_use_id for r in results] == ["ok", "item", "enum"]
    assert [r.is_error for r in results] == [False, True, True]
    assert result_text(results[1]) == (
        "Invalid arguments for `create_order`: 'order.items[0].quantity' must be at least 1. "
        "Fix the arguments and call the tool again."
    )
    assert "'order.priority' must be one of 'low', 'high', not 'urgent'" in result_text(results[2])
    assert shop.received == [("create_order", good)]  # the bad calls never reached the server
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.error for e in finished] == ["", "invalid_arguments", "invalid_arguments"]


def test_a_pattern_schema_rejects_a_bad_argument_as_an_error_result() -> None:
    shop = Shop()
    results, _ = run_agent(
        [
            ToolUse("subscribe", {"email": "ada@example.org"}, id="ok"),
            ToolUse("subscribe", {"email": "ada at example"}, id="bad"),
            ToolUse("create_order", {"order": {"items": [{"sku": "12-AB", "quantity": 1}]}}),
        ],
        [shop],
    )
    assert [r.is_error for r in results] == [False, True, True]
    assert "'email' must match the pattern" in result_text(results[1])
    assert "not 'ada at example'" in result_text(results[1])
    assert "'order.items[0].sku' must match the pattern ^[A-Z]{2}-\\d{4}$, not '12-AB'" in (
        result_text(results[2])
    )
    assert shop.received == [("subscribe", {"email": "ada@example.org"})]


def test_a_function_tool_through_the_agent() -> None:
    @tool
    def ship(point: Point, size: Size) -> str:
        """Ship to a point."""
        return f"{point.x},{point.y} {size.name}"

    results, _ = run_agent(
        [
            ToolUse("ship", {"point": {"x": 1, "y": 2}, "size": "l"}, id="ok"),
            ToolUse("ship", {"point": {"x": 1, "z": 2}, "size": "m"}, id="bad"),
        ],
        [ship],
    )
    assert result_text(results[0]) == "1,2 LARGE"
    assert results[1].is_error
    assert result_text(results[1]) == (
        "Invalid arguments for `ship`: 'point.z' is not allowed (allowed: x, y); "
        "'size' must be one of 's', 'l', not 'm'. Fix the arguments and call the tool again."
    )


@pytest.mark.parametrize(
    ("schema", "arguments", "problem"),
    [
        (
            {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}},
            {"n": "3"},
            "'n' must be integer or null, not a string",
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
            },
            {"n": 1.5},
            "'n' must be integer or null, not a number",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "shape": {
                        "oneOf": [
                            {
                                "type": "object",
                                "properties": {"r": {"type": "number"}},
                                "required": ["r"],
                            },
                            {"type": "string", "enum": ["square"]},
                        ]
                    }
                },
            },
            {"shape": {"radius": 2}},
            "'shape' does not match any of the allowed forms (closest: 'shape.r' is required)",
        ),
        (
            {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}},
            {"s": "long"},
            "'s' must have at most 3 characters",
        ),
        (
            {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}},
            {"xs": [1, 1]},
            "'xs' must not repeat items",
        ),
        (
            {"type": "object", "properties": {"c": {"const": "yes"}}},
            {"c": "no"},
            "'c' must be 'yes', not 'no'",
        ),
        (
            {"type": "object", "properties": {"t": {"type": "number", "exclusiveMaximum": 1}}},
            {"t": 1},
            "'t' must be less than 1",
        ),
    ],
    ids=["type-list", "optional", "one-of", "max-length", "unique", "const", "exclusive-max"],
)
def test_problems_name_the_argument_and_what_is_wrong(
    schema: dict[str, Any], arguments: dict[str, Any], problem: str
) -> None:
    assert ArgumentCheck(schema).problems(arguments) == [problem]


def test_a_declared_older_draft_is_honoured() -> None:
    # Servers on older SDKs declare draft 7, whose `dependencies` 2020-12 no longer has.
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "dependencies": {"card": ["cvc"]},
    }
    assert ArgumentCheck(draft7).problems({"card": "4242"}) == [
        "the arguments: 'cvc' is a dependency of 'card'"
    ]
    assert ArgumentCheck(draft7).problems({"card": "4242", "cvc": "123"}) == []
    undeclared = {k: v for k, v in draft7.items() if k != "$schema"}  # read as 2020-12
    assert ArgumentCheck(undeclared).problems({"card": "4242"}) == []


def test_many_problems_are_cut_short() -> None:
    schema = {"type": "object", "properties": {f"a{i}": {"type": "integer"} for i in range(8)}}
    problems = ArgumentCheck(schema).problems({f"a{i}": "x" for i in range(8)})
    assert problems[:5] == [f"'a{i}' must be integer, not a string" for i in range(5)]
    assert problems[5:] == ["and 3 more problems"]


def test_schemas_that_cannot_be_enforced_are_left_to_the_server() -> None:
    broken = ArgumentCheck({"type": "object", "properties": {"x": {"type": "strin"}}})
    assert broken.problems({"x": 1}) == [] and "invalid" in broken.broken
    # A reference to another document is never fetched (no network), and not enforced.
    remote = ArgumentCheck(
        {"type": "object", "properties": {"x": {"$ref": "https://schemas.invalid/x.json"}}}
    )
    assert remote.problems({"x": 1}) == []
    assert "cannot be resolved" in remote.broken
    assert ArgumentCheck("not a schema").problems({"x": 1}) == []


def test_each_schema_is_compiled_once_and_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled: list[Any] = []
    threads: set[str] = set()

    class Counting(ArgumentCheck):
        def __init__(self, schema: Any) -> None:
            compiled.append(schema)
            threads.add(threading.current_thread().name)
            super().__init__(schema)

    monkeypatch.setattr(_checks, "ArgumentCheck", Counting)

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    shop = Shop()
    box = Toolbox([echo, shop])

    async def main() -> None:
        await box.specs()
        for i in range(3):
            calls = [
                ToolCall(f"e{i}", "echo", {"text": "hi"}),
                ToolCall(f"s{i}", "subscribe", {"email": "a@b.cd"}),
            ]
            await box.run_batch(calls, lambda *a, **k: None)

    asyncio.run(main())
    # the function's schema, then every tool the source listed (compiled as soon as listed),
    # each once however many calls use it
    assert compiled[0] is echo.input_schema
    assert any(c is PATTERN_SCHEMA for c in compiled)
    assert len({id(c) for c in compiled}) == len(compiled) == 3  # echo, create_order, subscribe
    assert threads == {"nbagent-argument-checks"}  # never the thread running the loop


def test_a_hand_built_tool_gets_its_arguments_as_they_came() -> None:
    async def handler(**kwargs: Any) -> str:
        return repr(kwargs)

    raw = Tool("raw", "Raw.", {"type": "object", "properties": {"n": {"type": "integer"}}}, handler)
    assert raw.argument_problems({"n": "x"}) == ["'n' must be integer, not a string"]
    assert asyncio.run(raw(n=1, extra=True)) == "{'n': 1, 'extra': True}"


def test_jsonschema_imported_off_the_loop_still_checks_iri_formats_for_everyone() -> None:
    """The builder thread imports jsonschema with its IRI grammar deferred: the grammar is built
    at the first "iri" check instead, and that check answers as it always did."""
    code = """
import sys
from nbagent._loop._checks import import_jsonschema
import_jsonschema()
assert "jsonschema" in sys.modules and "rfc3987_syntax" not in sys.modules
from jsonschema import Draft202012Validator, FormatChecker
v = Draft202012Validator({"format": "iri"}, format_checker=FormatChecker())
print(v.is_valid("https://example.org/caf\\u00e9"), v.is_valid("no scheme"))
print(sys.modules["rfc3987_syntax"].__file__.endswith("__init__.py"))
"""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True"]
