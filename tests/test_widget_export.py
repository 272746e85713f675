"""The self-contained HTML export of a run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.timeline_script import TOOL_ERROR, run_events

from nbagent._core._messages import Message
from nbagent.events import MessageCommitted, RunFinished
from nbagent.notebook import TimelineState, TimelineWidget, export_html
from nbagent.notebook._export import render_static_html, render_text, script_json

SENTINEL_KEY = "sk-ant-SENTINEL-do-not-leak-0123456789"
BREAKOUT = "</script><script>alert('owned')</script><!-- & \u2028"


def finished_state(*extra: object) -> TimelineState:
    timeline = TimelineState(wall=lambda: 1_000.0)
    events = run_events()
    for event in [*events[:-1], *extra, events[-1]]:
        timeline(event)  # type: ignore[arg-type]
    return timeline


def embedded_state(page: str) -> dict[str, object]:
    match = re.search(
        r'<script type="application/json" id="nbagent-state">\n(.*?)\n</script>', page, re.S
    )
    assert match is not None
    data: dict[str, object] = json.loads(match.group(1))
    return data


def test_export_has_no_external_url_and_no_key(tmp_path: Path) -> None:
    page = export_html(finished_state().snapshot(), tmp_path / "run.html", title="A run")
    assert (tmp_path / "run.html").read_text(encoding="utf-8") == page
    lowered = page.lower()
    assert "http://" not in lowered
    assert "https://" not in lowered
    assert "//cdn" not in lowered
    assert "src=" not in lowered  # nothing loaded from anywhere
    assert "@import" not in lowered
    assert SENTINEL_KEY not in page
    assert "<title>A run</title>" in page
    bars = embedded_state(page)["bars"]
    assert isinstance(bars, list)
    assert bars[2]["detail"] == TOOL_ERROR


def test_the_widget_module_and_css_are_inlined() -> None:
    page = export_html(finished_state())
    module = (Path(__file__).parents[1] / "nbagent/notebook/timeline.js").read_text()
    assert "function render({ model, el })" in page
    assert module.replace("export default", "const nbTimeline =") in page
    assert ".nb-tool-error" in page
    assert '<script type="module">' in page


def test_script_text_in_the_conversation_cannot_break_out() -> None:
    hostile = MessageCommitted(
        index=0, run_id="run-1", time=109.6, message=Message.assistant(BREAKOUT)
    )
    timeline = finished_state(hostile)
    page = export_html(timeline.snapshot(), title="</title><script>x</script>")
    # exactly the two script elements of the page, each closed once
    assert page.count("<script") == 2
    assert page.count("</script>") == 2
    assert "<title>&lt;/title&gt;&lt;script&gt;x&lt;/script&gt;</title>" in page
    # and the text survives the round trip unchanged
    conversation = embedded_state(page)["conversation"]
    texts = [
        b["text"]
        for e in conversation  # type: ignore[attr-defined]
        for b in e.get("blocks", [])
        if b.get("type") == "text"
    ]
    assert BREAKOUT in texts


def test_script_json_escapes_markup_characters() -> None:
    text = script_json({"a": "</script>&<!--\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text
    assert json.loads(text) == {"a": "</script>&<!--\u2028"}


def test_static_fallbacks_read_well() -> None:
    timeline = finished_state()
    text = render_text(timeline)
    assert text.splitlines()[0] == "nbagent: done: end_turn"
    assert "attempts 6" in text and "waiting 4.4s" in text
    fragment = render_static_html(timeline)
    assert "<s>Hel</s>" in fragment
    assert "tool error: Tool execution failed for `read_file`" in fragment
    assert "waited 2.0s (server's Retry-After)" in fragment
    assert "waited 2.4s (backoff)" in fragment
    assert "<script" not in fragment


def test_static_fallback_escapes_text() -> None:
    hostile = MessageCommitted(
        index=0, run_id="run-1", time=109.6, message=Message.assistant(BREAKOUT)
    )
    fragment = render_static_html(finished_state(hostile))
    assert "<script>" not in fragment
    assert "&lt;/script&gt;" in fragment


def test_widget_exports_what_it_shows(tmp_path: Path) -> None:
    widget = TimelineWidget(wall=lambda: 1_000.0)
    for event in run_events():
        widget(event)
    assert isinstance(run_events()[-1], RunFinished)
    page = widget.export_html(tmp_path / "w.html")
    assert embedded_state(page) == json.loads(json.dumps(widget.state))
