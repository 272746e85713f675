// nbagent timeline: one ES module, no build step, no imports.
//
// Renders the state dict that nbagent.notebook.state.TimelineState produces: a lane per phase
// (requests, compaction, tools) with a bar per attempt, backoff waits as hatched gaps, the
// status line with a live countdown, the conversation and a summary. The same module runs in
// the notebook (anywidget) and in the exported HTML file (with a small fake model).

const LANES = [
  ["request", "requests"],
  ["compaction", "compaction"],
  ["tool", "tools"],
];
const ROW_HEIGHT = 22;
const ROW_GAP = 4;
const LAYER_STRIP = 14;

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") Object.assign(node.style, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function seconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 60) return `${Math.round(s)}s`;
  const m = Math.floor(s / 60);
  return `${m}m ${Math.round(s - m * 60)}s`;
}

function count(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
}

function money(c) {
  if (c === null || c === undefined) return "—";
  if (c === 0) return "$0";
  return c < 0.01 ? `$${c.toFixed(4)}` : `$${c.toFixed(2)}`;
}

function remaining(state) {
  if (!state.active || state.wait_until === null || state.wait_until === undefined) return null;
  return state.wait_until + (state.clock_offset || 0) - Date.now() / 1000;
}

function countdownText(state) {
  const rem = remaining(state);
  if (rem === null) return "";
  const verb = state.wait && state.wait.kind === "paced" ? "sending" : "retrying";
  return rem > 0.05 ? `${verb} in ${rem.toFixed(1)}s` : `${verb} now`;
}

function statusNode(state) {
  const kind = state.status_kind || "idle";
  const wait = state.wait;
  const parts = [];
  if (wait && remaining(state) !== null) {
    parts.push(`${wait.label}: `);
    if (wait.server_wish) parts.push(`server asked to wait ${seconds(wait.delay_s)}, `);
    parts.push(h("span", { class: "nb-countdown" }, countdownText(state)));
    if (wait.next_attempt) parts.push(` (attempt ${wait.next_attempt}/${wait.max_attempts})`);
  } else {
    parts.push(state.status || "idle");
  }
  return h(
    "div",
    { class: `nb-status nb-status-${kind}` },
    h("span", { class: "nb-dot" }),
    h("span", { class: "nb-status-text" }, parts),
  );
}

// Greedy interval packing: overlapping items (parallel tool calls) get their own rows.
function packRows(items, t1) {
  const rowEnds = [];
  for (const item of items) {
    const end = item.end ?? t1;
    let row = rowEnds.findIndex((e) => e <= item.start + 1e-9);
    if (row < 0) {
      row = rowEnds.length;
      rowEnds.push(end);
    } else {
      rowEnds[row] = end;
    }
    item.row = row;
  }
  return Math.max(1, rowEnds.length);
}

// An intended call that an outer layer retried (a watched SDK client inside a framework that
// retries too): each of its tries becomes a group drawn around the SDK attempts it made, so the
// layers read nested, the outer tries as groups, the SDK's retries inside.
function layerGroups(state, bars, t1) {
  const byCall = new Map();
  for (const r of state.runs || []) {
    if (!r.call) continue;
    if (!byCall.has(r.call)) byCall.set(r.call, []);
    byCall.get(r.call).push(r);
  }
  const groups = [];
  for (const tries of byCall.values()) {
    if (tries.length < 2) continue;
    const total = tries.reduce((n, r) => n + bars.filter((b) => b.run_id === r.run_id).length, 0);
    for (const r of tries) {
      const mine = bars.filter((b) => b.run_id === r.run_id);
      if (!mine.length) continue;
      groups.push({
        layer: r.layer_attempt,
        tries: tries.length,
        requests: mine.length,
        total,
        start: Math.min(...mine.map((b) => b.start)),
        end: Math.max(...mine.map((b) => b.end ?? t1)),
      });
    }
  }
  return groups;
}

function niceStep(span) {
  const steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
  return steps.find((s) => span / s <= 8) || 7200;
}

// The time axis: seconds to drawn position. The compressed mapping (long idle stretches drawn
// shorter, marked "//") comes computed from Python in state.axis, the very one the PNGs use
// (nbagent/_axis.py); here it is only interpolated. Without it (an old export): linear.
function timeAxis(state, t0, t1) {
  const a = state.axis;
  if (a && a.times && a.times.length >= 2 && Math.abs(a.t0 - t0) < 1e-6) {
    const xs = a.times;
    const ys = a.positions;
    const n = xs.length - 1;
    const rel = (x) => {
      if (x <= xs[0]) return ys[0] + (x - xs[0]);
      if (x >= xs[n]) return ys[n] + (x - xs[n]);
      let i = 0;
      while (xs[i + 1] < x) i++;
      const w = xs[i + 1] - xs[i];
      return w > 0 ? ys[i] + ((ys[i + 1] - ys[i]) * (x - xs[i])) / w : ys[i + 1];
    };
    return { rel, width: Math.max(rel(t1 - t0), 0.001), breaks: a.breaks || [], ticks: a.ticks || [] };
  }
  const width = Math.max(t1 - t0, 0.001);
  const step = niceStep(width * 1.02);
  const ticks = [];
  for (let t = 0; t <= width * 1.02 + 1e-9; t += step) {
    ticks.push([t, step < 1 ? `${t.toFixed(1)}s` : seconds(t).replace(".0s", "s")]);
  }
  return { rel: (x) => x, width, breaks: [], ticks };
}

// The lanes to draw: a lane per phase (requests, compaction, tools) for all the runs, or, with
// state.lanes_by === "run" (the demo's report), a row per run, labelled with its prompt, with
// a lane for each phase the run used, as the demo's timeline.png draws them.
function laneList(state, bars, waits) {
  const runs = state.runs || [];
  if (state.lanes_by !== "run" || !runs.length) {
    return LANES.map(([lane, title]) => ({
      key: lane,
      phase: lane,
      title,
      bars: bars.filter((b) => b.lane === lane),
      waits: waits.filter((w) => w.lane === lane),
      fallbacks: lane === "request" ? () => true : null,
      run: null,
    }));
  }
  const out = [];
  runs.forEach((run, i) => {
    for (const [lane, title] of LANES) {
      const mine = (x) => x.lane === lane && x.run_id === run.run_id;
      const own = bars.filter(mine);
      const ownWaits = waits.filter(mine);
      if (lane !== "request" && !own.length && !ownWaits.length) continue;
      out.push({
        key: `${lane}-${i + 1}`,
        phase: lane,
        title: lane === "request" ? `${i + 1} · ${run.prompt || run.run_id}` : title,
        bars: own,
        waits: ownWaits,
        fallbacks: lane === "request" ? (f) => !f.run_id || f.run_id === run.run_id : null,
        run: lane === "request" ? run : null,
      });
    }
  });
  return out;
}

function timeline(state, ui) {
  const bars = (state.bars || []).map((b) => ({ ...b }));
  const waits = (state.waits || []).map((w) => ({ ...w }));
  const fallbacks = state.fallbacks || [];
  let t0 = state.start;
  let t1 = state.now ?? t0;
  for (const item of [...bars, ...waits]) {
    if (t0 === null || t0 === undefined || item.start < t0) t0 = item.start;
    t1 = Math.max(t1 ?? item.start, item.start, item.end ?? item.start);
  }
  if (t0 === null || t0 === undefined) {
    return h("div", { class: "nb-timeline nb-empty" }, "No attempts yet.");
  }
  const axis = timeAxis(state, t0, t1);
  const span = axis.width * 1.02;
  const at = (t) => (axis.rel(t - t0) / span) * 100;
  const pct = (t) => `${at(t).toFixed(3)}%`;
  const width = (a, b) => `${(at(b) - at(a)).toFixed(3)}%`;
  const when = (a, b) => `at ${seconds(a - t0)}${b === null || b === undefined ? "" : `–${seconds(b - t0)}`}`;
  const activeWait = remaining(state) !== null ? state.wait_until : null;

  const byRun = state.lanes_by === "run" && (state.runs || []).length > 0;
  const lanes = laneList(state, bars, waits).map((d) => {
    const lane = d.key;
    const title = d.title;
    const laneBars = d.bars;
    for (const b of laneBars) b.laneKey = d.key;
    // Compaction spans go below the summarising requests they contain.
    const spans = laneBars.filter((b) => b.kind === "compaction");
    const others = laneBars.filter((b) => b.kind !== "compaction");
    const othersRows = others.length ? packRows(others, t1) : 0;
    const spanRows = spans.length ? packRows(spans, t1) : 0;
    for (const s of spans) s.row += othersRows;
    const rows = Math.max(1, othersRows + spanRows);
    const groups = d.phase === "request" ? layerGroups(state, others, t1) : [];
    const strip = groups.length ? LAYER_STRIP : 0; // room above the bars for the groups' labels
    const track = h("div", {
      class: "nb-track",
      style: { height: `${strip + rows * ROW_HEIGHT + (rows + 1) * ROW_GAP}px` },
    });
    for (const g of groups) {
      const requests = `${g.requests} request${g.requests === 1 ? "" : "s"}`;
      track.append(
        h(
          "div",
          {
            class: "nb-layer",
            "aria-hidden": "true",
            title: `the outer layer's try ${g.layer} of ${g.tries}: ${requests} by the SDK inside; ${g.total} requests for this one call`,
            style: {
              left: pct(g.start),
              width: width(g.start, g.end),
              top: "1px",
              height: `${strip + rows * ROW_HEIGHT + (rows - 1) * ROW_GAP + ROW_GAP}px`,
            },
          },
          h("span", { class: "nb-layer-label" }, `try ${g.layer}`),
        ),
      );
    }
    for (const w of d.waits) {
      const active = activeWait !== null && Math.abs(w.end - activeWait) < 1e-6;
      const cls = [
        "nb-wait",
        w.server_wish ? "nb-server-wish" : w.kind === "paced" ? "nb-paced" : "",
        active ? "nb-wait-active" : "",
      ];
      const label = w.server_wish
        ? `Retry-After ${seconds(w.delay_s)}`
        : w.kind === "paced"
          ? `paced ${seconds(w.delay_s)}`
          : `backoff ${seconds(w.delay_s)}`;
      track.append(
        h(
          "div",
          {
            class: cls.filter(Boolean).join(" "),
            "aria-hidden": "true",
            title: `${w.detail || w.label}\n${when(w.start, w.end)}: waited ${seconds(w.delay_s)}${
              w.server_wish
                ? " (the server's Retry-After)"
                : w.kind === "paced"
                  ? " (the shared rate limiter)"
                  : " (backoff policy)"
            }`,
            style: {
              left: pct(w.start),
              width: width(w.start, w.end),
              top: `${strip + ROW_GAP}px`,
              height: `${rows * ROW_HEIGHT + (rows - 1) * ROW_GAP}px`,
            },
          },
          h(
            "span",
            { class: "nb-wait-label", "data-short": active ? null : seconds(w.delay_s) },
            active ? countdownText(state) : label,
          ),
        ),
      );
    }
    // Keyboard: the lane is a toolbar; Tab enters it at one bar (the last one focused, else the
    // first), the arrow keys, Home and End move between its bars (WAI-ARIA APG roving tabindex).
    const order = [...laneBars].sort((x, y) => x.start - y.start || x.id - y.id);
    const current = order.find((b) => b.id === ui.focus[lane]) || order[0];
    for (const b of laneBars) {
      const end = b.end ?? t1;
      const cls = ["nb-bar", `nb-${b.outcome}`, `nb-kind-${b.kind}`];
      if (b.kind === "tool" && b.outcome !== "running") {
        cls.push(b.is_error ? "nb-tool-error" : "nb-tool-ok");
      }
      if (b.action === "reask") cls.push("nb-reask");
      if (ui.selected === b.id) cls.push("nb-selected");
      const times = when(b.start, b.end);
      const title = b.detail ? `${b.label}\n${b.detail}\n${times}` : `${b.label}\n${times}`;
      track.append(
        h(
          "div",
          {
            class: cls.join(" "),
            "data-id": b.id,
            "data-short": shortLabel(b),
            title,
            role: "button",
            "aria-label": b.aria || b.label,
            "aria-expanded": ui.selected === b.id ? "true" : "false",
            "aria-controls": ui.selected === b.id ? ui.detailId : null,
            tabindex: b === current ? "0" : "-1",
            style: {
              left: pct(b.start),
              width: width(b.start, end),
              top: `${strip + ROW_GAP + b.row * (ROW_HEIGHT + ROW_GAP)}px`,
              height: `${ROW_HEIGHT}px`,
            },
            onclick: () => ui.select(b.id),
            onkeydown: (e) => ui.barKey(e, b, order),
          },
          h("span", { class: "nb-bar-label" }, barLabel(b)),
        ),
      );
    }
    if (d.fallbacks) {
      for (const f of fallbacks.filter(d.fallbacks)) {
        track.append(
          h(
            "div",
            {
              class: "nb-fallback",
              "aria-hidden": "true",
              title: `${f.label}: fallback from ${f.from_model} to ${f.to_model}${
                f.message ? `\n${f.message}` : ""
              }`,
              style: { left: pct(f.time) },
            },
            h("span", { class: "nb-fallback-label" }, `↪ ${f.to_model}`),
          ),
        );
      }
    }
    if (laneBars.length) {
      track.setAttribute("role", "toolbar");
      const n = laneBars.length;
      track.setAttribute("aria-label", `${title}: ${n} bar${n === 1 ? "" : "s"}`);
    }
    const empty = laneBars.length === 0 && d.waits.length === 0;
    const runLabel = d.run ? " nb-lane-run" : "";
    return h(
      "div",
      {
        class: `nb-lane nb-lane-${d.phase}${empty ? " nb-lane-empty" : ""}${d.run ? " nb-run-first" : ""}`,
        "data-lane": d.phase,
        "data-key": d.key,
      },
      h(
        "div",
        { class: `nb-lane-label${runLabel}`, "aria-hidden": "true", title: d.run ? d.run.prompt : null },
        title,
      ),
      track,
    );
  });

  const ticks = axis.ticks.map(([t, text]) =>
    h("span", { class: "nb-tick", style: { left: `${((axis.rel(t) / span) * 100).toFixed(3)}%` } }, text),
  );
  const marks = axis.breaks.map(([a, b]) =>
    h(
      "span",
      {
        class: "nb-break",
        title: `${seconds(b - a)} of idle time, drawn shorter`,
        style: { left: `${(((axis.rel(a) + axis.rel(b)) / 2 / span) * 100).toFixed(3)}%` },
      },
      "//",
    ),
  );
  const axisRow = h(
    "div",
    { class: "nb-lane nb-axis", "aria-hidden": "true" },
    h("div", { class: "nb-lane-label" }),
    h("div", { class: "nb-axis-track" }, ticks, marks),
  );
  const note = axis.breaks.length
    ? h(
        "div",
        { class: "nb-axis-note" },
        `seconds from the first attempt; // marks ${axis.breaks.length === 1 ? "a stretch" : "stretches"} of idle time drawn shorter`,
      )
    : null;
  return h("div", { class: `nb-timeline${byRun ? " nb-by-run" : ""}` }, lanes, axisRow, note);
}

// A structured answer asked for again: its own glyph (nbagent/_palette.py's REASK_GLYPH).
const REASK_GLYPH = "↻";

function barLabel(b) {
  if (b.action === "reask") return `${REASK_GLYPH} reask`;
  if (b.kind === "attempt" && b.outcome === "error") {
    return b.status_code ? String(b.status_code) : b.error || "error";
  }
  if (b.kind === "attempt" && b.outcome === "cancelled") return "cancelled";
  if (b.kind === "attempt" && b.lane === "request") {
    return b.reask ? `reask ${b.reask} · attempt ${b.attempt}` : `attempt ${b.attempt}`;
  }
  return b.label;
}

function shortLabel(b) {
  if (b.kind !== "attempt") return null;
  if (b.action === "reask") return REASK_GLYPH;
  if (b.outcome === "error" && b.status_code) return String(b.status_code);
  return `#${b.attempt}`;
}

// A label that does not fit its bar moves to the right of it, when that space is free; else it
// is shortened ("#2", "0.3s") or hidden, never cut to "atte" (the bar's title still says all).
function placeLabels(root) {
  for (const label of root.querySelectorAll(".nb-wait:not(.nb-wait-active) .nb-wait-label")) {
    if (label.scrollWidth <= label.clientWidth + 1) continue;
    if (label.dataset.short) label.textContent = label.dataset.short; // "0.3s", not "backoff…"
    if (label.scrollWidth > label.clientWidth + 1) label.style.visibility = "hidden";
  }
  for (const track of root.querySelectorAll(".nb-track")) {
    const items = [...track.querySelectorAll(".nb-bar, .nb-wait")].map((node) => ({
      node,
      top: node.offsetTop,
      bottom: node.offsetTop + node.offsetHeight,
      left: node.offsetLeft,
      right: node.offsetLeft + node.offsetWidth,
    }));
    for (const item of items) {
      const label = item.node.querySelector(".nb-bar-label");
      if (!label || label.scrollWidth <= label.clientWidth) continue;
      const need = label.scrollWidth + 12;
      const blocked = items.some(
        (other) =>
          other !== item &&
          other.top < item.bottom &&
          other.bottom > item.top && // the same row, whatever each one's own height
          other.right > item.right &&
          other.left < item.right + need,
      );
      if (!blocked && item.right + need <= track.clientWidth) {
        item.node.classList.add("nb-label-outside");
      } else if (item.node.dataset.short) {
        label.textContent = item.node.dataset.short; // "#2" fits where "attempt 2" does not
        item.node.classList.add("nb-tight");
      }
      if (
        !item.node.classList.contains("nb-label-outside") &&
        label.scrollWidth > label.clientWidth + 1
      ) {
        // too narrow even for "503": no text spilling over the next segment; hover tells
        label.style.visibility = "hidden";
      }
    }
  }
}

// The words and classes are nbagent/_palette.py's LEGEND (tests/test_palette.py checks them).
function legend(state) {
  const item = (cls, text) =>
    h("span", { class: "nb-legend-item" }, h("i", { class: cls, "aria-hidden": "true" }), text);
  const paced = (state.waits || []).some((w) => w.kind === "paced");
  const reasked = (state.bars || []).some((b) => b.action === "reask");
  return h(
    "div",
    { class: "nb-legend" },
    item("nb-ok", "ok"),
    item("nb-error", "failed"),
    item("nb-cancelled", "cancelled"),
    item("nb-running", "running"),
    item("nb-wait", "backoff"),
    item("nb-wait nb-server-wish", "server's Retry-After"),
    item("nb-kind-compaction nb-ok", "compaction"),
    item("nb-tool-ok", "tool ok"),
    item("nb-tool-error", "tool error"),
    paced ? item("nb-wait nb-paced", "paced") : null,
    reasked ? item("nb-error nb-reask", "reasked") : null,
  );
}

function detailPanel(state, ui) {
  if (ui.selected === null) return null;
  const bar = (state.bars || []).find((b) => b.id === ui.selected);
  if (!bar) return null;
  const heading =
    bar.kind === "tool"
      ? `${bar.name || bar.label} — ${bar.is_error ? "tool error" : bar.outcome === "ok" ? "ok" : bar.outcome}`
      : `${bar.label} — ${bar.outcome}${bar.action && bar.action !== "none" ? ` → ${bar.action}` : ""}`;
  const ended = bar.end !== null && bar.end !== undefined;
  const duration = ended ? seconds(bar.end - bar.start) : "running";
  const t0 = state.axis ? state.axis.t0 : state.start;
  // the true times, whatever the axis drew shorter
  const from = `${seconds(bar.start - t0)}${ended ? ` to ${seconds(bar.end - t0)}` : ""}`;
  return h(
    "div",
    {
      class: `nb-detail${bar.is_error || bar.outcome === "error" ? " nb-detail-error" : ""}`,
      id: ui.detailId,
      role: "region",
      "aria-label": `details of ${bar.aria || bar.label}`,
      onkeydown: (e) => ui.escape(e),
    },
    h(
      "div",
      { class: "nb-detail-head" },
      h("strong", {}, heading),
      h("span", { class: "nb-muted" }, ` · ${duration} · from ${from} after the start`),
      h(
        "button",
        { class: "nb-close", title: "Close", "aria-label": "Close the details", onclick: () => ui.close() },
        "×",
      ),
    ),
    bar.arguments ? h("pre", { class: "nb-args" }, `arguments: ${bar.arguments}`) : null,
    h("pre", { class: "nb-detail-text" }, bar.detail || "(no details)"),
    bar.output_errors && bar.output_errors.length
      ? h(
          "div",
          { class: "nb-output-errors" },
          h("div", { class: "nb-muted" }, "what was wrong with the answer (sent back to the model):"),
          h("ul", {}, bar.output_errors.map((e) => h("li", {}, e))),
        )
      : null,
  );
}

function block(b) {
  if (b.type === "text") return h("div", { class: "nb-text" }, b.text);
  if (b.type === "thinking") return h("div", { class: "nb-thinking" }, b.text);
  if (b.type === "image") return h("div", { class: "nb-muted" }, `[image ${b.media_type}]`);
  if (b.type === "tool_use") {
    return h(
      "div",
      { class: "nb-tool-use" },
      h("span", { class: "nb-tool-name" }, `→ ${b.name}`),
      h("code", {}, b.arguments),
    );
  }
  if (b.type === "tool_result") {
    const cls = b.is_error ? "nb-result nb-result-error" : "nb-result nb-result-ok";
    const head = `${b.is_error ? "✗" : "✓"} ${b.name || "tool"} ${b.is_error ? "error" : "result"}`;
    return h(
      "div",
      { class: cls },
      h("div", { class: "nb-result-head" }, head),
      h("pre", {}, b.text),
    );
  }
  return null;
}

function conversation(state, ui) {
  const entries = state.conversation || [];
  // it scrolls, so it takes the focus (the keyboard scrolls it); not a live region
  const list = h("div", { class: "nb-conv-list", tabindex: "0", role: "region", "aria-label": "conversation" });
  for (const e of entries) {
    if (e.kind === "message") {
      list.append(
        h(
          "div",
          { class: `nb-msg nb-${e.role}` },
          h("div", { class: "nb-role" }, e.role),
          h("div", { class: "nb-blocks" }, (e.blocks || []).map(block)),
        ),
      );
    } else if (e.kind === "discarded") {
      list.append(
        h(
          "div",
          { class: "nb-msg nb-assistant nb-discarded-msg" },
          h("div", { class: "nb-role" }, "discarded"),
          h(
            "div",
            { class: "nb-blocks" },
            h("s", { class: "nb-discarded" }, e.text),
            h(
              "div",
              { class: "nb-muted nb-small" },
              `attempt ${e.attempt} failed: ${e.reason}; its partial reply was discarded → ${e.action}`,
            ),
          ),
        ),
      );
    } else if (e.kind === "note") {
      list.append(h("div", { class: `nb-note${e.ok === false ? " nb-note-error" : ""}` }, e.text));
    } else if (e.kind === "streaming") {
      list.append(
        h(
          "div",
          { class: "nb-msg nb-assistant nb-streaming" },
          h("div", { class: "nb-role" }, state.active ? "streaming" : "partial"),
          h(
            "div",
            { class: "nb-blocks" },
            e.thinking ? h("div", { class: "nb-thinking" }, e.thinking) : null,
            h(
              "div",
              { class: "nb-text" },
              e.text,
              state.active ? h("span", { class: "nb-cursor" }, "▍") : null,
            ),
            (e.tool_calls || []).map((c) =>
              h(
                "div",
                { class: "nb-tool-use" },
                h("span", { class: "nb-tool-name" }, `→ ${c.name}`),
                h("code", {}, c.arguments),
              ),
            ),
          ),
        ),
      );
    }
  }
  const messages = entries.filter((e) => e.kind === "message").length;
  const details = h(
    "details",
    { class: "nb-conv", open: ui.convOpen ? "" : null },
    h("summary", {}, `Conversation (${messages} message${messages === 1 ? "" : "s"})`),
    list,
  );
  details.addEventListener("toggle", () => {
    ui.convOpen = details.open;
  });
  return details;
}

function stat(label, value, cls) {
  return h(
    "div",
    { class: `nb-stat${cls ? ` ${cls}` : ""}` },
    h("span", {}, label),
    h("b", {}, value),
  );
}

function succeeded(s) {
  return !s.error && s.end_reason !== "cancelled" && s.end_reason !== "error";
}

function failedCount(total, failed) {
  return `${total}${failed ? ` (${failed} failed)` : ""}`;
}

// A timeline that saw several runs (the demo's report, a long-lived subscription): the
// headline counts the whole session and says how it ended; each run keeps a line below.
function sessionHeadline(state) {
  const s = state.session;
  if (!s) return null;
  const kinds = [];
  if (s.retry_after_waits) kinds.push(`${s.retry_after_waits} Retry-After`);
  if (s.backoff_waits) kinds.push(`${s.backoff_waits} backoff`);
  if (s.paced_waits) kinds.push(`${s.paced_waits} paced`);
  const lastOk = !s.last_error && s.last_end_reason !== "cancelled" && s.last_end_reason !== "error";
  const ended = s.last_end_reason === null ? "running" : s.last_error || s.last_end_reason;
  return h(
    "div",
    { class: "nb-session" },
    h(
      "div",
      { class: "nb-session-title" },
      `Session: ${s.runs} runs${s.runs_failed !== undefined && s.runs ? `, ${s.runs - (s.runs_failed || 0)} succeeded` : ""}`,
    ),
    h(
      "div",
      { class: "nb-summary" },
      stat("runs", failedCount(s.runs, s.runs_failed), s.runs_failed ? "nb-stat-error" : ""),
      stat("attempts", failedCount(s.attempts, s.failed_attempts)),
      stat("retries", String(s.retries)),
      stat("waits", `${seconds(s.waiting_s)}${kinds.length ? ` (${kinds.join(", ")})` : ""}`),
      stat("tool errors", `${s.tool_errors} of ${s.tool_calls}`, s.tool_errors ? "nb-stat-error" : ""),
      stat("compactions", String(s.compactions)),
      s.fallbacks ? stat("fallbacks", String(s.fallbacks)) : null,
      s.most_requests_per_call
        ? stat("amplified", `1 call, ${s.most_requests_per_call} requests`, "nb-stat-error")
        : null,
      s.reasks ? stat("reasks", String(s.reasks)) : null,
      stat("tokens", `${count(s.input_tokens)} in · ${count(s.output_tokens)} out`),
      stat("cost", money(s.cost_usd)),
      stat("time", seconds(s.duration_s)),
      stat("ended with", ended, lastOk ? "nb-stat-ok" : "nb-stat-error"),
    ),
  );
}

function runList(state) {
  const runs = state.runs || [];
  const head = ["#", "prompt", "end", "attempts", "retries", "waiting", "tools", "time"];
  const rows = runs.map((run, i) => {
    const s = run.summary;
    const ok = s ? succeeded(s) : true;
    const end = s ? s.error || s.end_reason : "running";
    const tools = s ? `${s.tool_calls}${s.tool_errors ? ` (${s.tool_errors} failed)` : ""}` : "";
    return h(
      "tr",
      { class: ok ? "" : "nb-run-failed", "data-run": run.run_id },
      h("td", {}, String(i + 1)),
      h(
        "td",
        { class: "nb-run-prompt", title: `${run.prompt}\nrun ${run.run_id}` },
        run.prompt,
        run.note ? h("div", { class: "nb-run-note" }, run.note) : null,
      ),
      h("td", { class: "nb-run-end" }, end),
      h("td", {}, s ? failedCount(s.attempts, s.failed_attempts) : ""),
      h("td", {}, s ? String(s.retries) : ""),
      h("td", {}, s ? seconds(s.waiting_s) : ""),
      h("td", {}, tools),
      h("td", {}, s ? seconds(s.duration_s) : ""),
    );
  });
  return h(
    "table",
    { class: "nb-runs" },
    h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows),
  );
}

function summary(state) {
  const s = state.summary;
  if (!s) return null;
  const ok = succeeded(s);
  return h(
    "div",
    { class: "nb-summary" },
    stat("end", s.end_reason || "—", ok ? "nb-stat-ok" : "nb-stat-error"),
    stat("attempts", `${s.attempts}${s.failed_attempts ? ` (${s.failed_attempts} failed)` : ""}`),
    stat("retries", String(s.retries)),
    stat("waiting", seconds(s.waiting_s)),
    stat(
      "tools",
      `${s.tool_calls}${s.tool_errors ? ` (${s.tool_errors} error${s.tool_errors === 1 ? "" : "s"})` : ""}`,
    ),
    s.layer_attempt > 1
      ? stat(
          "amplified",
          `1 call, ${s.call_requests} requests (${s.layer_attempt} tries by an outer layer)`,
          "nb-stat-error",
        )
      : null,
    s.compactions ? stat("compactions", String(s.compactions)) : null,
    s.fallbacks ? stat("fallbacks", String(s.fallbacks)) : null,
    s.reasks ? stat("reasks", String(s.reasks)) : null,
    stat("tokens", `${count(s.input_tokens)} in · ${count(s.output_tokens)} out`),
    stat("cost", money(s.cost_usd)),
    stat("time", seconds(s.duration_s)),
  );
}

function header(model, state) {
  const runs = state.runs || [];
  const run = runs[runs.length - 1];
  const stopWanted = model.get("stop_requested");
  const showStop = model.get("show_stop") !== false && state.active;
  const stop = showStop
    ? h(
        "button",
        {
          class: "nb-stop",
          disabled: stopWanted ? "" : null,
          title: "Cancel the run",
          onclick: () => {
            model.set("stop_requested", true);
            model.save_changes();
          },
        },
        stopWanted ? "stopping…" : [h("span", { "aria-hidden": "true" }, "■ "), "Stop"],
      )
    : null;
  return h(
    "div",
    { class: "nb-header" },
    h("span", { class: "nb-brand" }, "nbagent"),
    run && run.model ? h("span", { class: "nb-chip" }, run.model) : null,
    state.session
      ? h("span", { class: "nb-prompt" }, `${runs.length} runs, the last: ${run.prompt}`)
      : run && run.prompt
        ? h("span", { class: "nb-prompt", title: run.prompt }, run.prompt)
        : null,
    h("span", { class: "nb-spacer" }),
    stop,
  );
}

let nbWidgets = 0;

function render({ model, el }) {
  const ui = {
    selected: null,
    convOpen: true,
    focus: {}, // lane key -> the id of the bar Tab enters it at
    detailId: `nb-detail-${++nbWidgets}`,
  };
  const root = h("div", { class: "nb-root" });
  // The one live region: said politely, once per change the state announces (its id moves),
  // never per streamed delta. It lives outside what each draw replaces, as screen readers
  // only speak changes to a region that was already there.
  const live = h("div", { class: "nb-live", role: "status", "aria-live": "polite", "aria-atomic": "true" });
  el.append(root, live);
  let heard = null;
  let timer = null;

  function announce(state) {
    const a = state.announcement;
    if (!a) return;
    if (heard !== null && a.id !== heard && a.text) {
      // what changed since the last push, said once (a push may carry two changes)
      const missed = (a.recent || []).filter(([id]) => id > heard).map(([, text]) => text);
      live.textContent = missed.length ? missed.join(". ") : a.text;
    }
    heard = a.id;
  }

  function tick() {
    const state = model.get("state") || {};
    const rem = remaining(state);
    if (rem === null) {
      stopTimer();
      return;
    }
    const text = countdownText(state);
    for (const node of root.querySelectorAll(".nb-countdown, .nb-wait-active .nb-wait-label")) {
      node.textContent = text;
    }
  }

  function stopTimer() {
    if (timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }

  // What had the keyboard focus, so that a redraw (ten a second while a run streams) puts it
  // back on the same bar, button or lane instead of dropping it to the page.
  function focused() {
    const node = document.activeElement;
    if (!node || !root.contains(node)) return null;
    if (node.classList.contains("nb-bar")) return `.nb-bar[data-id="${node.dataset.id}"]`;
    if (node.classList.contains("nb-close")) return ".nb-close";
    if (node.classList.contains("nb-stop")) return ".nb-stop";
    if (node.tagName === "SUMMARY") return ".nb-conv > summary";
    if (node.classList.contains("nb-conv-list")) return ".nb-conv-list";
    return null;
  }

  function draw() {
    const state = model.get("state") || {};
    const refocus = focused();
    const oldList = root.querySelector(".nb-conv-list");
    const atBottom = !oldList || oldList.scrollTop + oldList.clientHeight >= oldList.scrollHeight - 8;
    const oldScroll = oldList ? oldList.scrollTop : 0;
    const parts = [
      header(model, state),
      statusNode(state),
      (state.warnings || []).length
        ? h("div", { class: "nb-warnings" }, state.warnings.map((w) => h("div", {}, `⚠ ${w.text}`)))
        : null,
      sessionHeadline(state),
      timeline(state, ui),
      detailPanel(state, ui),
      legend(state),
      state.session ? runList(state) : summary(state),
      conversation(state, ui),
    ];
    root.replaceChildren(...parts.filter(Boolean));
    placeLabels(root);
    const list = root.querySelector(".nb-conv-list");
    if (list) list.scrollTop = atBottom ? list.scrollHeight : oldScroll;
    if (refocus) root.querySelector(refocus)?.focus({ preventScroll: true });
    announce(state);
    if (remaining(state) !== null) {
      if (timer === null) timer = setInterval(tick, 100);
    } else {
      stopTimer();
    }
  }

  function focusBar(id) {
    root.querySelector(`.nb-bar[data-id="${id}"]`)?.focus();
  }

  ui.select = (id) => {
    ui.selected = ui.selected === id ? null : id;
    draw();
  };

  ui.close = () => {
    const id = ui.selected;
    ui.selected = null;
    draw();
    if (id !== null) focusBar(id);
  };

  ui.escape = (e) => {
    if (e.key !== "Escape" || ui.selected === null) return;
    e.preventDefault();
    e.stopPropagation(); // JupyterLab would leave the cell's edit mode
    ui.close();
  };

  ui.barKey = (e, bar, order) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      ui.focus[bar.laneKey] = bar.id;
      ui.select(bar.id);
      focusBar(bar.id);
      return;
    }
    if (e.key === "Escape") {
      ui.escape(e);
      return;
    }
    const i = order.indexOf(bar);
    const next = {
      ArrowRight: order[i + 1],
      ArrowDown: order[i + 1],
      ArrowLeft: order[i - 1],
      ArrowUp: order[i - 1],
      Home: order[0],
      End: order[order.length - 1],
    }[e.key];
    if (!(e.key in { ArrowRight: 1, ArrowDown: 1, ArrowLeft: 1, ArrowUp: 1, Home: 1, End: 1 })) return;
    e.preventDefault();
    e.stopPropagation(); // not the notebook's own arrow keys
    if (!next) return;
    ui.focus[bar.laneKey] = next.id;
    for (const node of root.querySelectorAll(`.nb-lane[data-key="${bar.laneKey}"] .nb-bar`)) {
      node.tabIndex = Number(node.dataset.id) === next.id ? 0 : -1;
    }
    focusBar(next.id);
  };

  model.on("change:state", draw);
  model.on("change:stop_requested", draw);
  model.on("change:show_stop", draw);
  draw();

  return () => {
    stopTimer();
    live.remove();
    model.off("change:state", draw);
    model.off("change:stop_requested", draw);
    model.off("change:show_stop", draw);
  };
}

export default { render };
