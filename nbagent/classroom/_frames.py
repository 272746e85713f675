"""The room's numbers as the teacher reads them: two DataFrames, a live snapshot, a figure.

`arrivals`: one row per second since the first request (quiet seconds included), requests
by status. `students`: one row per student. `snapshot` is the same numbers as the JSON the
dashboard draws, so the page and a notebook never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from ._room import Lane, Room

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "ARRIVAL_COLUMNS",
    "STUDENT_COLUMNS",
    "arrivals_frame",
    "figure",
    "snapshot",
    "students_frame",
]

STATUSES = ("200", "429", "529", "broken", "other")
ARRIVAL_COLUMNS = [
    "second",
    "requests",
    "status_200",
    "status_429",
    "status_529",
    "broken",
    "other",
    "scenario",
]
STUDENT_COLUMNS = [
    "name",
    "seat",
    "agents",
    "requests",
    "retries",
    "failures",
    "wait_s",
    "attempts",
    "jitter",
    "budget",
    "joined_s",
    "last_s",
]
LIVE_SECONDS = 90  # the dashboard's window of arrivals


def _scenario_at(room: Room, second: int) -> str:
    for run in room.history:
        end = run.stopped_s if run.stopped_s is not None else room.now()
        if run.started_s <= second + 1 and second <= end:
            return run.name
    return ""


def _arrival_rows(room: Room, since: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for second, counts in room.per_second():
        if since is not None and second < since:
            continue
        other = counts["other"] + counts["400"] + counts["401"]
        rows.append(
            {
                "second": second,
                "requests": counts["requests"],
                "status_200": counts["200"],
                "status_429": counts["429"],
                "status_529": counts["529"],
                "broken": counts["broken"],
                "other": other,
                "scenario": _scenario_at(room, second),
            }
        )
    return rows


def arrivals_frame(room: Room) -> pd.DataFrame:
    """One row per second: requests that arrived in it, and how they were answered."""
    frame: pd.DataFrame = pd.DataFrame(_arrival_rows(room), columns=ARRIVAL_COLUMNS)
    return frame


def _lane_row(lane: Lane) -> dict[str, Any]:
    return {
        "name": lane.name,
        "seat": lane.seat,
        "agents": lane.agents,
        "requests": lane.requests,
        "retries": lane.retries,
        "failures": lane.failures,
        "wait_s": round(lane.wait_s, 3),
        "attempts": lane.policy.get("attempts", ""),
        "jitter": lane.policy.get("jitter", ""),
        "budget": lane.policy.get("budget", ""),
        "joined_s": round(lane.joined_s, 3),
        "last_s": None if lane.last_s is None else round(lane.last_s, 3),
    }


def students_frame(room: Room) -> pd.DataFrame:
    """One row per student, in the order they joined."""
    rows = [_lane_row(lane) for lane in room.lanes()]
    frame: pd.DataFrame = pd.DataFrame(rows, columns=STUDENT_COLUMNS)
    return frame


def snapshot(room: Room, capacity_rps: float, refusal: str) -> dict[str, Any]:
    """What the dashboard shows, as JSON-ready data (names as given: the page escapes them)."""
    now = room.now()
    active = room.active()
    return {
        "version": room.version,
        "now_s": round(now, 3),
        "total": room.total,
        "capacity_rps": capacity_rps,
        "refusal": refusal,
        "scenario": None if active is None else active.name,
        "scenario_left_s": (
            None if active is None else round(active.started_s + active.duration_s - now, 1)
        ),
        "peaks": room.peaks(),
        "arrivals": _arrival_rows(room, since=int(now) - LIVE_SECONDS),
        "students": [_lane_row(lane) for lane in room.lanes()],
    }


def figure(room: Room, capacity_rps: float) -> Figure:
    """Arrivals per second against the capacity, the scenarios shaded: the herd, drawn."""
    from .._palette import COLORS
    from ..analysis._figures import new_figure  # shows itself as PNG in Jupyter, no pyplot

    frame = arrivals_frame(room)
    fig = new_figure(8, 3)
    ax = fig.subplots()
    if not frame.empty:
        ax.bar(
            frame["second"], frame["requests"], width=1.0, color=COLORS["running"], label="requests"
        )
        ax.bar(
            frame["second"],
            frame["status_429"] + frame["status_529"],
            width=1.0,
            color=COLORS["error"],
            label="429/529",
        )
    ax.axhline(capacity_rps, color=COLORS["fg"], linestyle="--", label="capacity")
    for run in room.history:
        end = run.stopped_s if run.stopped_s is not None else room.now()
        ax.axvspan(run.started_s, end, color=COLORS["retry_after"], alpha=0.15)
        ax.annotate(run.name, (run.started_s, 0), xytext=(2, 2), textcoords="offset points")
    ax.set_xlabel("seconds since the room opened")
    ax.set_ylabel("requests per second")
    ax.set_title("Arrivals per second, the whole room")
    ax.legend(loc="upper right", frameon=False)
    return fig
