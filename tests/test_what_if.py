"""what_if: a recording's server, run against another policy in virtual time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from nbagent import Agent, ConfigError, RetryPolicy
from nbagent.analysis import plot_what_if
from nbagent.mock import MockServer, RateLimit
from nbagent.recording import RecordedExchange, Recording, read_recording, write_recording
from nbagent.simulate import server_model, what_if

OVERLOADED = json.dumps(
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)
OK_STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x",'
    '"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":2}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _ex(
    n: int, at: float, status: int, body: str, *, digest: str = "d1", dur: float = 0.1
) -> RecordedExchange:
    ctype = "text/event-stream" if status == 200 else "application/json"
    return RecordedExchange(
        number=n,
        at=1000.0 + at,
        method="POST",
        path="/v1/messages",
        model="claude-x",
        body_sha256=digest,
        body_bytes=10,
        status=status,
        headers={"content-type": ctype},
        response_after_s=dur,
        chunks=[(dur, body.encode())],
        end_after_s=dur,
        complete=True,
    )


def _storm() -> Recording:
    """529 at 0, 1 and 3 s, then the server answers from 7 s on."""
    exchanges = [
        _ex(1, 0.0, 529, OVERLOADED),
        _ex(2, 1.0, 529, OVERLOADED),
        _ex(3, 3.0, 529, OVERLOADED),
        _ex(4, 7.0, 200, OK_STREAM, dur=0.5),
    ]
    return Recording(
        None, {"kind": "header", "format": "nbagent-recording", "version": 1}, exchanges
    )


def test_answers_come_by_time_whatever_the_new_policy_sends() -> None:
    slow = RetryPolicy(max_attempts=5, initial_delay=4.0, multiplier=2.0, jitter=None)
    result = what_if(_storm(), policy=slow)
    df = result.attempts
    assert list(df["outcome"]) == ["error", "error", "ok"]
    # 0 s: 529 (0.1 s), wait 4; 4.1 s: still the 529 recorded at 3 s, wait 8; 12.2 s: answered
    assert list(df["started_at"].round(6)) == [0.0, 4.1, 12.2]
    assert df["ended_at"].iloc[-1] == pytest.approx(12.7)
    table = result.comparison
    assert table.loc["recorded", "makespan_s"] == pytest.approx(7.5)
    assert table.loc["what if", "makespan_s"] == pytest.approx(12.7)
    assert table.loc["recorded", "attempts"] == 4 and table.loc["what if", "attempts"] == 3
    assert table.loc["recorded", "rejected"] == 3 and table.loc["what if", "rejected"] == 2
    assert table.loc["what if", "outcome"] == "all 1 ok"
    assert result.server.bucket is None  # no rate limit in an overload storm


def test_a_policy_that_gives_up_sooner_fails_where_the_recorded_one_got_through() -> None:
    impatient = RetryPolicy(max_attempts=2, initial_delay=0.5, jitter=None)
    attempts, table = what_if(_storm(), policy=impatient)
    assert list(attempts["action"]) == ["retry", "fail"]
    assert table.loc["what if", "outcome"] == "0 of 1 ok; 1 failed (Overloaded)"
    assert table.loc["recorded", "outcome"] == "all 1 ok"


def test_several_clients_each_meet_the_recorded_answers() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay=4.0, jitter=None)
    one = what_if(_storm(), policy=policy).attempts
    three = what_if(_storm(), policy=policy, clients=3).attempts
    assert len(three) == 3 * len(one)
    assert three["run_id"].nunique() == 3


def test_a_daily_quota_fails_every_policy(tmp_path: Path) -> None:
    fixture = (
        Path(__file__).parent
        / "fixtures"
        / "providers"
        / "mes-knowledge-base__gemini-429-per-day.txt"
    )
    text = fixture.read_text()
    body = text[text.index("{") :]
    ex = _ex(1, 0.0, 429, body)
    ex.path = "/v1beta/models/gemini-3-flash:streamGenerateContent?alt=sse"
    recording = Recording(None, {}, [ex])
    result = what_if(recording, policy=RetryPolicy(max_attempts=10, max_retry_after=3600))
    assert list(result.attempts["error_kind"]) == ["QuotaExceeded"]
    assert "QuotaExceeded" in result.comparison.loc["what if", "outcome"]


def test_what_if_reads_a_recording_file_and_an_attempt_frame_alike(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "storm.nbrec", _storm())
    from_file = what_if(path, policy=RetryPolicy(jitter=None))
    from_object = what_if(_storm(), policy=RetryPolicy(jitter=None))
    pd.testing.assert_frame_equal(from_file.attempts, from_object.attempts)
    from_frame = what_if(from_file.recorded, policy=RetryPolicy(jitter=None))
    assert from_frame.comparison.loc["recorded", "makespan_s"] == pytest.approx(7.5)
    assert len(read_recording(path)) == 4


@pytest.mark.e2e
def test_what_if_on_a_recording_of_the_mocks_token_bucket_reproduces_it_before_it_is_trusted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bucket.nbrec"
    policy = RetryPolicy(max_attempts=10, seed=1)

    async def session() -> None:
        with MockServer(rate_limit=RateLimit(requests_per_s=10, burst=2)) as server:
            agent = Agent("demo", base_url=server.url, limiter=False, record=path, retry=policy)
            async with agent:
                for i in range(20):
                    await agent.run(f"What is {i} + 2?", show=False)

    asyncio.run(session())
    model = server_model(path)
    assert model.bucket is not None and model.bucket.capacity == 2
    assert model.bucket.rate == pytest.approx(10, rel=0.1)
    same = what_if(path, policy=policy).comparison
    recorded, replayed = same.loc["recorded"], same.loc["what if"]
    # The model has the server's bucket but not the client's own time between its requests
    # (on a busy machine a slow client's recording is longer than the bucket made it): the
    # replay is never slower than the recording, nor faster than the bucket lets 20 through.
    floor_s = (20 - model.bucket.capacity) / model.bucket.rate
    assert floor_s * 0.95 <= replayed["makespan_s"] <= recorded["makespan_s"] * 1.05
    assert replayed["rejected"] == pytest.approx(recorded["rejected"], abs=2)
    assert replayed["outcome"] == recorded["outcome"] == "all 20 ok"
    # trusted, now another policy: one that will not wait for the Retry-After gives up
    other = what_if(path, policy=RetryPolicy(max_attempts=10, max_retry_after=0.01)).comparison
    assert other.loc["what if", "succeeded"] < 20
    # and three clients share the one bucket: more 429s than three times one client's
    crowd = what_if(path, policy=policy, clients=3).comparison
    assert crowd.loc["what if", "rejected"] > 3 * replayed["rejected"]


def test_plot_what_if_draws_both_timelines_one_above_the_other() -> None:
    result = what_if(_storm(), policy=RetryPolicy(jitter=None))
    fig = plot_what_if(result)
    assert isinstance(fig, Figure)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("Recorded: 4 attempts, 3 rejected")
    assert titles[1].startswith("What if:")
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim()  # one time scale


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"clients": 0}, "clients must be a whole number"),
        ({"policy": "fast"}, "policy= takes a RetryPolicy"),
    ],
)
def test_bad_arguments_are_one_config_error_sentence(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        what_if(_storm(), **kwargs)  # type: ignore[arg-type]


def test_a_source_with_no_requests_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no requests"):
        what_if(Recording(None, {}, []))
    with pytest.raises(ConfigError, match="no request attempts"):
        what_if(what_if(_storm()).attempts.iloc[0:0])
    with pytest.raises(ConfigError, match="no recording at"):
        what_if(tmp_path / "missing.nbrec")


def test_the_playground_takes_a_recording_as_its_server() -> None:
    from nbagent.demo import shipped_recordings
    from nbagent.notebook import playground

    path = shipped_recordings()["anthropic-overload-storm"]
    play = playground(recording=path, clients=1, max_attempts=4, debounce=0)
    assert play.server.value == "the server of the recording anthropic-overload-storm"
    assert len(play.server.options) == 4  # the three simulated servers, and this one
    assert play.result is not None
    expected = what_if(path, play.policy(), 1, seed=0).attempts
    assert play.result.calls == len(expected)
    gave_up = play.result.gave_up
    play.max_attempts.value = 8  # patient enough to outlast the storm
    assert play.result.gave_up < gave_up
    play.server.value = "one request at a time"
    assert play.result.clients == 1
