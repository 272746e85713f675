"""Structured outputs: what checking an answer and building a reask add per attempt.

A 2 KB answer (an order of 12 line items, nested models, an enum, a date) is checked the way a
run checks every attempt's answer (`StructuredOutput.check`: read the answer out of the message,
validate it against the converted schema, run the validators), against a bare
`Order.model_validate_json` on the same text. The wrong answer (three fields off the schema)
also builds the reask (the failed answer and the errors, `StructuredOutput.reask`), against a
bare `model_validate_json` that raises. The schema's conversion is paid once per agent: the
first `OutputSchema.of` of a new type, against the cached one every later run gets.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import json
import time
from typing import Any

from common import Goal, Report, median
from pydantic import BaseModel, Field, ValidationError

from nbagent._core._attempts import AttemptFailure, Sent
from nbagent._core._budget import Usage
from nbagent._core._messages import Message, TextBlock
from nbagent._loop._output_schema import OutputSchema
from nbagent._loop._output_step import StructuredOutput
from nbagent.providers import Completed
from nbagent.providers._scripted import ScriptedModel


class Status(str, enum.Enum):
    OPEN = "open"
    SHIPPED = "shipped"
    RETURNED = "returned"


class Line(BaseModel):
    sku: str = Field(min_length=3)
    title: str
    quantity: int = Field(ge=1)
    unit_price: float = Field(ge=0)
    tags: list[str] = []


class Order(BaseModel):
    """An order, read from a customer's email."""

    number: str
    status: Status
    placed: datetime.date
    customer: str
    lines: list[Line]
    note: str | None = None


def answer(n_lines: int = 12) -> str:
    lines = [
        {
            "sku": f"SKU-{i:04d}",
            "title": f"Stainless steel kettle, 1.7 litres, model {i}",
            "quantity": 1 + i % 3,
            "unit_price": 19.99 + i,
            "tags": ["kitchen", "electric", "gift"],
        }
        for i in range(n_lines)
    ]
    order = {
        "number": "INV-2025-0042",
        "status": "shipped",
        "placed": "2025-01-15",
        "customer": "Ann Example",
        "lines": lines,
        "note": "Leave at the door.",
    }
    return json.dumps(order)


def wrong(text: str) -> str:
    order = json.loads(text)
    order["status"] = "lost"
    order["lines"][3]["quantity"] = 0
    order["lines"][7]["sku"] = 7
    return json.dumps(order)


def completed(text: str) -> Completed:
    message = Message("assistant", (TextBlock(text),))
    return Completed(message, Usage(500, 600), "end_turn")


def per_call(fn: Any, n: int, repeats: int) -> float:
    """Median seconds per call of `fn` over `repeats` timed loops of `n` calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n)
    return median(times)


def run(short: bool) -> Report:
    rep = Report("output: checking a structured answer and building the reask, per attempt")
    n, repeats = (200, 1) if short else (5_000, 7)
    good = answer()
    bad = wrong(good)
    structured = StructuredOutput(
        OutputSchema.of(Order),
        mode="auto",
        validators=(),
        retries=2,
        providers=[ScriptedModel([])],
        tools=[],
    )
    ok_reply, bad_reply = completed(good), completed(bad)
    sent = Sent(ok_reply.usage)

    def bare_ok() -> None:
        Order.model_validate_json(good)

    def bare_bad() -> None:
        with contextlib.suppress(ValidationError):
            Order.model_validate_json(bad)

    def checked_ok() -> None:
        structured.check(ok_reply, 0, max_tokens=4096, sent=sent)

    def checked_bad() -> None:
        try:
            structured.check(bad_reply, 0, max_tokens=4096, sent=sent)
        except AttemptFailure as failure:
            structured.reask(failure.error, 0)  # type: ignore[arg-type]

    for fn in (bare_ok, bare_bad, checked_ok, checked_bad):  # warm up
        fn()
    rows = []
    added = {}
    for label, bare, ours in (
        ("valid answer", bare_ok, checked_ok),
        ("answer off its schema (+ the reask)", bare_bad, checked_bad),
    ):
        t_bare, t_ours = per_call(bare, n, repeats), per_call(ours, n, repeats)
        added[label] = (t_ours - t_bare) * 1e3
        rows.append([label, t_bare * 1e6, t_ours * 1e6, added[label] * 1e3])
    rep.lines.append(f"  answer: {len(good):,} bytes; {n:,} calls x {repeats} repeats, medians")
    rep.table(["answer", "bare us", "nbagent us", "added us"], rows)

    # conversion: once per schema (a new type each time), then the cache every run hits
    def fresh() -> None:
        new = type("Fresh", (Order,), {"__doc__": "A copy, converted from scratch."})
        OutputSchema.of(new)

    first = per_call(fresh, 20 if short else 200, repeats)
    cached = per_call(lambda: OutputSchema.of(Order), n, repeats)
    rep.lines.append(
        f"  schema conversion: first {first * 1e3:.2f} ms, cached {cached * 1e6:.2f} us"
    )
    rep.goals.append(
        Goal("ms added per attempt, valid answer", added["valid answer"], 0.2, "{:.3f}")
    )
    rep.goals.append(
        Goal(
            "ms added per attempt, wrong answer and its reask",
            added["answer off its schema (+ the reask)"],
            0.2,
            "{:.3f}",
        )
    )
    return rep
