"""Attempt frames in, tables out: what kind of wait followed each row, and summaries.

`frame()` is the door every function of `nbagent.analysis` goes through: it accepts
`agent.attempts`, a simulation's frame or one read back from CSV, and gives the attempt-log dtypes
back, so the rest never second-guesses a column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._loop._frame import COLUMNS, coerce, empty_frame


def frame(df: pd.DataFrame | None) -> pd.DataFrame:
    """The frame with attempt-log dtypes (a frame read back from CSV works too)."""
    if df is None or len(df) == 0:
        return empty_frame()
    if list(df.columns) == list(COLUMNS) and str(df["phase"].dtype) == "category":
        return df
    return coerce(df)


def wait_kind(df: pd.DataFrame) -> pd.Series[Any]:
    """For each row, what kind of wait follows it: backoff, retry_after, paced, or NA.

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.

    Returns:
        A string Series aligned with `df`: "backoff", "retry_after", "paced", or NA where no wait
            follows.
    """
    df = frame(df)
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
    """One row per (error_kind, action): how often, how many retries, how long spent waiting,
    and what those attempts cost.

    Rows that succeeded are grouped under the error kind "ok" (and "paced" rate-limiter holds
    under action "paced"); structured answers asked for again are (`OutputInvalid`, "reask").
    Columns: `error_kind, action, count, retries, retry_after_waits, wait_total_s, wait_mean_s,
    wait_max_s, attempt_time_s, tokens, cost_usd, token_share, cost_share`, sorted by count:
    `tokens` are input plus output tokens, the shares are of the whole frame's (NaN when the
    frame has none, as with the free demo model's cost).

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.

    Returns:
        The table, one row per error kind and action.
    """
    df = frame(df)
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
            "tokens": df["input_tokens"].fillna(0).to_numpy(dtype=float)
            + df["output_tokens"].fillna(0).to_numpy(dtype=float),
            "cost": df["cost_usd"].to_numpy(dtype=float),
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
            "tokens": g["tokens"].sum().astype(int),
            "cost_usd": g["cost"].sum(min_count=0),
        }
    )
    total_tokens = float(out["tokens"].sum())
    total_cost = float(np.nansum(out["cost_usd"].to_numpy(dtype=float)))
    out["token_share"] = out["tokens"] / total_tokens if total_tokens else np.nan
    out["cost_share"] = out["cost_usd"].fillna(0) / total_cost if total_cost else np.nan
    out = out.reset_index().sort_values(["count", "error_kind"], ascending=[False, True])
    result: pd.DataFrame = out.reset_index(drop=True)
    return result


def success_rate_by_attempt(df: pd.DataFrame) -> pd.DataFrame:
    """For each attempt number n of provider requests: how many attempts were made, how many
    succeeded, `success_rate` (succeeded / made at n) and `share` (succeeded at n / all
    requests, a request being counted by its first attempt) with its running total.

    Args:
        df: An attempt frame: `agent.attempts`, `BatchResult.attempts`, `read_attempts(...)`, a
            watcher's.

    Returns:
        One row per attempt number: `attempt, attempts, succeeded, success_rate, share,
            cumulative_share`.
    """
    df = frame(df)
    req = df[(df["phase"] == "request").to_numpy(dtype=bool) & df["attempt"].notna().to_numpy()]
    req = req[(req["action"] != "paced").to_numpy(dtype=bool)]
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
