"""A run as one self-contained HTML file, and text for frontends that cannot run widgets.

The export inlines the widget's own ES module and CSS and drives them with a tiny fake model
over the saved state, so the file shows exactly what the notebook showed, offline, with no
external URL of any kind. The state travels as JSON inside a `<script type="application/json">`
element with `<`, `>` and `&` escaped, so text such as `</script>` in the conversation cannot
end the element early.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from .._core._words import counted
from .._palette import COLORS, REASK_GLYPH
from ._values import seconds
from ._waiting import waits_after

_HERE = Path(__file__).parent
_EXPORT = "export default"


class _HasSnapshot(Protocol):
    def snapshot(self) -> dict[str, Any]: ...


def _state_of(state: Mapping[str, Any] | _HasSnapshot) -> Mapping[str, Any]:
    if isinstance(state, Mapping):
        return state
    return state.snapshot()


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element (and valid JavaScript)."""
    text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _module_source() -> str:
    """timeline.js, turned from a module with a default export into inline statements, then
    export_model.js: a tiny fake widget model over the saved state, which renders it."""
    source = (_HERE / "timeline.js").read_text(encoding="utf-8")
    driver = (_HERE / "export_model.js").read_text(encoding="utf-8")
    if source.count(_EXPORT) != 1 or "</script" in (source + driver).lower():
        raise RuntimeError("timeline.js must have one default export and no '</script'")
    return source.replace(_EXPORT, "const nbTimeline =") + "\n" + driver


def _css_source() -> str:
    css = (_HERE / "timeline.css").read_text(encoding="utf-8")
    if "</style" in css.lower():
        raise RuntimeError("timeline.css must not contain '</style'")
    return css


def export_html(
    state_snapshot: Mapping[str, Any] | _HasSnapshot,
    path: str | os.PathLike[str] | None = None,
    *,
    title: str = "nbagent run",
) -> str:
    """The page as a string; also written to `path` (UTF-8) when given.

    `state_snapshot` is `TimelineState.snapshot()` (a `TimelineState` or anything with a
    `snapshot()` method works too). Without JavaScript the page still shows a static summary.

    Args:
        state_snapshot: The timeline's state.
        path: Where to write the page; None to only return it.
        title: The page's title.

    Returns:
        The page's HTML.
    """
    state = _state_of(state_snapshot)
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="generator" content="nbagent">',
            f"<title>{html.escape(title)}</title>",
            "<style>",
            _css_source(),
            "</style>",
            "</head>",
            '<body class="nb-page">',
            f'<div id="nbagent-root">{render_static_html(state)}</div>',
            '<script type="application/json" id="nbagent-state">',
            script_json(dict(state)),
            "</script>",
            '<script type="module">',
            _module_source(),
            "</script>",
            "</body>",
            "</html>",
            "",
        ]
    )
    if path is not None:
        Path(path).write_text(page, encoding="utf-8")
    return page


def _reasks(numbers: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The structured answers asked for again, an item only when there were some."""
    return [("reasks", str(numbers["reasks"]))] if numbers.get("reasks") else []


def _tokens(numbers: Mapping[str, Any]) -> tuple[str, str]:
    tokens_in, tokens_out = numbers.get("input_tokens") or 0, numbers.get("output_tokens") or 0
    return "tokens", f"{tokens_in:,} in, {tokens_out:,} out"


def _summary_items(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    items = [
        ("end", str(summary.get("end_reason") or "—")),
        ("attempts", str(summary.get("attempts", 0))),
        ("retries", str(summary.get("retries", 0))),
        ("waiting", seconds(summary.get("waiting_s"))),
        ("tools", f"{summary.get('tool_calls', 0)} ({summary.get('tool_errors', 0)} errors)"),
        *_reasks(summary),
        _tokens(summary),  # a run's summary always counts them (0 when nothing said)
    ]
    cost = summary.get("cost_usd")
    if cost is not None:
        items.append(("cost", f"${float(cost):.4f}"))
    items.append(("time", seconds(summary.get("duration_s"))))
    return items


def _session_items(session: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The session headline's numbers, in the order the widget shows them."""

    def failed(total: Any, bad: Any) -> str:
        return f"{total} ({bad} failed)" if bad else str(total)

    kinds = [
        f"{session.get(key)} {word}"
        for key, word in (
            ("retry_after_waits", "Retry-After"),
            ("backoff_waits", "backoff"),
            ("paced_waits", "paced"),
        )
        if session.get(key)
    ]
    waits = seconds(session.get("waiting_s")) + (f" ({', '.join(kinds)})" if kinds else "")
    ended = session.get("last_error") or session.get("last_end_reason") or "running"
    items = [
        ("runs", failed(session.get("runs"), session.get("runs_failed"))),
        ("attempts", failed(session.get("attempts"), session.get("failed_attempts"))),
        ("retries", str(session.get("retries", 0))),
        ("waits", waits),
        ("tool errors", f"{session.get('tool_errors', 0)} of {session.get('tool_calls', 0)}"),
        ("compactions", str(session.get("compactions", 0))),
        *_reasks(session),
        _tokens(session),
        ("time", seconds(session.get("duration_s"))),
        ("ended with", str(ended)),
    ]
    return items


def _headline(state: Mapping[str, Any]) -> tuple[str, list[tuple[str, str]]] | None:
    session, summary = state.get("session"), state.get("summary")
    if session:
        runs = counted(int(session.get("runs") or 0), "run")
        return f"session of {runs}", _session_items(session)
    if summary:
        return "run", _summary_items(summary)
    return None


def render_text(state_snapshot: Mapping[str, Any] | _HasSnapshot) -> str:
    """The status line and the summary (of the session, when there were several runs)."""
    state = _state_of(state_snapshot)
    lines = [f"nbagent: {state.get('status') or 'idle'}"]
    headline = _headline(state)
    if headline:
        what, items = headline
        lines.append(f"{what}: " + ", ".join(f"{k} {v}" for k, v in items))
    return "\n".join(lines)


_OUTCOME_COLOURS = {  # words on white: the palette's text shades (4.5:1 or more)
    "ok": COLORS["ok_dark"],
    "error": COLORS["error_dark"],
    "cancelled": COLORS["paced_text"],
    "running": COLORS["compaction_text"],
}


def _run_lines(state: Mapping[str, Any]) -> str:
    """One line per run of a session: its prompt and how it ended."""
    lines = []
    for i, run in enumerate(state.get("runs") or [], 1):
        summary = run.get("summary") or {}
        end = summary.get("error") or summary.get("end_reason") or "running"
        colour = COLORS["error_dark"] if summary.get("error") else COLORS["ok_dark"]
        lines.append(
            f"<li>{i}. {html.escape(str(run.get('prompt') or ''))} — "
            f"<b style='color:{colour}'>{html.escape(str(end))}</b>, "
            f"{counted(int(summary.get('attempts') or 0), 'attempt')}, "
            f"{counted(int(summary.get('retries') or 0), 'retry', 'retries')}</li>"
        )
    return "<ul style='list-style:none;padding-left:0'>" + "".join(lines) + "</ul>"


def render_static_html(state_snapshot: Mapping[str, Any] | _HasSnapshot) -> str:
    """A script-free HTML fragment: status, summary, attempts and conversation.

    Inline styles only, since notebook viewers strip <style> and never run widgets.
    """
    state = _state_of(state_snapshot)
    esc = html.escape
    out = ['<div class="nb-static" style="font-family:sans-serif;font-size:13px">']
    out.append(f"<p><b>nbagent</b> — {esc(str(state.get('status') or 'idle'))}</p>")
    headline = _headline(state)
    if headline:
        cells = "".join(
            f"<td style='padding:2px 10px 2px 0'><small>{esc(k)}</small><br><b>{esc(v)}</b></td>"
            for k, v in headline[1]
        )
        out.append(f"<table><caption style='text-align:left'>{esc(headline[0])}</caption>")
        out.append(f"<tr>{cells}</tr></table>")
    if state.get("session"):
        out.append(_run_lines(state))
    rows = []
    # Each retried attempt is followed by its wait, in the same run and lane.
    bars = state.get("bars") or []
    for bar, wait in zip(bars, waits_after(bars, state.get("waits") or []), strict=True):
        outcome = str(bar.get("outcome"))
        colour = _OUTCOME_COLOURS.get(outcome, COLORS["paced_text"])
        start, end = bar.get("start"), bar.get("end")
        took = seconds(end - start) if start is not None and end is not None else "running"
        detail = str(bar.get("detail") or "")
        if bar.get("action") == "reask":  # its own glyph, as in the widget
            outcome = f"{REASK_GLYPH} reask"
        rows.append(
            "<tr>"
            f"<td style='padding:1px 8px 1px 0'>{esc(str(bar.get('lane')))}</td>"
            f"<td style='padding:1px 8px 1px 0'>{esc(str(bar.get('label')))}</td>"
            f"<td style='padding:1px 8px 1px 0;color:{colour}'><b>{esc(outcome)}</b></td>"
            f"<td style='padding:1px 8px 1px 0'>{took}</td>"
            f"<td>{esc(detail[:300])}</td>"
            "</tr>"
        )
        errors = bar.get("output_errors") or []
        if errors:  # what was wrong with a structured answer, as the model was told
            listed = "; ".join(esc(str(e)) for e in errors)
            rows.append(
                f"<tr><td></td><td colspan='4' style='color:{COLORS['error_dark']}'>"
                f"sent back: {listed}</td></tr>"
            )
        if wait is not None:
            why = "server's Retry-After" if wait.get("server_wish") else "backoff"
            rows.append(
                f"<tr><td></td><td colspan='4' style='color:{COLORS['warning']}'>waited "
                f"{seconds(wait.get('delay_s'))} ({why})</td></tr>"
            )
    if rows:
        out.append("<table style='border-collapse:collapse'>" + "".join(rows) + "</table>")
    conv = []
    for entry in state.get("conversation") or []:
        kind = entry.get("kind")
        if kind == "message":
            parts = []
            for block in entry.get("blocks") or []:
                btype = block.get("type")
                if btype in ("text", "thinking"):
                    parts.append(esc(str(block.get("text", ""))))
                elif btype == "tool_use":
                    parts.append(
                        f"<code>→ {esc(str(block.get('name')))} "
                        f"{esc(str(block.get('arguments', ''))[:300])}</code>"
                    )
                elif btype == "tool_result":
                    colour = COLORS["error_dark"] if block.get("is_error") else COLORS["ok_dark"]
                    label = "tool error" if block.get("is_error") else "tool result"
                    parts.append(
                        f"<span style='color:{colour}'>{label}: "
                        f"{esc(str(block.get('text', ''))[:1000])}</span>"
                    )
            role = esc(str(entry.get("role")))
            conv.append(f"<li><b>{role}</b>: {'<br>'.join(parts)}</li>")
        elif kind == "discarded":
            conv.append(
                f"<li><b>discarded</b> ({esc(str(entry.get('reason', '')))}): "
                f"<s>{esc(str(entry.get('text', '')))}</s></li>"
            )
        elif kind == "note":
            conv.append(f"<li><i>{esc(str(entry.get('text', '')))}</i></li>")
        elif kind == "streaming" and entry.get("text"):
            conv.append(f"<li><b>assistant (partial)</b>: {esc(str(entry.get('text')))}</li>")
    if conv:
        out.append("<ul style='list-style:none;padding-left:0'>" + "".join(conv) + "</ul>")
    out.append("</div>")
    return "".join(out)
