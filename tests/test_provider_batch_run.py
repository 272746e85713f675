"""`backend="provider"`'s run (`nbagent.batch._provider_run`): create, poll, collect, resubmit,
stop and resume, against an in-memory Message Batches server in virtual time."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nbagent import ConfigError, RetryPolicy
from nbagent._core._clock import VirtualClock
from nbagent.providers._batch_wire import BatchCaps
from tests.batch_fakes import FakeBatchServer, fake_batch, resumed_batch

PROMPTS = ["alpha", "bravo", "charlie", "delta", "echo"]


def run(batch: Any) -> Any:
    return asyncio.run(batch.run())


def script(**by_position: str) -> Any:
    """An outcome per position for the first submission; every later one answers."""
    return lambda pos, sub: by_position.get(f"p{pos}", "ok") if sub == 1 else "ok"


def test_results_come_back_in_prompt_order_matched_by_custom_id(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock())  # answers in reverse order, a foreign line first
    prompts = pd.Series(PROMPTS, index=[f"row{i}" for i in range(5)])
    out = run(fake_batch(server, prompts, tmp_path))
    assert list(out.results.index) == [f"row{i}" for i in range(5)]
    assert out.results["final_text"].tolist() == [f"re: {p}" for p in PROMPTS]
    assert out.results["error"].isna().all()
    assert out.backend == "provider" and out.state_path == str(tmp_path / "run.batch")
    # one attempt row per item, with the batch it went in; priced at half the live price
    assert out.attempts["batch_id"].tolist() == ["msgbatch_001"] * 5
    assert out.attempts["attempt"].tolist() == [1] * 5
    live = 12 * 3e-6 + 5 * 15e-6  # claude-sonnet-4-0: $3 / $15 per million
    assert out.attempts["cost_usd"].tolist() == pytest.approx([live / 2] * 5)


def test_errored_items_are_classified_and_only_the_retryable_resubmitted(tmp_path: Path) -> None:
    server = FakeBatchServer(
        VirtualClock(), outcome=script(p0="invalid", p1="credit", p2="overloaded", p3="api_error")
    )
    out = run(fake_batch(server, PROMPTS, tmp_path))
    r = out.results
    assert r["error"].tolist()[:2] == ["BadRequest", "QuotaExceeded"]
    assert "credit balance is too low" in r["error_message"][1]
    assert r["error"][2:].isna().all()  # overloaded and api_error: resubmitted, answered
    assert r["final_text"][2:].tolist() == ["re: charlie", "re: delta", "re: echo"]
    # succeeded and finally-failed items were sent once; the retryable ones twice
    assert Counter(pos for pos, _ in server.sent) == {0: 1, 1: 1, 2: 2, 3: 2, 4: 1}
    a = out.attempts
    twice = a[a["prompt_index"] == 2]
    assert twice["attempt"].tolist() == [1, 2]
    assert twice["action"].tolist() == ["retry", "none"]
    assert twice["error_kind"].tolist()[0] == "Overloaded"
    assert twice["batch_id"].nunique() == 2
    assert twice["delay_s"].iloc[0] >= 0
    assert a[a["prompt_index"] == 0]["action"].tolist() == ["fail"]


def test_a_batch_whose_every_line_failed_fails_every_row_and_sends_nothing_again(
    tmp_path: Path,
) -> None:
    server = FakeBatchServer(VirtualClock(), outcome=lambda pos, sub: "invalid")
    out = run(fake_batch(server, PROMPTS, tmp_path))
    assert out.results["error"].tolist() == ["BadRequest"] * 5
    assert server.creates == 1


def test_expiry_part_way_keeps_what_finished_and_resubmits_the_rest(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock(), expire_after=10.0, done_fraction=0.6)
    out = run(fake_batch(server, PROMPTS, tmp_path))
    assert out.results["error"].isna().all()
    a = out.attempts
    expired = a[(a["attempt"] == 1) & (a["outcome"] == "error")]
    assert sorted(expired["prompt_index"]) == [3, 4]  # the items not reached in time
    assert set(expired["error_kind"]) == {"ServerError"}
    assert expired["message"].str.contains("expired").all()
    assert Counter(pos for pos, _ in server.sent) == {0: 1, 1: 1, 2: 1, 3: 2, 4: 2}


def test_the_retry_policy_bounds_the_submissions(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock(), outcome=lambda pos, sub: "overloaded")
    retry = RetryPolicy(max_attempts=3, initial_delay=60, seed=1)
    out = run(fake_batch(server, PROMPTS[:2], tmp_path, retry=retry))
    assert out.results["error"].tolist() == ["Overloaded"] * 2
    assert server.creates == 3
    assert out.attempts["attempt"].tolist() == [1, 2, 3, 1, 2, 3]
    assert out.attempts["action"].tolist() == ["retry", "retry", "fail"] * 2


def test_a_refusal_is_read_as_a_live_refusal_and_not_retried(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock(), outcome=script(p0="refusal"))
    out = run(fake_batch(server, PROMPTS[:2], tmp_path))
    assert out.results["error"].tolist()[0] == "ContentFiltered"
    assert server.creates == 1


def test_a_create_whose_answer_was_lost_is_adopted_not_made_again(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock(), create_faults=["lost"])
    out = run(fake_batch(server, PROMPTS, tmp_path))
    assert server.creates == 1 and len(server.batches) == 1
    assert out.results["error"].isna().all()
    assert Counter(pos for pos, _ in server.sent) == dict.fromkeys(range(5), 1)


def test_a_429_on_create_is_retried_after_its_wait(tmp_path: Path) -> None:
    clock = VirtualClock()
    server = FakeBatchServer(clock, create_faults=["429"])
    out = run(fake_batch(server, PROMPTS, tmp_path))
    assert server.creates == 2 and len(server.batches) == 1
    assert 2.0 in clock.slept  # the server's Retry-After, not the policy's delay
    assert out.results["error"].isna().all()


def test_a_batch_over_the_caps_is_split_before_sending(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock())
    out = run(fake_batch(server, PROMPTS * 2, tmp_path, caps=BatchCaps(4, 10**9)))
    assert [len(b.items) for b in server.batches.values()] == [4, 4, 2]
    assert out.results["error"].isna().all()
    one = len(json.dumps({"custom_id": "616bc7d2-0-1", "params": {}}))
    server2 = FakeBatchServer(VirtualClock())
    # a byte cap that fits about two items
    run(fake_batch(server2, PROMPTS, tmp_path, caps=BatchCaps(100, 2 * one + 300), name="b"))
    sizes = [len(b.items) for b in server2.batches.values()]
    assert sum(sizes) == 5 and max(sizes) < 5 and len(sizes) >= 2


def test_an_item_larger_than_a_whole_batch_fails_alone(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock())
    prompts = ["short", "x" * 5000, "short too"]
    out = run(fake_batch(server, prompts, tmp_path, caps=BatchCaps(100, 2000)))
    assert out.results["error"].tolist()[1] == "BadRequest"
    assert "larger than one Anthropic Message Batches batch" in out.results["error_message"][1]
    assert out.results["error"][[0, 2]].isna().all()


def test_the_state_names_the_batch_before_the_first_poll(tmp_path: Path) -> None:
    seen: list[Any] = []

    def on_poll(server: FakeBatchServer) -> None:
        if not seen:
            doc = json.loads((tmp_path / "run.batch").read_text())
            seen.append(doc)

    server = FakeBatchServer(VirtualClock(), on_poll=on_poll)
    run(fake_batch(server, PROMPTS, tmp_path))
    (doc,) = seen
    assert [b["id"] for b in doc["batches"]] == ["msgbatch_001"]
    assert doc["prompts"] == PROMPTS and doc["batches"][0]["items"] == [[0, 5]]
    assert "sk-fake" not in json.dumps(doc)


def test_stop_cancels_the_batch_and_keeps_what_had_finished(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock(), outcome=script(p4="overloaded"), done_fraction=0.6)
    batch = fake_batch(server, PROMPTS, tmp_path)
    server.on_poll = lambda s: batch.control.cancel() if s.polls == 2 else None
    out = run(batch)
    assert out.cancelled
    (fake,) = server.batches.values()
    assert fake.cancelled_at is not None
    r = out.results
    assert r["final_text"][:3].tolist() == ["re: alpha", "re: bravo", "re: charlie"]
    assert r["end_reason"][3:].tolist() == ["cancelled", "cancelled"]
    assert r["error"][3:].tolist() == ["Aborted", "Aborted"]
    assert server.creates == 1  # nothing resubmitted after a stop


class Killed(BaseException):
    """The kernel dying mid-poll: nothing of nbagent's runs after it."""


def test_resume_picks_up_every_batch_in_flight_and_sends_nothing_twice(tmp_path: Path) -> None:
    clock = VirtualClock()
    server = FakeBatchServer(clock, outcome=script(p1="overloaded"))

    def kill(s: FakeBatchServer) -> None:
        if s.polls == 3:
            raise Killed

    server.on_poll = kill
    with pytest.raises(Killed):
        run(fake_batch(server, PROMPTS, tmp_path))
    server.on_poll = None
    out = run(resumed_batch(server, tmp_path / "run.batch"))
    assert out.results["final_text"].tolist() == [f"re: {p}" for p in PROMPTS]
    assert server.creates == 2  # the first batch, and the resubmission of item 1
    assert Counter(pos for pos, _ in server.sent) == {0: 1, 1: 2, 2: 1, 3: 1, 4: 1}
    # resumed again once finished: the same result, nothing sent
    again = run(resumed_batch(server, tmp_path / "run.batch"))
    assert server.creates == 2
    pd.testing.assert_frame_equal(
        again.results.drop(columns="duration_s"), out.results.drop(columns="duration_s")
    )
    assert again.attempts["batch_id"].tolist() == out.attempts["batch_id"].tolist()


def test_resume_during_a_create_adopts_the_batch_it_made(tmp_path: Path) -> None:
    server = FakeBatchServer(VirtualClock())
    batch = fake_batch(server, PROMPTS, tmp_path)
    real_create = server.create

    def create_then_die(items: Any) -> Any:
        real_create(items)
        raise Killed  # the answer never came: the kernel died first

    server.create = create_then_die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        run(batch)
    server.create = real_create  # type: ignore[method-assign]
    doc = json.loads((tmp_path / "run.batch").read_text())
    assert doc["batches"][0]["step"] == "creating" and doc["batches"][0]["id"] is None
    out = run(resumed_batch(server, tmp_path / "run.batch"))
    assert server.creates == 1 and len(server.batches) == 1
    assert out.results["error"].isna().all()


def test_a_state_file_that_exists_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "run.batch").write_text("{}")
    with pytest.raises(ConfigError, match="exists already: resume that batch"):
        fake_batch(FakeBatchServer(VirtualClock()), PROMPTS, tmp_path)
    assert (tmp_path / "run.batch").read_text() == "{}"


def test_a_file_that_is_not_a_state_file_is_refused_in_one_sentence(tmp_path: Path) -> None:
    from nbagent.batch import resume

    (tmp_path / "x.batch").write_text('{"kind": "something else"}')
    with pytest.raises(ConfigError, match="not an nbagent provider batch state file"):
        resume(tmp_path / "x.batch")
    with pytest.raises(ConfigError, match="no batch state file at"):
        resume(tmp_path / "missing.batch")


@pytest.mark.parametrize("field", ["request", "retry", "caps"])
def test_a_state_file_with_a_head_field_nulled_is_refused_as_damaged(
    tmp_path: Path, field: str
) -> None:
    from nbagent.batch._provider_state import ProviderState

    run(fake_batch(FakeBatchServer(VirtualClock()), PROMPTS, tmp_path))
    path = tmp_path / "run.batch"
    doc = json.loads(path.read_text())
    doc[field] = None
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="is a damaged batch state file"):
        ProviderState.load(path)


def test_the_view_and_the_progress_line_show_each_batch_and_the_resubmission(
    tmp_path: Path,
) -> None:
    from nbagent.notebook._batch_view import render_text

    server = FakeBatchServer(VirtualClock(), outcome=script(p1="overloaded"))
    batch = fake_batch(server, PROMPTS, tmp_path)
    seen: list[dict[str, Any]] = []
    server.on_poll = lambda s: seen.append(batch.progress.snapshot())
    run(batch)
    first = seen[0]["batches"][0]
    assert first["id"] == "msgbatch_001" and first["status"] == "in_progress"
    assert first["counts"]["processing"] == 5 and first["submission"] == 1
    snap = batch.progress.snapshot()
    assert [b["submission"] for b in snap["batches"]] == [1, 2]
    assert all(b["collected"] for b in snap["batches"]) and snap["resubmissions"] == 1
    assert snap["state"] == str(tmp_path / "run.batch")
    assert any(s["batches"][0].get("next_poll_s") is not None for s in seen[1:])
    assert "2 batches (0 open, 1 resubmitted)" in batch.progress.text()
    assert "2 provider batches (0 open)" in render_text(snap)
    assert snap["done"] == 5 and snap["failed"] == 0


def test_an_items_attempt_state_is_kept_in_its_record_and_read_from_older_files() -> None:
    from nbagent._core._decision import AttemptState
    from nbagent.batch._provider_state import BatchRecord

    kept = AttemptState(2, empty_replies=1, reasks=1, previous_delay=3.0)
    rec = BatchRecord(3, "t-b3", 3, [[0, 2]], 2, attempts={"0": kept.to_json()})
    assert rec.attempt_state(0) == kept.begin()  # stepped by the decision, begun by the send
    assert rec.attempt_state(1) == AttemptState(3)
    # a file of the nbagent before: the tail kept the reasks and the submission they began in
    old = BatchRecord(
        3, "t-b3", 3, [[0, 1]], 1, tails={"0": {"messages": [], "reasks": 1, "since": 2}}
    )
    assert old.attempt_state(0) == AttemptState(2, reasks=1)


def test_a_stop_reaches_a_run_that_has_polled_many_times_and_nothing_it_stopped_waiting_for() -> (
    None
):
    """Each poll of a provider batch waits for its sleep or a Stop; a wait the sleep ended is
    forgotten, so a day of polls holds no waiters, and a Stop still ends the wait in progress."""
    from nbagent.batch._spec import BatchControl

    async def go() -> bool:
        control = BatchControl()
        for _ in range(500):  # polls whose sleep came first
            await control.until(asyncio.ensure_future(asyncio.sleep(0)))
        await asyncio.sleep(0)  # the last wait, given up, ends on the loop's next turn
        assert control._waiters == []
        waiting = asyncio.ensure_future(control.until(asyncio.get_running_loop().create_future()))
        await asyncio.sleep(0)
        control.cancel()
        await asyncio.wait_for(waiting, 5.0)
        return control.cancelled and control._waiters == []

    assert asyncio.run(go())
