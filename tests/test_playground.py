"""The policy playground: its controls make the policy and the crowd, and moving one redraws.

The browser side (a slider moved in JupyterLab changes the numbers shown) is in
test_playground_browser.py; here the kernel side, without a front end.
"""

from __future__ import annotations

import asyncio
import re

import pandas as pd
import pytest

from nbagent import RetryPolicy
from nbagent.demo import shipped_recordings
from nbagent.notebook import Playground, playground
from nbagent.simulate import simulate_contention

PNG = b"\x89PNG\r\n\x1a\n"


def shown(pg: Playground, name: str) -> str:
    found = re.search(rf"class='nb-play-{name}'[^>]*>([^<]*)<", pg.numbers.value)
    assert found is not None, pg.numbers.value
    return found.group(1)


def test_the_controls_describe_the_policy_and_the_crowd() -> None:
    pg = playground(max_attempts=5, initial_delay=0.2, max_delay=4.0, multiplier=3.0, clients=12)
    assert pg.policy() == RetryPolicy(
        max_attempts=5, initial_delay=0.2, max_delay=4.0, multiplier=3.0, jitter="full", seed=0
    )
    result = pg.result
    assert result is not None
    # the numbers shown are the contention simulation's, for exactly these settings
    expected = simulate_contention(12, "full", "single", policy=pg.policy(), seed=0)
    assert result.calls == len(expected)
    assert shown(pg, "calls") == f"{len(expected):,}"
    assert shown(pg, "gave-up").endswith("of 12")
    assert shown(pg, "makespan") == f"{expected['ended_at'].max():.2f} s"
    assert bytes(pg.envelope.value).startswith(PNG) and bytes(pg.timeline.value).startswith(PNG)


def test_moving_a_control_recomputes_what_is_shown() -> None:
    pg = playground(clients=10, jitter="none")
    calls, picture = shown(pg, "calls"), bytes(pg.timeline.value)
    pg.clients.value = 40  # no event loop here: recomputed at once
    assert pg.result is not None and pg.result.clients == 40
    assert shown(pg, "calls") != calls and bytes(pg.timeline.value) != picture
    # without jitter 40 clients collide in lock-step; full jitter spreads them out
    lock_step = pg.result.calls
    pg.jitter.value = "full"
    assert pg.result.calls < lock_step
    # a token bucket that says how long to wait: the waits are the server's, not the policy's
    pg.server.value = "token bucket (10/s), 429 with Retry-After"
    waits = pg.result.frame.dropna(subset=["delay_s"])
    assert len(waits) and waits["retry_after_s"].notna().all()
    pg.server.value = "token bucket (10/s), 429 without Retry-After"
    waits = pg.result.frame.dropna(subset=["delay_s"])
    assert len(waits) and waits["retry_after_s"].isna().all()


def test_one_attempt_means_every_loser_gives_up() -> None:
    pg = playground(clients=10, max_attempts=1)
    assert pg.result is not None
    assert pg.result.calls == 10 and shown(pg, "gave-up") == "9 of 10"


def test_a_drag_is_debounced_into_one_recomputation() -> None:
    async def drag() -> tuple[int, int]:
        pg = playground(clients=5, debounce=0.05)
        computed = []
        original = pg.recompute

        def counting() -> object:
            computed.append(pg.clients.value)
            return original()

        pg.recompute = counting  # type: ignore[method-assign]
        for value in range(6, 30):  # a slider drag: one change event per step
            pg.clients.value = value
        await asyncio.sleep(0.3)
        return len(computed), computed[-1]

    count, last = asyncio.run(drag())
    assert (count, last) == (1, 29)


@pytest.mark.parametrize("jitter", ["none", "full", "equal", "decorrelated"])
def test_every_jitter_strategy_draws(jitter: str) -> None:
    pg = playground(clients=8, jitter=jitter)
    assert pg.result is not None and pg.result.calls >= 8  # each client asked at least once
    assert bytes(pg.envelope.value).startswith(PNG)


def frame_counts(frame: pd.DataFrame) -> tuple[int, int, int]:
    """What the drawn frame holds, read from it alone: clients, requests, and the requests
    whose last attempt failed ("client-02/003" is client 2's third request of a recording;
    a contention client's one request is its run)."""
    runs = frame["run_id"].astype(str)
    clients = runs.str.split("/").str[0].nunique()
    last = frame.groupby("run_id", observed=True).tail(1)
    return clients, runs.nunique(), int((last["outcome"] != "ok").sum())


@pytest.mark.parametrize("clients", [1, 3])
def test_with_a_recording_the_numbers_count_what_the_timeline_draws(clients: int) -> None:
    storm = shipped_recordings()["anthropic-overload-storm"]
    pg = playground(recording=storm, clients=clients, max_attempts=4, debounce=0)
    assert pg.result is not None
    drawn_clients, requests, failed = frame_counts(pg.result.frame)
    # the storm holds three requests: each client sends all three
    assert (drawn_clients, requests) == (clients, 3 * clients)
    assert 0 < failed <= requests  # never "gave up 2 of 1"
    assert shown(pg, "gave-up") == f"{failed} of {requests} requests"
    assert shown(pg, "calls") == f"{len(pg.result.frame):,}"
    assert shown(pg, "per-client") == f"{len(pg.result.frame) / clients:.1f}"
    plural = "s" if clients > 1 else ""
    assert pg.timeline.alt.startswith(f"Timeline of {clients} client{plural}, {requests} requests:")
    assert f"gave up: {failed} of {requests} requests" in pg.timeline.alt


def test_in_the_contention_simulation_a_client_is_one_request() -> None:
    pg = playground(clients=10, max_attempts=2)
    assert pg.result is not None
    drawn_clients, requests, failed = frame_counts(pg.result.frame)
    assert drawn_clients == requests == 10
    assert shown(pg, "gave-up") == f"{failed} of 10"
    assert pg.timeline.alt.startswith("Timeline of 10 clients:")
    assert f"gave up: {failed} of 10," in pg.timeline.alt
