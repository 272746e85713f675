"""What the widget's state tells a screen reader, and the time axis it shares with the PNGs.

The browser side (roles, focus, the live region speaking) is in test_accessibility_browser.py;
here the words themselves: every bar's accessible name, the live region's announcements (one
per change, none per streamed delta), and the compressed axis, which must be the one the
static figure draws for the same events.
"""

from __future__ import annotations

import dataclasses

from harness.timeline_script import ANNOUNCED, FINAL, RUN, live_events, run_events

from nbagent._core._budget import Usage
from nbagent._loop._attempt_log import AttemptLog
from nbagent.analysis._timeline import _picture
from nbagent.events import Event, RunFinished, TextDelta
from nbagent.notebook import TimelineState
from nbagent.notebook._a11y import spoken_seconds


def announcements(events: list[Event], every: int = 1) -> tuple[list[str], int]:
    """The texts the live region would speak, reading the state every `every` events (and
    after the last), and how many snapshots were read."""
    state = TimelineState(wall=lambda: 1_000.0)
    said: list[str] = []
    heard, reads = 0, 0
    for i, event in enumerate(events):
        state(event)
        if i % every == 0 or i == len(events) - 1:
            reads += 1
            a = state.snapshot()["announcement"]
            if a["id"] != heard:
                assert a["id"] == heard + 1, "two announcements between two reads"
                heard = a["id"]
                said.append(a["text"])
    return said, reads


def test_each_change_is_announced_once() -> None:
    said, _ = announcements(run_events())
    assert said == ANNOUNCED


def test_a_long_stream_announces_nothing_per_delta() -> None:
    events = run_events()
    last_start = max(i for i, e in enumerate(events) if type(e).__name__ == "AttemptStarted")
    deltas = [
        TextDelta(run_id=RUN, time=108.7 + i * 1e-5, turn=2, attempt=2, text=f" w{i}")
        for i in range(20_000)
    ]
    stream = [*events[: last_start + 1], *deltas, *events[last_start + 1 :]]
    said, reads = announcements(stream)
    assert reads > 20_000
    assert said == ANNOUNCED  # the same five, not one more for 20,000 deltas


def test_failures_and_endings_are_announced_in_words() -> None:
    events = live_events()
    quota = RunFinished(
        run_id=RUN,
        time=107.0,
        turn=2,
        end_reason="error",
        error="QuotaExceeded",
        usage=Usage(),
        model="demo",
    )
    said, _ = announcements([*events, quota])
    assert said[-1] == "failed with QuotaExceeded"
    cancelled = dataclasses.replace(quota, end_reason="cancelled", error="")
    said, _ = announcements([*events, cancelled])
    assert said[-1] == "cancelled"


def test_every_bar_has_a_name_that_says_what_it_is() -> None:
    state = TimelineState()
    for event in run_events():
        state(event)
    names = [b["aria"] for b in state.snapshot()["bars"]]
    assert names == [
        "request attempt 1 of 4: 503 service unavailable after 0.5 s; backoff 2.4 s",
        "request attempt 2 of 4: ok after 0.7 s",
        "tool read_file: returned an error after 0.8 s",
        "tool list_dir: ok after 0.4 s",
        "request attempt 1 of 4: 400 context window exceeded after 0.3 s; compacting",
        "compaction: 48,210 → 12,400 tokens in 1.4 s",
        "compaction request 1 of 2: ok after 1.3 s",
        "request attempt 1 of 4: 429 too many requests after 0.3 s; the server's Retry-After 2 s",
        "request attempt 2 of 4: ok after 1.2 s",
    ]


def test_spoken_seconds() -> None:
    assert [spoken_seconds(x) for x in (0.04, 0.4, 1.0, 2.44, 12.6, None)] == [
        "0.04 s",
        "0.4 s",
        "1 s",
        "2.4 s",
        "13 s",
        "an unknown time",
    ]


def shifted(events: list[Event], by: float, run_id: str) -> list[Event]:
    return [dataclasses.replace(e, time=e.time + by, run_id=run_id) for e in events]


def test_the_widget_and_the_png_compress_the_same_idle_stretch() -> None:
    # two runs of the scripted session, the second a minute after the first ended
    events = [*run_events(), *shifted(run_events(), 70.0, "run-2")]
    state, log = TimelineState(), AttemptLog()
    for event in events:
        state(event)
        log(event)
    axis = state.snapshot()["axis"]
    assert axis["t0"] == 100.0
    picture = _picture(log.frame(), max_groups=40, compress=True)
    assert not isinstance(picture, str)
    png_breaks = picture.axis.breaks
    widget_breaks = [tuple(b) for b in axis["breaks"]]
    # the minute between the runs is drawn shorter in both, and marked in both
    idle = (9.6, 70.0)
    assert any(a <= idle[0] + 1e-6 and b >= idle[1] - 1e-6 for a, b in widget_breaks)
    assert any(a <= idle[0] + 1e-6 and b >= idle[1] - 1e-6 for a, b in png_breaks)
    # ... by the same mapping: every knot of the PNG's axis is where the widget puts it
    from nbagent._axis import Axis

    widget = Axis(tuple(axis["times"]), tuple(axis["positions"]))
    for t in (0.0, 5.0, 9.6, 40.0, 70.0, 75.0):
        drawn = picture.axis.at(t)
        assert abs(widget.at(t) - drawn) <= 0.02 * widget.width, (t, widget.at(t), drawn)
    # a short attempt after the long wait stays visible: at least 1 % of the drawn width
    second = [b for b in state.snapshot()["bars"] if b["run_id"] == "run-2"][1]
    drawn = widget.at(second["end"] - 100.0) - widget.at(second["start"] - 100.0)
    assert drawn / widget.width > 0.01
    assert (second["end"] - second["start"]) / widget.span < 0.01  # a sliver if linear
    assert FINAL  # the scripted reply is the same in both runs


def test_a_watched_sdk_s_wait_is_announced_as_the_sdk_s() -> None:
    from nbagent.events import SDKRetryScheduled

    wait = SDKRetryScheduled(
        run_id=RUN,
        time=100.5,
        turn=1,
        phase="request",
        attempt=1,
        next_attempt=2,
        max_attempts=3,
        model="demo",
        delay_s=1.0,
        policy_delay_s=0.5,
        error="RateLimited",
        message="rate limited",
        status_code=429,
        retry_after_s=1.0,
        sdk="the Anthropic SDK",
    )
    said, _ = announcements([*live_events()[:2], wait])
    assert said[-1] == (
        "rate limit: the Anthropic SDK is waiting 1 s (the server's Retry-After) before attempt 2"
    )
