"""Summaries and figures from attempt frames (`agent.attempts`, or a simulation's frame).

Every plot returns a `matplotlib.figure.Figure` built without pyplot: nothing pops up, nothing
is registered globally, nothing leaks when a notebook re-runs a cell. The figures render
themselves as PNG in Jupyter (`_repr_png_`) and can be saved with `fig.savefig(...)`.
An empty frame gives a figure that says "no attempts" rather than an exception.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ._core._retry import RetryPolicy, format_duration
from ._loop._durable_log import read_attempts
from ._loop._frame import COLUMNS, coerce, empty_frame

__all__ = [
    "ACTION_COLORS",
    "OUTCOME_COLORS",
    "WAIT_STYLES",
    "format_duration",
    "plot_backoff",
    "plot_delays",
    "plot_timeline",
    "read_attempts",
    "success_rate_by_attempt",
    "summary",
    "wait_kind",
]

OUTCOME_COLORS: dict[str, str] = {"ok": "#2ca02c", "error": "#d62728", "cancelled": "#8c8c8c"}
ACTION_COLORS: dict[str, str] = {
    "none": "#333333",
    "retry": "#ff7f0e",
    "compact": "#9467bd",
    "tool_result": "#1f77b4",
    "fallback": "#8c564b",
    "fail": "#000000",
    "paced": "#555555",
}
# kind -> (label, facecolor, edgecolor, hatch)
WAIT_STYLES: dict[str, tuple[str, str, str, str]] = {
    "backoff": ("backoff wait (policy)", "#fde3c0", "#ff7f0e", "//"),
    "retry_after": ("Retry-After wait (server)", "#d6e6f5", "#1f77b4", "xx"),
    "paced": ("paced (rate limiter)", "#eeeeee", "#555555", ".."),
}
_PHASE_ORDER = ("request", "compaction", "tool")


class _Figure(Figure):
    """A Figure that shows itself as PNG in Jupyter even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()


def _new_figure(width: float, height: float) -> Figure:
    return _Figure(figsize=(width, height), layout="constrained")


def _nothing(text: str = "no attempts") -> Figure:
    fig = _new_figure(6.0, 2.0)
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=14, color="#666666")
    ax.set_axis_off()
    return fig


def _frame(df: pd.DataFrame | None) -> pd.DataFrame:
    """The frame with attempt-log dtypes (a frame read back from CSV works too)."""
    if df is None or len(df) == 0:
        return empty_frame()
    if list(df.columns) == list(COLUMNS) and str(df["phase"].dtype) == "category":
        return df
    return coerce(df)


def wait_kind(df: pd.DataFrame) -> pd.Series[Any]:
    """For each row, what kind of wait follows it: backoff, retry_after, paced, or NA."""
    df = _frame(df)
    delay = df["delay_s"].to_numpy(dtype=float)
    has_wait = ~np.isnan(delay)
    paced = (df["action"] == "paced").to_numpy(dtype=bool)
    server = ~np.isnan(df["retry_after_s"].to_numpy(dtype=float))
    kinds = np.where(paced, "paced", np.where(server, "retry_after", "backoff")).astype(object)
    kinds[~has_wait] = None
    out: pd.Series[Any] = pd.Series(kinds, index=df.index, dtype=object, name="wait_kind")
    return out


# -- tables ------------------------------------------------------------------------------


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (error_kind, action): how often, how many retries, how long spent waiting.

    Rows that succeeded are grouped under the error kind "ok" (and "paced" rate-limiter holds
    under action "paced"). Columns: `error_kind, action, count, retries, retry_after_waits,
    wait_total_s, wait_mean_s, wait_max_s, attempt_time_s`, sorted by count.
    """
    df = _frame(df)
    cols = [
        "error_kind",
        "action",
        "count",
        "retries",
        "retry_after_waits",
        "wait_total_s",
        "wait_mean_s",
        "wait_max_s",
        "attempt_time_s",
    ]
    if len(df) == 0:
        none: pd.DataFrame = pd.DataFrame(
            {c: pd.Series([], dtype=object if c in cols[:2] else float) for c in cols}
        )
        return none
    kind = df["error_kind"].astype(object).where(df["error_kind"].notna(), None)
    outcome = df["outcome"].astype(object)
    kind = kind.where(kind.notna(), outcome).fillna("unknown")
    work = pd.DataFrame(
        {
            "error_kind": kind.astype(str),
            "action": df["action"].astype(object).fillna("none").astype(str),
            "retry": (df["action"] == "retry").to_numpy(dtype=bool).astype(int),
            "ra": df["retry_after_s"].notna().to_numpy(dtype=bool)
            & df["delay_s"].notna().to_numpy(dtype=bool),
            "delay": df["delay_s"].to_numpy(dtype=float),
            "duration": df["duration_s"].to_numpy(dtype=float),
        }
    )
    g = work.groupby(["error_kind", "action"], sort=False)
    out: pd.DataFrame = pd.DataFrame(
        {
            "count": g.size(),
            "retries": g["retry"].sum(),
            "retry_after_waits": g["ra"].sum().astype(int),
            "wait_total_s": g["delay"].sum(min_count=0),
            "wait_mean_s": g["delay"].mean(),
            "wait_max_s": g["delay"].max(),
            "attempt_time_s": g["duration"].sum(min_count=0),
        }
    )
    out = out.reset_index().sort_values(["count", "error_kind"], ascending=[False, True])
    result: pd.DataFrame = out.reset_index(drop=True)[cols]
    return result


def success_rate_by_attempt(df: pd.DataFrame) -> pd.DataFrame:
    """For each attempt number n of provider requests: how many attempts were made, how many
    succeeded, `success_rate` (succeeded / made at n) and `share` (succeeded at n / all
    requests, a request being counted by its first attempt) with its running total.
    """
    df = _frame(df)
    cols = ["attempts", "succeeded", "success_rate", "share", "cumulative_share"]
    req = df[(df["phase"] == "request").to_numpy(dtype=bool) & df["attempt"].notna().to_numpy()]
    req = req[(req["action"] != "paced").to_numpy(dtype=bool)]
    if len(req) == 0:
        empty: pd.DataFrame = pd.DataFrame({c: pd.Series([], dtype=float) for c in cols})
        empty.index = pd.Index([], dtype="int64", name="attempt")
        return empty
    attempt = req["attempt"].to_numpy(dtype=np.int64)
    ok = (req["outcome"] == "ok").to_numpy(dtype=bool)
    work = pd.DataFrame({"attempt": attempt, "ok": ok.astype(int)})
    g = work.groupby("attempt")
    out: pd.DataFrame = pd.DataFrame({"attempts": g.size(), "succeeded": g["ok"].sum()})
    requests = int((attempt == 1).sum()) or len(req)
    out["success_rate"] = out["succeeded"] / out["attempts"]
    out["share"] = out["succeeded"] / requests
    out["cumulative_share"] = out["share"].cumsum()
    out.index.name = "attempt"
    return out


# -- timeline ----------------------------------------------------------------------------


def plot_timeline(
    df: pd.DataFrame,
    *,
    max_groups: int = 40,
    annotate: bool | None = None,
    title: str | None = None,
) -> Figure:
    """Gantt-style: one row per (run, turn), one lane per phase; attempts coloured by outcome
    (ok green, error red, cancelled grey) and outlined by action; the wait after a failed
    attempt hatched (backoff `//`, Retry-After `xx`, rate-limiter holds `..`).

    Only the first `max_groups` (run, turn) rows are drawn. Times are seconds from the first
    attempt. `annotate` writes attempt numbers in the bars (default: when there are few).
    """
    df = _frame(df)
    if len(df) == 0:
        return _nothing()
    start = df["started_at"].to_numpy(dtype=float).copy()
    end = df["ended_at"].to_numpy(dtype=float).copy()
    dur = df["duration_s"].to_numpy(dtype=float)
    # rows that lack a start (an end without its start event) are drawn as instants
    start = np.where(np.isnan(start), end - np.nan_to_num(dur), start)
    end = np.where(np.isnan(end), start + np.nan_to_num(dur), end)
    valid = ~np.isnan(start)
    if not valid.any():
        return _nothing("no attempts with times")
    df = df[valid]
    start, end = start[valid], end[valid]
    t0 = float(np.min(start))

    run = df["run_id"].astype(object).fillna("").to_numpy()
    turn = df["turn"].astype("Float64").fillna(-1).to_numpy(dtype=float).astype(int)
    order = np.argsort(start, kind="stable")
    groups: dict[tuple[str, int], int] = {}
    for i in order:
        key = (str(run[i]), int(turn[i]))
        if key not in groups:
            groups[key] = len(groups)
    n_groups_all = len(groups)
    shown = {k: v for k, v in groups.items() if v < max_groups}
    group_of = np.array([shown.get((str(r), int(t)), -1) for r, t in zip(run, turn, strict=True)])
    keep = group_of >= 0
    df, start, end, group_of = df[keep], start[keep], end[keep], group_of[keep]

    phases_present = [p for p in _PHASE_ORDER if (df["phase"] == p).any()]
    if not phases_present:
        phases_present = ["request"]
    n_lanes = len(phases_present)
    lane_h = 0.8 / n_lanes
    phase = df["phase"].astype(object).fillna("request").to_numpy()
    lane = np.array([phases_present.index(p) if p in phases_present else 0 for p in phase])
    # group 0 at the top: y grows downwards after invert_yaxis
    y = group_of + 0.1 + lane * lane_h
    bar_y, bar_h = _stack_overlaps(phase, group_of, start, end, y, lane_h * 0.9)

    n_groups = len(shown)
    fig = _new_figure(11.0, max(2.6, 0.42 * n_groups * max(1.0, n_lanes / 1.6) + 1.6))
    ax = fig.add_subplot()
    outcome = df["outcome"].astype(object).fillna("error").to_numpy()
    action = df["action"].astype(object).fillna("none").to_numpy()
    left = start - t0
    width = np.maximum(end - start, 0.0)
    span = float(
        np.nanmax(np.concatenate([end, end + np.nan_to_num(df["delay_s"].to_numpy())])) - t0
    )
    span = span if span > 0 else 1.0
    min_w = span * 0.002  # instants stay visible
    width = np.maximum(width, min_w)

    handles: list[Any] = []
    seen: set[str] = set()

    def legend(key: str, patch: Patch) -> None:
        if key not in seen:
            seen.add(key)
            handles.append(patch)

    # waits after attempts (behind the bars)
    kinds = wait_kind(df).to_numpy()
    delay = df["delay_s"].to_numpy(dtype=float)
    for kind, (label, face, edge, hatch) in WAIT_STYLES.items():
        sel = (kinds == kind) & (delay > 0)
        if not sel.any():
            continue
        ax.barh(
            y[sel] + lane_h * 0.15,
            delay[sel],
            left=end[sel] - t0,
            height=lane_h * 0.6,
            align="edge",
            color=face,
            edgecolor=edge,
            hatch=hatch,
            linewidth=0.6,
        )
        legend(kind, Patch(facecolor=face, edgecolor=edge, hatch=hatch, label=label))

    # the attempts themselves
    for out_name, face in OUTCOME_COLORS.items():
        for act in sorted(set(action[outcome == out_name])):
            sel = (outcome == out_name) & (action == act)
            plain = act in ("none", "paced")
            edge = ACTION_COLORS.get(act, "#000000")
            ax.barh(
                bar_y[sel],
                width[sel],
                left=left[sel],
                height=bar_h[sel],
                align="edge",
                color=face if act != "paced" else "#dddddd",
                edgecolor=edge if not plain else "#1a1a1a",
                linewidth=2.0 if not plain else 0.4,
            )
            if act != "paced":
                legend(f"outcome:{out_name}", Patch(facecolor=face, label=out_name))
            if not plain:
                legend(
                    f"action:{act}",
                    Patch(facecolor="white", edgecolor=edge, linewidth=2.0, label=f"→ {act}"),
                )

    # attempt numbers and tool names
    if annotate is None:
        annotate = len(df) <= 80
    if annotate:
        attempt = df["attempt"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        tool = df["tool_name"].astype(object).to_numpy()
        for i in range(len(df)):
            if width[i] < span * 0.025:
                continue
            text = ""
            if phase[i] == "tool" and isinstance(tool[i], str):
                text = tool[i]
            elif not math.isnan(attempt[i]):
                text = f"#{int(attempt[i])}"
            if text:
                ax.text(
                    left[i] + width[i] / 2,
                    bar_y[i] + bar_h[i] / 2,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                    clip_on=True,
                )

    labels = ["" for _ in range(n_groups)]
    for (r, t), gi in shown.items():
        rl = r if len(r) <= 14 else r[:13] + "…"
        labels[gi] = f"{rl} · turn {t}" if t >= 0 else rl
    ax.set_yticks(np.arange(n_groups) + 0.5, labels=labels, fontsize=8)
    ax.set_ylim(n_groups, 0)
    if n_lanes > 1:
        for gi in range(n_groups):
            for li, p in enumerate(phases_present):
                ax.text(
                    -0.005,
                    gi + 0.1 + (li + 0.45) * lane_h,
                    p,
                    transform=ax.get_yaxis_transform(),
                    ha="right",
                    va="center",
                    fontsize=5.5,
                    color="#777777",
                )
        ax.tick_params(axis="y", pad=42)
    ax.set_xlim(-span * 0.01, span * 1.02)
    ax.set_xlabel("seconds from the first attempt (agent clock)")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    head = title or "Attempt timeline"
    if n_groups_all > n_groups:
        head += f" (first {n_groups} of {n_groups_all} run·turns)"
    ax.set_title(head)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def _stack_overlaps(
    phase: np.ndarray[Any, Any],
    group: np.ndarray[Any, Any],
    start: np.ndarray[Any, Any],
    end: np.ndarray[Any, Any],
    y: np.ndarray[Any, Any],
    height: float,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Tool calls that run at the same time share their lane in thinner sub-lanes."""
    bar_y = y.astype(float).copy()
    bar_h = np.full(len(y), height)
    tools = np.flatnonzero(phase == "tool")
    for g in np.unique(group[tools]):
        idx = tools[group[tools] == g]
        idx = idx[np.argsort(start[idx], kind="stable")]
        lane_end: list[float] = []
        sub = np.zeros(len(idx), dtype=int)
        for k, i in enumerate(idx):
            for j, free_at in enumerate(lane_end):
                if free_at <= start[i]:
                    sub[k] = j
                    lane_end[j] = end[i]
                    break
            else:
                sub[k] = len(lane_end)
                lane_end.append(end[i])
        if len(lane_end) > 1:
            h = height / len(lane_end)
            bar_h[idx] = h
            bar_y[idx] = y[idx] + sub * h
    return bar_y, bar_h


# -- backoff -----------------------------------------------------------------------------


def _policy_label(policy: RetryPolicy) -> str:
    return (
        f"initial {policy.initial_delay:g} s × {policy.multiplier:g}^(n-1), cap "
        f"{policy.max_delay:g} s, jitter {policy.jitter!r}"
    )


def plot_backoff(
    df: pd.DataFrame,
    policy: RetryPolicy | None = None,
    *,
    logy: bool = False,
    max_attempt: int | None = None,
) -> Figure:
    """Realised waits after failed attempt n against the policy's envelope for n
    (min..max band, expected value), Retry-After waits marked apart."""
    df = _frame(df)
    pol = policy if policy is not None else RetryPolicy()
    if len(df) == 0:
        return _nothing()
    sel = (
        df["delay_s"].notna().to_numpy()
        & df["attempt"].notna().to_numpy()
        & (df["action"] != "paced").to_numpy(dtype=bool)
    )
    waits = df[sel]
    if len(waits) == 0:
        return _nothing("no retries: nothing waited")
    n = waits["attempt"].to_numpy(dtype=np.int64)
    d = waits["delay_s"].to_numpy(dtype=float)
    server = waits["retry_after_s"].notna().to_numpy()
    top = int(n.max())
    if max_attempt is None:
        max_attempt = min(max(top, pol.max_attempts - 1, 1), 60)
    rng = np.random.default_rng(0)  # spread the dots sideways, the same way every time
    xs = n + rng.uniform(-0.18, 0.18, size=len(n))

    fig = _new_figure(9.0, 4.8)
    ax = fig.add_subplot()
    ns = np.arange(1, max_attempt + 1)
    env = np.array([pol.envelope(int(k)) for k in ns])
    for k, (lo, hi, _) in zip(ns, env, strict=True):
        ax.fill_between(
            [k - 0.32, k + 0.32], [lo, lo], [hi, hi], color="#ff7f0e", alpha=0.15, linewidth=0
        )
    ax.plot(ns, env[:, 2], color="#ff7f0e", linestyle="--", marker="_", markersize=14, linewidth=1)
    ax.plot(ns, [pol.base_delay(int(k)) for k in ns], color="#999999", linewidth=0.8, linestyle=":")
    shown = n <= max_attempt
    ax.scatter(
        xs[~server & shown],
        d[~server & shown],
        s=14,
        color="#d62728",
        alpha=0.65,
        edgecolors="none",
        zorder=3,
    )
    if server.any():
        ax.scatter(
            xs[server & shown], d[server & shown], s=36, marker="x", color="#1f77b4", zorder=4
        )
    handles: list[Any] = [
        Patch(facecolor="#ff7f0e", alpha=0.3, label="policy envelope (min..max)"),
        _line("#ff7f0e", "--", "expected wait"),
        _line("#999999", ":", "un-jittered delay"),
        _dot("#d62728", "o", f"realised backoff ({int((~server).sum())})"),
    ]
    if server.any():
        handles.append(_dot("#1f77b4", "x", f"Retry-After wait ({int(server.sum())})"))
    ax.legend(handles=handles, loc="upper left", fontsize=8)
    ax.set_xticks(ns if len(ns) <= 20 else ns[:: math.ceil(len(ns) / 20)])
    ax.set_xlabel("failed attempt n (the wait before attempt n+1)")
    ax.set_ylabel("wait (s)")
    if logy:
        ax.set_yscale("symlog", linthresh=max(pol.initial_delay / 4, 1e-3))
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"Backoff: {_policy_label(pol)}", fontsize=10)
    return fig


def _line(color: str, style: Any, label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, linestyle=style, label=label)


def _dot(color: str, marker: str, label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, marker=marker, linestyle="none", label=label)


# -- delay distribution --------------------------------------------------------------------


def plot_delays(df: pd.DataFrame, *, bins: int = 30) -> Figure:
    """How long the waits were: a histogram by kind (backoff, Retry-After, paced) and the
    cumulative distribution of all waits."""
    df = _frame(df)
    if len(df) == 0:
        return _nothing()
    kinds = wait_kind(df).to_numpy()
    delay = df["delay_s"].to_numpy(dtype=float)
    has = ~np.isnan(delay)
    if not has.any():
        return _nothing("no waits")
    fig = _new_figure(11.0, 4.0)
    ax_hist, ax_cdf = fig.subplots(1, 2)
    all_d = delay[has]
    hi = float(all_d.max())
    edges = np.linspace(0.0, hi if hi > 0 else 1.0, bins + 1)
    data, colors, labels = [], [], []
    for kind, (label, _face, edge, _) in WAIT_STYLES.items():
        sel = has & (kinds == kind)
        if sel.any():
            data.append(delay[sel])
            colors.append(edge)
            labels.append(f"{label} ({int(sel.sum())})")
    ax_hist.hist(data, bins=edges, stacked=True, color=colors, label=labels, alpha=0.85)
    ax_hist.set_xlabel("wait (s)")
    ax_hist.set_ylabel("waits")
    ax_hist.legend(fontsize=8)
    ax_hist.set_title("Waits by kind", fontsize=10)
    _ecdf(ax_cdf, all_d)
    total = float(all_d.sum())
    ax_cdf.set_title(
        f"{len(all_d)} waits, {total:,.1f} s in total, median {float(np.median(all_d)):.2f} s",
        fontsize=10,
    )
    return fig


def _ecdf(ax: Axes, values: np.ndarray[Any, Any]) -> None:
    v = np.sort(values)
    p = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, p, where="post", color="#333333")
    ax.set_xlabel("wait (s)")
    ax.set_ylabel("share of waits ≤ x")
    ax.set_ylim(0, 1.02)
    ax.grid(color="#e5e5e5", linewidth=0.6)
