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
