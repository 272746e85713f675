"""How long the agent waited: realised waits against the policy's envelope, and their spread.

Backoff is drawn in the widget's amber, the server's Retry-After in its purple, rate-limiter
holds in grey (`nbagent._palette`), so these figures read like the timeline they explain.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .._core._retry import RetryPolicy
from .._core._words import counted
from .._palette import COLORS, FONT_SIZE, LABEL_FONT_SIZE, SWATCHES
from ._figures import dot, line, new_figure, nothing, style_axes
from ._tables import frame, wait_kind

_BACKOFF = COLORS["backoff"]
_BACKOFF_DARK = COLORS["backoff_text"]
_WISH = COLORS["retry_after"]


def policy_label(policy: RetryPolicy) -> str:
    jitter = "none" if policy.jitter is None else repr(policy.jitter)
    return (
        f"initial {policy.initial_delay:g} s × {policy.multiplier:g}^(n-1), cap "
        f"{policy.max_delay:g} s, jitter {jitter}"
    )


def draw_envelope(ax: Axes, policy: RetryPolicy, attempts: int) -> list[Any]:
    """The policy's band (min..max wait after failed attempt n), its expected and un-jittered
    delays; returns the legend handles. Shared with the policy playground."""
    ns = np.arange(1, max(1, attempts) + 1)
    env = np.array([policy.envelope(int(k)) for k in ns])
    for k, (lo, hi, _) in zip(ns, env, strict=True):
        ax.fill_between(
            [k - 0.32, k + 0.32], [lo, lo], [hi, hi], color=_BACKOFF, alpha=0.25, linewidth=0
        )
    ax.plot(ns, env[:, 2], color=_BACKOFF_DARK, linestyle="--", marker="_", markersize=14, lw=1)
    base = [policy.base_delay(int(k)) for k in ns]
    ax.plot(ns, base, color=COLORS["muted"], linewidth=0.9, linestyle=":")
    ax.set_xticks(ns if len(ns) <= 20 else ns[:: math.ceil(len(ns) / 20)])
    ax.set_xlabel("failed attempt n (the wait before attempt n+1)")
    ax.set_ylabel("wait (s)")
    return [
        Patch(facecolor=_BACKOFF, alpha=0.4, label="policy envelope (min..max)"),
        line(_BACKOFF_DARK, "--", "expected wait"),
        line(COLORS["muted"], ":", "un-jittered delay"),
    ]


def plot_backoff(
    df: pd.DataFrame,
    policy: RetryPolicy | None = None,
    *,
    logy: bool = False,
    max_attempt: int | None = None,
) -> Figure:
    """Realised waits after failed attempt n against the policy's envelope for n
    (min..max band, expected value), Retry-After waits marked apart.

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.
        policy: The policy whose envelope to draw; None for `RetryPolicy()`.
        logy: Whether the wait axis is logarithmic.
        max_attempt: The last attempt number drawn; None for the largest in the frame.

    Returns:
        A matplotlib figure (not shown; a notebook shows it as the cell's value). An empty frame
            gives a small figure that says so, never an exception.
    """
    df = frame(df)
    pol = policy if policy is not None else RetryPolicy()
    if len(df) == 0:
        return nothing()
    kinds = wait_kind(df).to_numpy()
    sel = np.isin(kinds, ("backoff", "retry_after")) & df["attempt"].notna().to_numpy()
    waits = df[sel]
    if len(waits) == 0:
        return nothing("no retries: nothing waited")
    n = waits["attempt"].to_numpy(dtype=np.int64)
    d = waits["delay_s"].to_numpy(dtype=float)
    server = kinds[sel] == "retry_after"
    top = int(n.max())
    if max_attempt is None:
        max_attempt = min(max(top, pol.max_attempts - 1, 1), 60)
    rng = np.random.default_rng(0)  # spread the dots sideways, the same way every time
    xs = n + rng.uniform(-0.18, 0.18, size=len(n))

    fig = new_figure(9.0, 4.8)
    ax = fig.add_subplot()
    style_axes(ax)
    handles = draw_envelope(ax, pol, max_attempt)
    shown = n <= max_attempt
    ax.scatter(
        xs[~server & shown],
        d[~server & shown],
        s=16,
        color=_BACKOFF,
        edgecolors=_BACKOFF_DARK,
        linewidths=0.5,
        alpha=0.8,
        zorder=3,
    )
    handles.append(dot(_BACKOFF, "o", f"realised backoff ({int((~server).sum())})"))
    if server.any():
        ax.scatter(xs[server & shown], d[server & shown], s=40, marker="x", color=_WISH, zorder=4)
        handles.append(dot(_WISH, "x", f"server's Retry-After ({int(server.sum())})"))
    ax.legend(handles=handles, loc="upper left", fontsize=LABEL_FONT_SIZE)
    if logy:
        ax.set_yscale("symlog", linthresh=max(pol.initial_delay / 4, 1e-3))
    ax.set_title(f"Backoff: {policy_label(pol)}", fontsize=FONT_SIZE + 1, loc="left")
    return fig


def plot_delays(df: pd.DataFrame, *, bins: int = 30) -> Figure:
    """How long the waits were: a histogram by kind (backoff, Retry-After, paced) and the
    cumulative distribution of all waits.

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.
        bins: How many histogram bins.

    Returns:
        A matplotlib figure (not shown; a notebook shows it as the cell's value). An empty frame
            gives a small figure that says so, never an exception.
    """
    df = frame(df)
    if len(df) == 0:
        return nothing()
    kinds = wait_kind(df).to_numpy()
    delay = df["delay_s"].to_numpy(dtype=float)
    has = ~np.isnan(delay)
    if not has.any():
        return nothing("no waits")
    fig = new_figure(11.0, 4.0)
    ax_hist, ax_cdf = fig.subplots(1, 2)
    style_axes(ax_hist)
    style_axes(ax_cdf, grid="both")
    all_d = delay[has]
    hi = float(all_d.max())
    edges = np.linspace(0.0, hi if hi > 0 else 1.0, bins + 1)
    data, colors, labels = [], [], []
    for kind in ("backoff", "retry_after", "paced"):
        sel = has & (kinds == kind)
        if sel.any():
            data.append(delay[sel])
            colors.append(SWATCHES[kind].face)
            labels.append(f"{SWATCHES[kind].word} ({int(sel.sum())})")
    ax_hist.hist(data, bins=edges, stacked=True, color=colors, label=labels, alpha=0.9)
    ax_hist.set_xlabel("wait (s)")
    ax_hist.set_ylabel("waits")
    ax_hist.legend(fontsize=LABEL_FONT_SIZE)
    ax_hist.set_title("Waits by kind", fontsize=FONT_SIZE + 1, loc="left")
    _ecdf(ax_cdf, all_d)
    total = float(all_d.sum())
    ax_cdf.set_title(
        f"{counted(len(all_d), 'wait')}, {total:,.1f} s in total, "
        f"median {float(np.median(all_d)):.2f} s",
        fontsize=FONT_SIZE + 1,
        loc="left",
    )
    return fig


def _ecdf(ax: Axes, values: np.ndarray[Any, Any]) -> None:
    v = np.sort(values)
    p = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, p, where="post", color=COLORS["fg"])
    ax.set_xlabel("wait (s)")
    ax.set_ylabel("share of waits ≤ x")
    ax.set_ylim(0, 1.02)
