"""Replaying a recording over real HTTP (MockServer(replay=...), Agent("replay:...")): the same
bytes, the same timing, and one sentence for a request the recording cannot answer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pandas as pd
import pytest

from nbagent import Agent, BadRequest, RetryPolicy
from nbagent.mock import MockServer
from nbagent.recording import RecordedExchange, read_recording

pytestmark = pytest.mark.e2e

HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}


def _body(model: str = "demo", prompt: str = "What is 2 + 2?") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }


def _post(
    client: httpx.Client, url: str, body: dict[str, Any]
) -> tuple[int | None, bytes, list[tuple[float, int]]]:
    """Status, the body as received, and (client time, bytes so far) after each read."""
    reads: list[tuple[float, int]] = []
    got = b""
    try:
        with client.stream("POST", url, json=body, headers=HEADERS) as response:
            for piece in response.iter_raw():
                got += piece
                reads.append((time.perf_counter(), len(got)))
            return response.status_code, got, reads
    except (httpx.RemoteProtocolError, httpx.ReadError):
        return None, got, reads


def _chunk_data(ex: RecordedExchange) -> list[bytes]:
    return [data for _, data in ex.chunks]


FAULTS = [
    "429:retry_after=0.05",
    "overloaded_midstream",
    "500",
    "drop_after_tokens=2",
    "close",
    "ok",
]


def test_a_replay_sends_the_recorded_status_headers_and_chunks_byte_for_byte(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first.nbrec", tmp_path / "second.nbrec"
    with MockServer(FAULTS, record=first, demo_delay_s=0.01) as server, httpx.Client() as client:
        originals = [_post(client, server.anthropic_url, _body()) for _ in FAULTS]
    with MockServer(replay=first, record=second) as server, httpx.Client() as client:
        replays = [_post(client, server.anthropic_url, _body()) for _ in FAULTS]
        assert server.replayer is not None and server.replayer.served == len(FAULTS)
    recorded, replayed = read_recording(first), read_recording(second)
    assert len(recorded) == len(replayed) == len(FAULTS)
    for a, b in zip(recorded.exchanges, replayed.exchanges, strict=True):
        assert (a.status, a.headers, a.error is None) == (b.status, b.headers, b.error is None)
        assert _chunk_data(a) == _chunk_data(b)
    statuses = [status for status, _, _ in replays]
    assert statuses == [status for status, _, _ in originals] == [429, 200, 500, None, None, 200]
    for (_, got, _), (_, want, _) in zip(replays, originals, strict=True):
        assert got == want  # what the client read, byte for byte
    assert b"overloaded_error" in replays[1][1] and b"message_stop" in replays[5][1]


def _arrivals(ex: RecordedExchange, reads: list[tuple[float, int]]) -> list[float]:
    """When the client had each recorded chunk whole, from its own timestamps."""
    out: list[float] = []
    end = 0
    for _, data in ex.chunks:
        end += len(data)
        out.append(next(t for t, have in reads if have >= end))
    return out


def test_a_replay_at_speed_1_keeps_each_chunk_within_20_ms_of_its_recorded_offset(
    tmp_path: Path,
) -> None:
    path = tmp_path / "paced.nbrec"
    with MockServer(["ok"], record=path, demo_delay_s=0.04) as server, httpx.Client() as client:
        _post(client, server.anthropic_url, _body())
    (ex,) = read_recording(path).exchanges
    assert len(ex.chunks) > 10
    # offsets from the first chunk, on each side's own clock: what a reader of the stream sees
    want = [t - ex.chunks[0][0] for t, _ in ex.chunks]
    worsts: list[float] = []
    # A busy machine can deschedule the server's or the client's thread for tens of
    # milliseconds at any moment: one such hiccup spoils one replay, not the pacing. A replay
    # that paces wrongly (offsets ignored, scaled, or drifting) misses in every one of them.
    for _ in range(3):
        with MockServer(replay=path, speed=1.0) as server, httpx.Client() as client:
            status, _, reads = _post(client, server.anthropic_url, _body())
        assert status == 200
        arrived = _arrivals(ex, reads)
        got = [t - arrived[0] for t in arrived]
        assert got[-1] >= 0.04 * (len(ex.chunks) - 3)  # the pacing was kept, not dropped
        worsts.append(max(abs(g - w) for g, w in zip(got, want, strict=True)))
        if worsts[-1] <= 0.020:
            break
    shown = ", ".join(f"{w * 1000:.1f} ms" for w in worsts)
    assert min(worsts) <= 0.020, f"the worst chunk of each replay came off by {shown}"


def test_a_replay_at_double_speed_halves_the_offsets(tmp_path: Path) -> None:
    path = tmp_path / "paced.nbrec"
    with MockServer(["ok"], record=path, demo_delay_s=0.04) as server, httpx.Client() as client:
        _post(client, server.anthropic_url, _body())
    (ex,) = read_recording(path).exchanges
    recorded_span = ex.chunks[-1][0] - ex.chunks[0][0]
    errors: list[float] = []
    for _ in range(3):  # as above: one scheduling hiccup spoils one replay only
        with MockServer(replay=path, speed=2.0) as server, httpx.Client() as client:
            _, _, reads = _post(client, server.anthropic_url, _body())
        arrived = _arrivals(ex, reads)
        errors.append(abs((arrived[-1] - arrived[0]) - recorded_span / 2))
        if errors[-1] <= 0.020:
            break
    assert min(errors) <= 0.020, f"the replayed span was off by {errors} s"


def test_a_request_the_recording_cannot_answer_gets_one_sentence_naming_the_difference(
    tmp_path: Path,
) -> None:
    path = tmp_path / "one.nbrec"
    with MockServer(["ok"], record=path) as server, httpx.Client() as client:
        _post(client, server.anthropic_url, _body())
    with MockServer(replay=path) as server, httpx.Client() as client:
        wrong_model = client.post(server.anthropic_url, json=_body("claude-x"), headers=HEADERS)
        wrong_path = client.post(server.openai_url, json=_body(), headers=HEADERS)
        right = _post(client, server.anthropic_url, _body())
        too_many = client.post(server.anthropic_url, json=_body(), headers=HEADERS)
    assert right[0] == 200
    for response, words in (
        (wrong_model, "request 1 of one.nbrec asked for model 'demo', not 'claude-x'."),
        (wrong_path, "request 1 of one.nbrec went to /v1/messages, not to /v1/chat/completions."),
        (too_many, "request 2 goes past the end of one.nbrec, which recorded 1 request."),
    ):
        assert response.status_code == 400
        assert response.headers["x-should-retry"] == "false"
        assert words in response.text


def _agent_session(path: Path, faults: list[str]) -> tuple[str, list[tuple[Any, ...]]]:
    async def main() -> tuple[str, list[tuple[Any, ...]]]:
        with MockServer(faults, demo_delay_s=0.002) as server:
            agent = Agent(
                "demo",
                base_url=server.url,
                limiter=False,
                record=path,
                retry=RetryPolicy(max_attempts=6, seed=1),
            )
            async with agent:
                result = await agent.run("What is 2 + 2?", show=False)
            return result.final_text, _outcomes(agent)

    return asyncio.run(main())


def _outcomes(agent: Agent) -> list[tuple[Any, ...]]:
    frame = agent.attempts

    def dashed(column: str) -> list[Any]:  # no fillna: pandas 2 warns of its downcasting
        return ["-" if pd.isna(v) else v for v in frame[column]]

    return list(zip(frame["outcome"], dashed("error_kind"), dashed("status_code"), strict=True))


def test_an_agent_recording_replays_to_the_same_run_through_replay_model_string(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.nbrec"
    faults = ["529", "overloaded_midstream", "429:retry_after=0.05", "drop_after_tokens=2", "ok"]
    text, outcomes = _agent_session(path, faults)
    assert [o[1] for o in outcomes] == [
        "Overloaded",
        "Overloaded",
        "RateLimited",
        "StreamInterrupted",
        "-",
    ]

    async def replay() -> tuple[str, list[tuple[Any, ...]], BaseException]:
        agent = Agent(f"replay:{path}", limiter=False, retry=RetryPolicy(max_attempts=6, seed=1))
        async with agent:
            result = await agent.run("What is 2 + 2?", show=False)
            replayed = _outcomes(agent)
            with pytest.raises(BadRequest) as info:  # one request more than was recorded
                await agent.run("And 3 + 3?", show=False)
        return result.final_text, replayed, info.value

    again, replayed, error = asyncio.run(replay())
    assert again == text
    assert replayed == outcomes
    assert "goes past the end of agent.nbrec" in str(error)


def test_the_official_anthropic_sdk_reads_a_replayed_agent_recording(tmp_path: Path) -> None:
    path = tmp_path / "agent.nbrec"
    text, _ = _agent_session(path, ["429:retry_after=0.05", "ok"])
    with MockServer(replay=path) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="not-a-key", max_retries=2)
        with client.messages.stream(
            model="demo", max_tokens=4096, messages=[{"role": "user", "content": "What is 2 + 2?"}]
        ) as stream:
            sdk_text = stream.get_final_text()
        client.close()
        assert server.replayer is not None and server.replayer.served == 2  # it retried the 429
    assert sdk_text == text


def test_a_recording_cut_off_mid_answer_replays_as_a_broken_connection(tmp_path: Path) -> None:
    path = tmp_path / "cut.nbrec"
    with MockServer(["ok"], record=path, demo_delay_s=0.005) as server, httpx.Client() as client:
        _post(client, server.anthropic_url, _body())
    lines = path.read_text().splitlines(keepends=True)
    assert '"kind": "end"' in lines[-1]
    path.write_text("".join(lines[:-3]))  # the recorder died before the last chunks
    with MockServer(replay=path) as server, httpx.Client() as client:
        status, got, _ = _post(client, server.anthropic_url, _body())
    assert status is None and got and b"message_stop" not in got


def test_speed_must_be_positive(tmp_path: Path) -> None:
    path = tmp_path / "one.nbrec"
    with MockServer(["ok"], record=path) as server, httpx.Client() as client:
        _post(client, server.anthropic_url, _body())
    with pytest.raises(ValueError, match="speed must be a positive number"):
        MockServer(replay=path, speed=0)


def test_nbagent_serve_refuses_a_damaged_recording_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nbagent.mock import main

    bad = tmp_path / "bad.nbrec"
    bad.write_text("not a recording\n")
    assert main(["--replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.nbrec is not an nbagent recording" in err and "Traceback" not in err
