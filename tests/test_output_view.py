"""A reask, seen everywhere: the widget's state (its own mark, an accessible name, the errors in
its details, the live region), the HTML report, the PNG's pattern, `analysis.summary`'s share of
tokens and cost, and the trace's span."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.colors import to_hex
from pydantic import BaseModel

import nbagent
from nbagent import Agent, ScriptedModel, VirtualClock
from nbagent._palette import COLORS, FAILURE_MARK, REASK_GLYPH, REASK_MARK, SWATCHES
from nbagent.analysis import plot_timeline, summary
from nbagent.notebook import TimelineState
from nbagent.notebook._export import render_static_html

WIDGET = Path(__file__).resolve().parent.parent / "nbagent" / "notebook"


class Person(BaseModel):
    name: str
    age: int


def reasked_run() -> tuple[Agent, TimelineState]:
    model = ScriptedModel(['{"name": 7, "age": "x"}', '{"name": "Ann", "age": 3}'])
    agent = Agent(model, output=Person, limiter=False, clock=VirtualClock())
    state = TimelineState(wall=lambda: 0.0)
    agent.subscribe(state)
    agent.run_sync("Who?", show=False)
    return agent, state


def test_the_widget_marks_the_reask_and_shows_what_was_wrong() -> None:
    _, state = reasked_run()
    snap = state.snapshot()
    reask, ok = snap["bars"]
    assert reask["action"] == "reask" and reask["outcome"] == "error"
    assert reask["output_errors"] == [
        "name: Input should be a valid string",
        "age: Input should be a valid integer, unable to parse string as an integer",
    ]
    assert (reask["input_tokens"], reask["output_tokens"]) == (10, 5)
    # a screen reader hears what happened, not "200 ..." for an answer that did arrive
    assert reask["aria"].startswith("request attempt 1 of 4: answer off its schema")
    assert reask["aria"].endswith("asked again with the errors (reask)")
    assert ok["action"] == "none"
    said = [text for _, text in snap["announcement"]["recent"]]
    assert any(t.startswith("the answer did not match its schema (name:") for t in said)
    assert snap["summary"]["reasks"] == 1


def test_the_reask_mark_is_its_own_pattern_and_glyph_in_the_widget_and_the_palette() -> None:
    assert REASK_MARK not in ("", FAILURE_MARK) and SWATCHES["reask"].mark == REASK_MARK
    js = (WIDGET / "timeline.js").read_text(encoding="utf-8")
    css = (WIDGET / "timeline.css").read_text(encoding="utf-8")
    assert f'const REASK_GLYPH = "{REASK_GLYPH}";' in js
    assert 'cls.push("nb-reask")' in js
    rule = re.search(r"\.nb-error\.nb-reask \{([^}]*)\}", css)
    assert rule is not None and "radial-gradient" in rule.group(1)  # dots, not the cross


def test_the_html_report_says_reask_and_lists_the_errors() -> None:
    _, state = reasked_run()
    page = render_static_html(state.snapshot())
    assert f"{REASK_GLYPH} reask" in page
    assert "sent back: name: Input should be a valid string" in page
    assert "<small>reasks</small><br><b>1</b>" in page


def test_the_png_dots_a_reask_where_it_crosses_out_a_failure() -> None:
    from matplotlib.collections import PolyCollection

    df = pd.DataFrame(
        {
            "run_id": ["r"] * 3,
            "phase": ["request"] * 3,
            "attempt": [1, 1, 1],
            "outcome": ["error", "error", "ok"],
            "error_kind": ["ServerError", "OutputInvalid", pd.NA],
            "status_code": [503, 200, pd.NA],
            "action": ["retry", "reask", "none"],
            "started_at": [0.0, 1.5, 3.0],
            "ended_at": [0.4, 2.9, 4.0],
            "duration_s": [0.4, 1.4, 1.0],
            "delay_s": [1.1, pd.NA, pd.NA],
        }
    )
    fig = plot_timeline(df, annotate=True)
    hatches = {
        coll.get_hatch()
        for coll in fig.axes[0].collections
        if isinstance(coll, PolyCollection)
        and to_hex(tuple(coll.get_facecolor()[0])) == COLORS["error"]
    }
    assert hatches == {FAILURE_MARK, REASK_MARK}  # the 503 crossed out, the reask dotted
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert f"{REASK_GLYPH} reask" in labels and "503" in labels
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert "reasked" in [t.get_text() for t in legend.get_texts()]


def test_summary_gives_the_reasks_share_of_tokens_and_cost() -> None:
    agent, _ = reasked_run()
    df = agent.attempts.copy()
    df["cost_usd"] = [0.003, 0.001]  # a priced model's costs
    table = summary(df).set_index(["error_kind", "action"])
    reask = table.loc[("OutputInvalid", "reask")]
    assert reask["count"] == 1 and reask["tokens"] == 15
    assert reask["token_share"] == pytest.approx(0.5)
    assert reask["cost_usd"] == pytest.approx(0.003) and reask["cost_share"] == pytest.approx(0.75)
    free = summary(agent.attempts)  # the scripted model costs nothing: no share to give
    assert free["cost_share"].isna().all()
    assert not pd.isna(free["token_share"]).any()


def test_the_reask_is_a_span_with_the_errors_type_and_its_tokens() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        with nbagent.instrument(provider):
            reasked_run()
    finally:
        provider.shutdown()
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    attrs: list[dict[str, Any]] = [dict(s.attributes or {}) for s in chats]
    first, second = sorted(zip(chats, attrs, strict=True), key=lambda p: p[0].start_time or 0)
    assert first[1]["error.type"] == "OutputInvalid" and first[1]["nbagent.action"] == "reask"
    assert first[1]["gen_ai.usage.input_tokens"] == 10
    errors = list(first[1]["nbagent.output.errors"])
    assert errors[:1] == ["name: Input should be a valid string"]
    assert second[1]["nbagent.action"] == "none"
