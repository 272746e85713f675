"""A provider batch survives its process: SIGKILLed mid-poll, resumed in another process from
its state file, with no item submitted twice and none lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from nbagent.batch import resume
from nbagent.mock import MockServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHILD = """
import sys, nbagent
nbagent.map([f"prompt {i}" for i in range(8)], model="anthropic:claude-sonnet-4-0",
            backend="provider", base_url=sys.argv[1], state=sys.argv[2], poll=(0.2, 0.5),
            show=False)
"""


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_a_batch_killed_mid_poll_is_resumed_elsewhere_without_sending_anything_twice(
    tmp_path: Path,
) -> None:
    state = tmp_path / "reviews.batch"
    # the batch takes its time, so the child is killed while it polls
    with MockServer(batch_duration_s=3600.0) as mock:
        mock.set_faults(["ok", "529", "ok", "ok", "invalid", "ok", "ok", "ok"])
        err = tmp_path / "child.err"
        with open(err, "wb") as sink:
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, mock.url, str(state)],
                stdout=subprocess.DEVNULL,
                stderr=sink,
                env={**os.environ, "ANTHROPIC_API_KEY": ""},
            )
        try:

            def polled() -> bool:
                if child.poll() is not None:
                    raise AssertionError(err.read_text())
                if not state.exists():
                    return False
                doc = json.loads(state.read_text())
                return bool(doc["batches"] and doc["batches"][0]["id"]) and len(mock.requests) > 0

            # generous: a busy 2-core machine starts a Python process slowly
            wait_for(polled, 120.0, "the child to create its batch and poll it")
            wait_for(
                lambda: any("/v1/messages/batches/" in r.path for r in mock.requests),
                120.0,
                "a poll",
            )
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()
        assert mock.batch_counts.batches_created["anthropic"] == 1
        mock.advance_batches(3600.0)  # the provider went on while nobody watched
        mock.batch_duration_s = 1.0
        out = resume(state, poll=(0.2, 0.5), show=False)
        r = out.results
        assert r["prompt"].tolist() == [f"prompt {i}" for i in range(8)]
        assert r["error"].tolist()[4] == "BadRequest"
        ok = [i for i in range(8) if i != 4]
        assert r["error"][ok].isna().all()
        assert set(mock.submitted_ids().values()) == {1}
        sent = Counter(int(cid.split("-")[1]) for cid in mock.submitted_ids())
        assert sent == {i: 2 if i == 1 else 1 for i in range(8)}  # only the overloaded again
        assert mock.batch_counts.batches_created["anthropic"] == 2
        a = out.attempts
        assert a.groupby("prompt_index").size().tolist() == [1, 2, 1, 1, 1, 1, 1, 1]
        assert a[a["prompt_index"] == 1]["batch_id"].nunique() == 2


DEMO_CHILD = """
import sys, nbagent
nbagent.map(["one", "two"], model="demo", backend="provider", state=sys.argv[1],
            poll=(0.1, 0.2), show=False)
"""


def test_a_demo_batch_resumed_in_a_new_process_says_at_once_why_it_cannot_be(
    tmp_path: Path,
) -> None:
    from nbagent import ConfigError

    state = tmp_path / "reviews.batch"
    # the batch runs to its end in a process of its own, with its own demo server, then exits
    subprocess.run(
        [sys.executable, "-c", DEMO_CHILD, str(state)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANTHROPIC_API_KEY": ""},
    )
    url = json.loads(state.read_text())["base_url"]
    with pytest.raises(ConfigError) as caught:  # not a TransportError after the retries
        resume(state, show=False)
    assert str(caught.value) == (
        f"the demo batch in {state} cannot be resumed here: its batches lived in the demo "
        f"model's loopback server ({url}), which ran inside the process that began it and "
        "ended with it; run the map() again (a demo batch takes seconds)"
    )
