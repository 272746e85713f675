"""The numbers under the timeline: one run's summary, and a whole session's headline.

A widget usually shows one run. The demo's report (and any timeline subscribed to an agent for
many runs) shows a session: there the headline must count every run (attempts, retries, waits
by kind, tool errors, compactions) and say how the session ended, while each run keeps its own
line below. Session totals are sums of the finished runs' summaries, so a snapshot taken ten
times a second costs one pass over the runs, not over every bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import describe

_DONE_REASONS = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "stop", "length"}

_COUNTS = (
    "attempts",
    "failed_attempts",
    "retries",
    "retry_after_waits",
    "backoff_waits",
    "paced_waits",
    "tool_calls",
    "tool_errors",
    "compactions",
    "fallbacks",
    "reasks",
)


def new_run(run_id: str, started: float | None) -> dict[str, Any]:
    """A run's record in the state: what it was asked, how it ended, and its summary."""
    return {
        "run_id": run_id,
        "prompt": "",
        "model": "",
        "started": started,
        "finished": None,
        "end_reason": None,
        "usage": None,
        "error": "",
        "message": "",
        "summary": None,
        "call": run_id,  # the intended call (a watched client's outer retries share one)
        "layer_attempt": 1,
    }


def end_status(end_reason: str | None, error: str, message: str) -> tuple[str, str]:
    """How a run ended, in the status line's words, and the status kind (done or error)."""
    reason = end_reason or "finished"
    if end_reason == "cancelled":
        return "cancelled" + (f": {message}" if message else ""), "error"
    if end_reason == "error" or (error and reason not in _DONE_REASONS):
        what = describe(error) if error else "error"
        return f"failed: {what}" + (f": {message}" if message else ""), "error"
    if end_reason == "budget":
        return "stopped: " + (message or "budget exceeded"), "error"
    return f"done: {reason}", "done"


def run_summary(
    run: Mapping[str, Any],
    bars: Iterable[Mapping[str, Any]],
    waits: Iterable[Mapping[str, Any]],
    compactions: int,
    fallbacks: int,
    call_requests: int | None = None,
) -> dict[str, Any]:
    """`run`'s numbers from its own bars and waits (already filtered to this run).

    `call_requests` is how many requests the intended call `run` is a try of has made in all
    (a watched client whose outer layer retried: the amplification), when it is more than one
    try."""
    bars = list(bars)
    attempts = [b for b in bars if b["kind"] == "attempt"]
    tools = [b for b in bars if b["kind"] == "tool"]
    retries = [w for w in waits if w["kind"] == "retry"]
    paced = [w for w in waits if w["kind"] == "paced"]
    usage = run["usage"] or {}

    def total(key: str) -> Any:
        """The run's own usage says it, else its attempts' bars do (None: none of them says)."""
        if usage.get(key) is not None:
            return usage[key]
        said = [b[key] for b in attempts if b.get(key) is not None]
        return sum(said) if said else None

    started, finished = run["started"], run["finished"]
    return {
        "run_id": run["run_id"],
        "model": run["model"],
        "end_reason": run["end_reason"],
        "error": run["error"],
        "message": run["message"],
        "attempts": len(attempts),
        "failed_attempts": sum(1 for b in attempts if b["outcome"] != "ok"),
        "retries": len(retries),
        "retry_after_waits": sum(1 for w in retries if w.get("server_wish")),
        "backoff_waits": sum(1 for w in retries if not w.get("server_wish")),
        "paced_waits": len(paced),
        "waiting_s": round(sum(w["delay_s"] for w in [*retries, *paced]), 3),
        "tool_calls": len(tools),
        "tool_errors": sum(1 for b in tools if b["is_error"]),
        "compactions": compactions,
        "fallbacks": fallbacks,
        "reasks": sum(1 for b in attempts if b.get("action") == "reask"),
        "input_tokens": total("input_tokens") or 0,
        "output_tokens": total("output_tokens") or 0,
        "cost_usd": total("cost_usd"),
        "duration_s": (
            round(finished - started, 3) if finished is not None and started is not None else None
        ),
        "layer_attempt": run.get("layer_attempt", 1),
        "call_requests": call_requests if call_requests is not None else len(attempts),
    }


def session_summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Totals over every finished run, and how the last one ended; None for a single run."""
    if len(runs) < 2:
        return None
    done = [r["summary"] for r in runs if r.get("summary")]
    out: dict[str, Any] = {key: sum(s.get(key) or 0 for s in done) for key in _COUNTS}
    costs = [s["cost_usd"] for s in done if s.get("cost_usd") is not None]
    starts = [r["started"] for r in runs if r.get("started") is not None]
    ends = [r["finished"] for r in runs if r.get("finished") is not None]
    last = runs[-1]
    # the runs that gave no answer: failed, cancelled or stopped by a budget
    failed = [s for s in done if s.get("error") or s.get("end_reason") in ("cancelled", "error")]
    # an outer layer's retries: the most requests one intended call took (None: none retried)
    amplified = [s["call_requests"] for s in done if (s.get("layer_attempt") or 1) > 1]
    out.update(
        most_requests_per_call=max(amplified) if amplified else None,
        runs=len(runs),
        runs_failed=len(failed),
        waiting_s=round(sum(s.get("waiting_s") or 0.0 for s in done), 3),
        input_tokens=sum(s.get("input_tokens") or 0 for s in done),
        output_tokens=sum(s.get("output_tokens") or 0 for s in done),
        cost_usd=sum(costs) if costs else None,
        duration_s=round(max(ends) - min(starts), 3) if starts and ends else None,
        last_end_reason=last.get("end_reason"),
        last_error=last.get("error") or "",
    )
    return out
