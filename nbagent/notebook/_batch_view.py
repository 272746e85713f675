"""The live view of a batch (`nbagent.map`, either backend): counts, pace, one lane per agent.

It reads a plain snapshot (`BatchProgress.snapshot()`: done / running / waiting / failed, the
shared limiter's pace, retries per minute, one letter per lane) and knows nothing of how the
batch runs, so the local and the Ray backend show the same picture. Lanes are a row per agent
for small batches and a heat-strip of cells when there are hundreds.

Pushes are coalesced as in `TimelineWidget`: at most one per `min_interval` (0.1 s, about ten a
second); an early one schedules a trailing push on the running loop, so the last change shows.
The colours are in `COLOURS`, the one place that names them (the front end gets them with the
state).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from .._core._words import counted
from .._palette import COLORS, DARK_COLORS
from ._widget import Coalescer

__all__ = ["COLOURS", "DARK_COLOURS", "BatchView", "render_text", "show_batch_view"]

_ROLES = {
    "queued": "border",
    "running": "running",
    "waiting": "backoff",
    "ok": "ok",
    "failed": "error",
    "cancelled": "cancelled",
}

COLOURS: dict[str, str] = {state: COLORS[role] for state, role in _ROLES.items()}
"""Lane state → colour, from the shared palette (`nbagent._palette`, colour-blind safe)."""

DARK_COLOURS: dict[str, str] = {state: DARK_COLORS[role] for state, role in _ROLES.items()}
"""The same in a dark theme."""

LANE_ROWS_UP_TO = 48
"""Up to this many agents each get a labelled row; more become a heat-strip of cells."""

_STATES = {
    "q": "queued",
    "r": "running",
    "w": "waiting",
    "o": "ok",
    "f": "failed",
    "c": "cancelled",
}

_ESM = r"""
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
const STATES = {q: "queued", r: "running", w: "waiting", o: "ok", f: "failed", c: "cancelled"};

const BATCH_COUNTS = ["processing", "succeeded", "errored", "expired", "canceled"];

function drawBatches(s) {
  // one row per provider batch: its status, the provider's counts, its age, the next poll
  const table = el("table", "nbb-batches");
  table.setAttribute("aria-label", "provider batches");
  const head = el("tr");
  for (const h of ["batch", "submission", "status", ...BATCH_COUNTS, "elapsed", "next poll"]) {
    const th = el("th", "", h);
    th.scope = "col";
    head.append(th);
  }
  table.append(head);
  for (const b of s.batches) {
    const row = el("tr");
    row.dataset.status = b.status || "";
    const c = b.counts || {};
    const next = b.next_poll_s === null || b.next_poll_s === undefined ? "" : `${b.next_poll_s} s`;
    const which = b.submission > 1 ? `resubmission ${b.submission - 1}` : "first";
    const cells = [b.id || `#${b.n} (not sent yet)`, which,
      b.collected ? "collected" : (b.status || ""), ...BATCH_COUNTS.map((k) => c[k] ?? ""),
      `${b.elapsed_s ?? 0} s`, next];
    for (const v of cells) row.append(el("td", "", String(v)));
    table.append(row);
  }
  const box = el("div", "nbb-batchbox");
  box.append(table);
  if (s.state) {
    const how = "nbagent.batch.resume() picks it up after a restart";
    box.append(el("div", "nbb-state", `state: ${s.state} · ${how}`));
  }
  return box;
}

function draw(model, root) {
  const s = model.get("state") || {};
  const dark = document.body.dataset.jpThemeLight === "false";
  const colours = (dark ? s.colours_dark : s.colours) || s.colours || {};
  root.replaceChildren();
  const head = el("div", "nbb-head");
  const where = s.backend === "ray" ? `ray · ${s.workers} workers`
    : s.backend === "provider" ? "the provider's batch API" : "this process";
  const when = ` ${where} · ${s.elapsed_s ?? 0} s`;
  head.append(el("b", "", "nbagent.map"), el("span", "nbb-where", when));
  if (model.get("show_stop") && !s.finished) {
    const stop = el("button", "nbb-stop", model.get("stop_requested") ? "Stopping…" : "Stop");
    stop.title = "Cancel the batch";
    stop.disabled = model.get("stop_requested");
    stop.onclick = () => { model.set("stop_requested", true); model.save_changes(); };
    head.append(stop);
  }
  root.append(head);
  const bar = el("div", "nbb-bar");
  const total = Math.max(1, s.total || 0);
  const cancelled = s.cancelled || 0;
  const failed = (s.failed || 0) - cancelled;
  const parts = {ok: (s.done || 0) - (s.failed || 0), failed, cancelled};
  for (const k of ["ok", "failed", "cancelled"]) {
    const n = parts[k];
    const part = el("div", "nbb-fill");
    part.style.width = `${(100 * n) / total}%`;
    part.style.background = colours[k];
    bar.append(part);
  }
  root.append(bar);
  const counts = el("div", "nbb-counts");
  const chip = (key, label, value, colour) => {
    const c = el("span", "nbb-count");
    c.dataset.k = key;
    const dot = el("i", "nbb-dot");
    dot.style.background = colour || "transparent";
    c.append(dot, el("span", "", `${label} ${value}`));
    counts.append(c);
  };
  chip("done", "done", `${s.done || 0}/${s.total || 0}`, colours.ok);
  chip("running", "running", s.running || 0, colours.running);
  chip("waiting", "waiting", s.waiting || 0, colours.waiting);
  chip("failed", "failed", failed, colours.failed);
  if (cancelled) chip("cancelled", "cancelled", cancelled, colours.cancelled);
  chip("retries", "retries/min", s.retries_per_min || 0, "");
  if (s.reasked) chip("reasked", "reasked", s.reasked, "");  // answers asked for again
  const pace = s.pace || {};
  const rate = typeof pace.rate === "number" ? `${pace.rate.toFixed(1)}/s` : "learning";
  const blocked = pace.blocked_s > 0 ? ` · everyone waits ${pace.blocked_s.toFixed(1)} s` : "";
  chip("pace", "pace", rate + blocked, "");
  root.append(counts);
  if (s.batches && s.batches.length) root.append(drawBatches(s));
  const lanes = s.lanes || "";
  const heat = lanes.length > s.rows_up_to;
  const strip = el("div", heat ? "nbb-lanes nbb-heat" : "nbb-lanes nbb-rows");
  for (let i = 0; i < lanes.length; i++) {
    const state = STATES[lanes[i]] || "queued";
    if (heat) {
      const cell = el("i", "nbb-cell");
      cell.style.background = colours[state];
      cell.title = `#${i} ${state}`;
      strip.append(cell);
    } else {
      const row = el("div", "nbb-lane");
      row.dataset.state = state;
      const fill = el("i", "nbb-lane-fill");
      fill.style.background = colours[state];
      row.append(el("span", "nbb-lane-label", `#${i}`), fill, el("span", "nbb-lane-state", state));
      strip.append(row);
    }
  }
  root.append(strip);
}

export default {
  render({ model, el: host }) {
    const root = el("div", "nbb-root");
    host.append(root);
    const redraw = () => draw(model, root);
    model.on("change:state", redraw);
    model.on("change:stop_requested", redraw);
    // the lanes' colours follow JupyterLab's theme when it changes
    const theme = new MutationObserver(redraw);
    theme.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light"] });
    redraw();
    return () => theme.disconnect();
  },
};
"""

_CSS = """
.nbb-root { font: 12px/1.4 var(--jp-ui-font-family, sans-serif); padding: 4px 0; }
.nbb-head { display: flex; gap: 8px; align-items: center; }
.nbb-root { --nbb-muted: %(muted)s; --nbb-track: %(panel)s; }
body[data-jp-theme-light="false"] .nbb-root {
  --nbb-muted: %(dark_muted)s; --nbb-track: %(dark_panel)s; }
.nbb-where { color: var(--nbb-muted); }
.nbb-stop { margin-left: auto; }
.nbb-bar { display: flex; height: 8px; background: var(--nbb-track); border-radius: 4px;
  overflow: hidden; margin: 4px 0; }
.nbb-counts { display: flex; flex-wrap: wrap; gap: 12px; margin-bottom: 4px; }
.nbb-dot { display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 4px; }
.nbb-rows { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr));
  gap: 2px 12px; }
.nbb-lane { display: flex; align-items: center; gap: 6px; }
.nbb-lane-label { width: 32px; color: var(--nbb-muted); text-align: right; }
.nbb-lane-fill { display: inline-block; width: 60px; height: 8px; border-radius: 2px; }
.nbb-heat { display: flex; flex-wrap: wrap; gap: 1px; }
.nbb-cell { display: inline-block; width: 7px; height: 7px; }
.nbb-batches { border-collapse: collapse; margin: 4px 0; }
.nbb-batches th, .nbb-batches td { padding: 1px 8px; text-align: right; }
.nbb-batches th:first-child, .nbb-batches td:first-child { text-align: left; }
.nbb-state { color: var(--nbb-muted); }
"""
for _key, _value in (
    ("dark_muted", DARK_COLORS["muted"]),
    ("dark_panel", DARK_COLORS["panel"]),
    ("muted", COLORS["muted"]),
    ("panel", COLORS["panel"]),
):
    _CSS = _CSS.replace(f"%({_key})s", _value)


class BatchView(anywidget.AnyWidget):
    """The live batch view. `update(snapshot)` with `BatchProgress.snapshot()` dicts."""

    _esm = _ESM
    _css = _CSS

    state = traitlets.Dict().tag(sync=True)
    stop_requested = traitlets.Bool(False).tag(sync=True)
    show_stop = traitlets.Bool(False).tag(sync=True)

    def __init__(
        self,
        snapshot: dict[str, Any],
        *,
        on_stop: Callable[[], None] | None = None,
        min_interval: float = 0.1,
        now: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ) -> None:
        super().__init__(state=_dress(snapshot), show_stop=on_stop is not None, **kwargs)
        self.on_stop = on_stop
        self._pushes = Coalescer(self._push, min_interval, now)
        self._latest = snapshot
        self._finished = False
        self.observe(self._stop_changed, names="stop_requested")

    @property
    def pushes(self) -> int:
        """How many times the state was sent to the browser."""
        return self._pushes.count

    def update(self, snapshot: dict[str, Any], force: bool = False) -> None:
        """Show `snapshot`: now if the last push is old enough (or `force`), else shortly."""
        self._latest = snapshot
        self._pushes.changed(force)

    def finished(self) -> None:
        """The batch is over: no more Stop button, the last picture stays."""
        self._finished = True
        self._latest = dict(self.state)
        self._pushes.flush()

    def _push(self) -> None:
        self.state = _dress(self._latest, finished=self._finished)

    def _stop_changed(self, change: dict[str, Any]) -> None:
        if change["new"] and self.on_stop is not None:
            self.on_stop()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if isinstance(data, dict):
            data = {**data, "text/plain": render_text(self.state)}
        return data, metadata


def _dress(snapshot: dict[str, Any], finished: bool = False) -> dict[str, Any]:
    return {
        **snapshot,
        "colours": COLOURS,
        "colours_dark": DARK_COLOURS,
        "rows_up_to": LANE_ROWS_UP_TO,
        "finished": finished,
    }


def render_text(state: dict[str, Any]) -> str:
    """The view as one line of text, for front ends without widgets."""
    lanes = str(state.get("lanes", ""))
    counts = {name: lanes.count(code) for code, name in _STATES.items()}
    rate = (state.get("pace") or {}).get("rate")
    pace = f", pace {rate:.1f}/s" if isinstance(rate, (int, float)) else ""
    batches = state.get("batches") or []
    open_ = sum(1 for b in batches if not b.get("collected"))
    provider = (
        f", {counted(len(batches), 'provider batch', 'provider batches')} ({open_} open)"
        if batches
        else ""
    )
    return (
        f"nbagent.map: {state.get('done', 0)}/{state.get('total', 0)} done, "
        f"{counts['running']} running, {counts['waiting']} waiting, "
        f"{state.get('failed', 0)} failed, {state.get('retries_per_min', 0)} retries/min{pace}"
        + (f", {state['reasked']} reasked" if state.get("reasked") else "")
        + f"{provider}"
    )


def show_batch_view(
    snapshot: dict[str, Any], on_stop: Callable[[], None] | None = None
) -> BatchView:
    """Display a batch view under the current cell (with a Stop button when `on_stop`)."""
    from IPython.display import display

    view = BatchView(snapshot, on_stop=on_stop)
    display(view)  # type: ignore[no-untyped-call]
    return view
