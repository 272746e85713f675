"""A recorded session with a live request and a provider batch replays with no server.

Every request of a provider (live streams, a batch's create, polls and results download) goes
through its one request path, so `record=` keeps all of them, and `ReplayTransport` answers them
again from the recording alone. The tag a `map` call draws at random (its items' custom ids
carry it) is fixed for both sessions, as the replay of any randomised session needs the same draw.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import nbagent
from nbagent import Agent, RetryPolicy
from nbagent._core._clock import VirtualClock
from nbagent.mock import MockServer
from nbagent.providers import AnthropicProvider, HTTPProvider, OpenAIProvider
from nbagent.providers._recorded import ReplayTransport
from nbagent.recording import Recorder, read_recording

pytestmark = pytest.mark.e2e

PROMPTS = ["one", "two", "three", "four"]
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing answers there


def session(
    provider: HTTPProvider, clock: VirtualClock, tmp_path: Path, name: str
) -> tuple[Any, Any]:
    """One live run, then a provider batch of PROMPTS (one item fails once, is resubmitted)."""
    live = Agent(model=provider, retry=RetryPolicy(max_attempts=3, initial_delay=0, seed=1))
    answer = live.run_sync("hello")
    out = nbagent.map(
        PROMPTS,
        model=provider,
        backend="provider",
        show=False,
        clock=clock,
        poll=(10.0, 30.0),
        retry=RetryPolicy(max_attempts=3, initial_delay=30, seed=3),
        state=tmp_path / f"{name}.batch",
    )
    return answer, out


@pytest.mark.parametrize(
    ("cls", "model", "suffix"),
    [(AnthropicProvider, "claude-sonnet-4-0", ""), (OpenAIProvider, "gpt-4o-mini", "/v1")],
)
def test_a_recorded_session_with_a_provider_batch_replays_offline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cls: type[HTTPProvider],
    model: str,
    suffix: str,
) -> None:
    monkeypatch.setattr("nbagent.batch._provider_state.new_tag", lambda: "nb-20261203-0000beef")
    path = tmp_path / "session.nbrec"
    clock = VirtualClock(wall_start=time.time())
    with MockServer(batch_clock=clock.wall, batch_duration_s=60.0) as mock:
        mock.set_faults(["ok", "ok", "529"])
        provider = cls(model, api_key="sk-test-not-a-key", base_url=mock.url + suffix)
        provider.recorder = Recorder(path)
        answer, recorded = session(provider, clock, tmp_path, "recorded")
        provider.recorder.close()
        recorded_url = mock.url + suffix  # the server is gone: nothing answers there now
    assert recorded.results["error"].isna().all()
    assert recorded.attempts["batch_id"].nunique() == 2  # the 529 item went in a second batch

    rec = read_recording(path)
    methods = {(ex.method, ex.status) for ex in rec.exchanges}
    assert ("GET", 200) in methods and ("POST", 200) in methods  # polls and downloads too

    transport = ReplayTransport(rec)
    replayed = cls(
        model,
        api_key="sk-test-not-a-key",
        base_url=recorded_url,  # a batch's results are fetched from its own host only
        client=httpx.AsyncClient(transport=transport),
    )
    answer2, again = session(replayed, VirtualClock(wall_start=time.time()), tmp_path, "replayed")
    assert answer2.final_text == answer.final_text and "hello" in answer.final_text
    assert again.results["final_text"].tolist() == recorded.results["final_text"].tolist()
    cols = ["prompt_index", "outcome", "error_kind", "status_code", "request_id"]
    assert again.attempts[cols].equals(recorded.attempts[cols])
    assert transport.left == []  # every recorded exchange was asked for again


def test_a_request_the_recording_cannot_answer_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "empty.nbrec"
    Recorder(path).close()
    provider = AnthropicProvider(
        "claude-sonnet-4-0",
        api_key="sk-test-not-a-key",
        base_url=NOWHERE,
        client=httpx.AsyncClient(transport=ReplayTransport(read_recording(path))),
    )
    with pytest.raises(nbagent.ConfigError, match="no answer left for POST /v1/messages"):
        Agent(model=provider).run_sync("hello")
