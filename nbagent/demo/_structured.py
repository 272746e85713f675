"""The demo model's structured answers: valid JSON built from the schema it was sent.

The schema comes from the request in any mode: native (the wire format's own field, read by the
mock into `Conversation.output_schema`), tool mode (the forced tool's input schema; under a
choice that forces some tool but names none, an output tool such as `final_result` if one is
offered, else the first tool; or the `final_answer` tool beside the user's tools) or prompted (a
JSON Schema written out after the word "schema" in the system prompt or a user message, as
nbagent's prompted mode, pydantic-ai's and instructor's JSON modes write it; in a ```json fence
when the prompt asks for one). JSON mode with no schema anywhere gets a JSON object. The values
are made from the prompt, deterministically (the same conversation gets the same answer):
strings from its words, a sentiment `enum` by a small word list, numbers within their bounds,
every required field and every constraint the schema states. A recursive schema closes a few
levels down: past them only required fields, and the fewest items an array allows.

Markers make an answer misbehave on demand, the first time only: after a reask (the request
carries the errors) the answer is valid. `[demo:schema_mismatch]` (valid JSON off the schema),
`[demo:invalid_json]` (not JSON), `[demo:refusal]` (refused: never reasked), `[demo:truncated]`
(cut at max_tokens: never reasked).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from ..mock import Conversation, Turn
from ..mock._output_request import ANY_TOOL, JSON_OBJECT
from ._arithmetic import find_expression

ANSWER_TOOL = "final_answer"  # tool mode's output tool (nbagent's name for it)
_OUTPUT_TOOL = "final_"  # output tools: nbagent's final_answer, pydantic-ai's final_result
_SCHEMA_WORD = re.compile(r"schema", re.I)
_SCHEMA_KEYS = ("properties", "$ref", "$defs", "anyOf", "oneOf", "allOf", "enum", "items")
_JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean")
_FENCE_ASK = re.compile(r"^.*```json.*$", re.M | re.I)  # a line asking for a fenced answer
_ANY_OBJECT = {"type": "object", "properties": {"answer": {"type": "string"}}}
# nbagent's and pydantic-ai's "N validation errors:", pydantic's "N validation errors for Model"
_REASK = re.compile(r"^\d+ validation errors?(?::| for \S+$)", re.M)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
MARKER = re.compile(r"\[demo:([a-z_]+)(?:=(\d+))?\]\s*", re.I)  # a cue, its name and number
_CLOSE_AT = 6  # nesting past which a value closes: required fields only, the fewest items
_GIVE_UP_AT = 40  # a schema with no finite value (a required self-reference) stops here
_POSITIVE = frozenset(
    [
        "love",
        "loved",
        "great",
        "excellent",
        "good",
        "wonderful",
        "amazing",
        "happy",
        "fast",
        "perfect",
        "recommend",
        "best",
        "delightful",
        "pleasant",
        "nice",
        "fantastic",
        "superb",
        "works",
        "brilliant",
    ]
)
_NEGATIVE = frozenset(
    [
        "hate",
        "hated",
        "bad",
        "terrible",
        "awful",
        "poor",
        "slow",
        "broken",
        "worst",
        "disappointing",
        "refund",
        "angry",
        "late",
        "cold",
        "rude",
        "never",
        "broke",
        "useless",
        "boring",
    ]
)
_SUMMARY_NAMES = ("summary", "title", "headline", "description", "text", "gist", "reason")
_RESULT_NAMES = ("value", "result", "answer", "total", "sum", "amount")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LIST_NAMES = ("keywords", "tags", "topics", "entities", "labels", "words")
_FORMATS = {  # a string of a `format`: the same value each time
    "date-time": "2025-01-15T09:30:00Z",
    "date": "2025-01-15",
    "time": "09:30:00",
    "email": "demo@example.com",
    "uri": "https://example.com/demo",
    "url": "https://example.com/demo",
}


@dataclass(frozen=True)
class StructuredAsk:
    """What a request asks the demo to answer in: the schema, the tool to call (None: answer
    in the text), whether the request names that tool (then no other may be called) and
    whether the text goes in a ```json fence."""

    schema: dict[str, Any]
    tool: str | None
    named: bool = False
    fenced: bool = False


def _is_schema(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    return value.get("type") in _JSON_TYPES or any(k in value for k in _SCHEMA_KEYS)


def _schema_in(text: str) -> dict[str, Any] | None:
    """The first JSON Schema written out in `text` shortly after the word "schema"."""
    decoder = json.JSONDecoder()
    for word in _SCHEMA_WORD.finditer(text):
        start = text.find("{", word.end(), word.end() + 200)
        if start < 0:
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if _is_schema(value):
            return dict(value)
    return None


def _prompted(conv: Conversation) -> tuple[dict[str, Any] | None, bool]:
    """The schema written out in the system prompt or a user message, and whether the prompt
    asks for the answer in a ```json fence (instructor's Markdown-JSON mode)."""
    texts = [conv.system, *(t.text for t in conv.turns if t.role == "user")]
    schema = next((s for s in map(_schema_in, texts) if s is not None), None)
    return schema, any(_FENCE_ASK.search(t) for t in texts)


def _forced_tool(conv: Conversation) -> str | None:
    """The tool the request makes the model call: the named one, or under a choice of any
    tool, an output tool if one is offered, else the first tool."""
    if conv.forced_tool != ANY_TOOL:
        return conv.forced_tool
    names = list(conv.tools)
    return next((n for n in names if n.startswith(_OUTPUT_TOOL)), names[0] if names else None)


def structured_ask(conv: Conversation) -> StructuredAsk | None:
    """The structured answer `conv` asks for, if any (see the module docstring)."""
    forced = _forced_tool(conv)
    if forced is not None and forced in conv.tools:
        return StructuredAsk(conv.tools[forced], forced, named=forced == conv.forced_tool)
    if ANSWER_TOOL in conv.tools:
        return StructuredAsk(conv.tools[ANSWER_TOOL], ANSWER_TOOL)
    native = conv.output_schema
    prompted, fenced = _prompted(conv)
    if native is not None and (prompted is None or native != JSON_OBJECT):
        return StructuredAsk(_ANY_OBJECT if native == JSON_OBJECT else native, None)
    return StructuredAsk(prompted, None, fenced=fenced) if prompted is not None else None


def is_reask(turn: Turn) -> bool:
    """A user turn asking again for an answer off its schema (as text, or as a tool result)."""
    if turn.role != "user":
        return False
    texts = [turn.text, *(r.content for r in turn.tool_results)]
    return any(_REASK.search(t) for t in texts if t)


# -- values from a schema ------------------------------------------------------------------------


_NOTE = re.compile(r"\{((?:\w+: [^,{}]+)(?:, \w+: [^,{}]+)*)\}\s*$")
_NUMERIC_NOTES = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    | {"minItems", "maxItems", "minLength", "maxLength"}
)


def _with_notes(node: dict[str, Any]) -> dict[str, Any]:
    """Constraints a provider's dialect moved into the description (`{minimum: 1, maximum:
    5}`, as Anthropic's and OpenAI's transforms write them), read back as a model would."""
    described = node.get("description")
    m = _NOTE.search(described) if isinstance(described, str) else None
    if m is None:
        return node
    found: dict[str, Any] = {}
    for pair in m.group(1).split(", "):
        key, _, value = pair.partition(": ")
        if key in _NUMERIC_NOTES and key not in node:
            try:
                found[key] = float(value) if "." in value else int(value)
            except ValueError:
                continue
    return {**node, **found} if found else node


class _Maker:
    def __init__(self, root: dict[str, Any], prompt: str, seed: str, found: str = "") -> None:
        self.root = root
        self.found = [float(n) for n in _NUMBER.findall(found)]  # what the tools returned
        self.expression = find_expression(prompt) or ""
        self.rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16))
        clean = " ".join(MARKER.sub(" ", _FENCE_ASK.sub(" ", prompt)).split())
        self.prompt = clean
        self.words = [w.lower() for w in _WORD.findall(clean)]
        pos = sum(w in _POSITIVE for w in self.words)
        neg = sum(w in _NEGATIVE for w in self.words)
        self.mood = (pos > neg) - (neg > pos)  # 1 positive, -1 negative, 0 neither

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        node = _with_notes(node)
        seen = 0
        while isinstance(node.get("$ref"), str) and seen < 20:
            target: Any = self.root
            path = node["$ref"].removeprefix("#").strip("/")  # "#" is the root itself
            for key in path.split("/") if path else ():
                target = target.get(key) if isinstance(target, dict) else None
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**(target if isinstance(target, dict) else {}), **rest}
            seen += 1
        return node

    def value(self, node: Any, name: str = "", depth: int = 0) -> Any:
        """A value for `node`; `depth` levels down, a value closes (see `_CLOSE_AT`)."""
        if not isinstance(node, dict) or depth > _GIVE_UP_AT:
            return None
        node = self.resolve(node)
        deep = depth >= _CLOSE_AT
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return self.choose(node["enum"], name)
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                real = [
                    b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")
                ]
                if deep and len(real) < len(branches):
                    return None  # a nullable field closes with null
                return self.value((real or branches)[0], name, depth + 1)
        all_of = node.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged: dict[str, Any] = {}
            for part in all_of:
                merged.update(self.resolve(part) if isinstance(part, dict) else {})
            return self.value(merged, name, depth + 1)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object" or (kind is None and "properties" in node):
            props = node.get("properties")
            props = props if isinstance(props, dict) else {}
            required = node.get("required")
            needed = set(required if isinstance(required, list) else []) if deep else None
            return {
                k: self.value(v, k, depth + 1)
                for k, v in props.items()
                if needed is None or k in needed
            }
        if kind == "array":
            low = int(node.get("minItems", 0 if deep else 1))
            high = int(node.get("maxItems", max(low, 3)))
            wanted = 3 if name.lower() in _LIST_NAMES else 2
            count = low if deep else max(low, min(high, wanted))
            items = node.get("items", {})
            if count == 0:
                return []
            if name.lower() in _LIST_NAMES and self.resolve(items).get("type") == "string":
                picked = list(dict.fromkeys(sorted(self.words, key=len, reverse=True)))
                picked = picked[:count] or ["demo"]
                return picked + ["demo"] * (low - len(picked))
            return [self.value(items, name, depth + 1) for _ in range(count)]
        if kind in ("integer", "number"):
            return self.number(node, name, kind == "integer")
        if kind == "boolean":
            return (
                self.mood >= 0
                if name.lower().startswith(("is_", "has_"))
                else self.rng.random() < 0.5
            )
        if kind == "null":
            return None
        return self.string(node, name)

    def choose(self, options: list[Any], name: str) -> Any:
        lowered = [str(o).lower() for o in options]
        if "positive" in lowered and "negative" in lowered:
            want = {1: "positive", -1: "negative"}.get(self.mood, "neutral")
            if want in lowered:
                return options[lowered.index(want)]
            if want == "neutral":
                return options[lowered.index("positive" if "mixed" not in lowered else "mixed")]
        return options[self.rng.randrange(len(options))]

    def number(self, node: dict[str, Any], name: str, integer: bool) -> Any:
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        lo = float(low) if isinstance(low, (int, float)) else 0.0
        hi = float(high) if isinstance(high, (int, float)) else lo + 100.0
        if "exclusiveMinimum" in node and low == node["exclusiveMinimum"]:
            lo += 1 if integer else 0.01
        if "exclusiveMaximum" in node and high == node["exclusiveMaximum"]:
            hi -= 1 if integer else 0.01
        hi = max(lo, hi)
        within = self.found and (low is None or self.found[-1] >= lo)
        within = within and (high is None or self.found[-1] <= hi)
        if name.lower() in _RESULT_NAMES and within:
            last = self.found[-1]  # a tool's result, as a model would quote it
            return round(last) if integer else last
        if name.lower() in ("score", "rating", "stars"):
            share = {1: 0.9, -1: 0.1, 0: 0.5}[self.mood]
        elif name.lower() in ("confidence", "probability"):
            share = 0.85
        else:
            share = self.rng.random()
        value = lo + (hi - lo) * share
        if integer:
            return round(value)
        return round(value, 2)

    def string(self, node: dict[str, Any], name: str) -> str:
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        if fmt == "uuid":
            digest = hashlib.sha256(self.prompt.encode()).hexdigest()
            return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"
        low = int(node.get("minLength", 1))
        high = int(node.get("maxLength", 200))
        lname = name.lower()
        if lname in ("language", "lang"):
            text = "en"
        elif lname in ("expression", "formula") and self.expression:
            text = self.expression
        elif any(n in lname for n in _SUMMARY_NAMES):
            words = self.prompt.split()
            text = " ".join(words[:12]) + ("…" if len(words) > 12 else "")
        elif self.words:
            text = self.words[self.rng.randrange(len(self.words))]
        else:
            text = "demo"
        text = text or "demo"
        if len(text) < low:
            text = (text + " ") * (low // max(1, len(text)) + 1)
        return text[:high].strip() if len(text[:high].strip()) >= low else text[:high]


def sample(schema: dict[str, Any], prompt: str, *, seed: str = "", found: str = "") -> Any:
    """A value valid for `schema`, made from `prompt`'s words (and the numbers in `found`, what
    the tools returned), the same for the same inputs."""
    return _Maker(schema, prompt, seed or prompt, found).value(schema)
