"""The Ray batch's driver without Ray: fake worker actors whose calls the test answers, in the
orders a real cluster produces (a killed worker's drain failing before its lost call does, a
worker that never answers, an agent that is stuck); and a worker (the actor's class, in this
process) saying what its agents wait for.

Bounds given to the driver are small here so the tests are quick; nothing asserts how long a
test took, only what the rows say once the batch has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pandas as pd

from nbagent._loop._frame import frame_from_records, with_origin
from nbagent.batch._progress import BatchProgress
from nbagent.batch._ray_driver import Driver
from nbagent.batch._ray_worker import BatchWorker, LimiterChoice
from nbagent.batch._spec import AgentSpec, BatchControl
from nbagent.events import AttemptStarted
from nbagent.mock import serve


class RayActorError(Exception):
    pass


class WorkerCrashedError(Exception):
    pass


class FakeRay:
    """What the driver uses of the `ray` module."""

    class exceptions:  # as Ray spells it
        RayActorError = RayActorError
        WorkerCrashedError = WorkerCrashedError

    def __init__(self) -> None:
        self.cancelled: list[Any] = []

    def cancel(self, ref: Any, force: bool = False) -> None:
        self.cancelled.append(ref)


class Call:
    """An actor method: `.remote(...)` returns an awaitable, as an ObjectRef is."""

    def __init__(self, fn: Any) -> None:
        self.remote = fn


def _attempt_row(run_id: str, outcome: str = "ok") -> dict[str, Any]:
    return {"run_id": run_id, "phase": "request", "outcome": outcome, "message": ""}


class Worker:
    """One worker actor handle. `process` is the label of the process behind it now (Ray
    restarts a dead one under the same handle); `alive` False makes its calls fail, `mute`
    makes them never return; `auto` answers every prompt at once."""

    def __init__(self, process: str, *, auto: bool = False) -> None:
        self.process, self.auto = process, auto
        self.alive, self.mute = True, False
        self.runs: dict[tuple[int, int], asyncio.Future[Any]] = {}
        self.stuck: dict[tuple[int, int], tuple[float, str]] = {}
        self._said: dict[str, Any] = self._empty()
        self.drain, self.ping, self.cancel = Call(self._drain), Call(self._ping), Call(self._cancel)

    def _empty(self) -> dict[str, Any]:
        return {"events": [], "rows": {}, "busy": {}}

    def says(self, i: int, attempt: int, *rows: dict[str, Any]) -> None:
        """The next drain reports that this process runs (i, attempt), with these rows."""
        started = AttemptStarted(phase="request", attempt=1, max_attempts=3, model="demo")
        self._said["events"].append((i, attempt, started))
        for idx, row in enumerate(rows):
            self._said["rows"][i, attempt, idx] = row

    async def _answer(self) -> None:
        if self.mute:
            await asyncio.Event().wait()
        if not self.alive:
            raise RayActorError(f"the actor's process {self.process} died")

    async def _drain(self, batch: str) -> dict[str, Any]:
        await self._answer()
        out, self._said = self._said, self._empty()
        out["busy"] = dict(self.stuck)
        return {"worker": self.process, **out}

    async def _ping(self) -> str:
        await self._answer()
        return self.process

    async def _cancel(self, batch: str) -> int:
        await self._answer()
        return 0

    def submit(self, i: int, attempt: int) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        self.runs[i, attempt] = fut
        if self.auto:
            fut.set_result(self.result(i, attempt))
        return fut

    def result(self, i: int, attempt: int) -> tuple[dict[str, Any], pd.DataFrame]:
        row = {"prompt": f"p{i}", "final_text": "ok", "end_reason": "end_turn", "error": None}
        rows = [_attempt_row(f"run-{i}-{attempt}")]
        return row, with_origin(frame_from_records(rows), f"{i}.{attempt}", self.process)


def _driver(workers: list[Worker], n: int, **bounds: float) -> Driver:
    def submit(actor: Worker, i: int, attempt: int) -> Any:
        return actor.submit(i, attempt)

    return Driver(
        FakeRay(),
        [f"p{i}" for i in range(n)],
        BatchProgress(n),
        BatchControl(),
        list(workers),
        submit,
        batch="b1",
        labels=[w.process for w in workers],
        **bounds,
    )


def _attempts(d: Driver) -> pd.DataFrame:
    return pd.concat([f.assign(prompt_index=i) for i, f in d.parts], ignore_index=True)


def _try_of(d: Driver, i: int) -> asyncio.Future[Any]:
    (fut,) = [f for f, t in d.inflight.items() if t.i == i]
    return fut


def test_a_lost_try_keeps_the_dead_process_s_label_when_its_drain_fails_first() -> None:
    # the order that mislabelled it: the killed worker's drain fails, the driver pings the
    # actor Ray already restarted (a new process answers), and only then does the lost call
    # of the dead process resolve
    async def main() -> tuple[Driver, Worker]:
        w0, w1 = Worker("vm:100"), Worker("vm:200")
        d = _driver([w0, w1], 2)
        d.fill(1)  # p0 on w0, p1 on w1
        w0.says(0, 1, _attempt_row("run-0-1", "error"))
        await d.poll()
        w0.alive = False  # vm:100 is killed
        await d.poll()
        assert d.down == {0}
        w0.alive, w0.process = True, "vm:101"  # Ray restarted the actor
        await d.poll()
        assert d.down == set() and d.labels[0] == "vm:101"
        lost = _try_of(d, 0)
        w0.runs[0, 1].set_exception(RayActorError("the actor died"))
        d.took(lost)
        await d.poll()  # the restarted process answers its ping
        d.fill(1)  # the prompt runs again there (the least loaded)
        again = _try_of(d, 0)
        w0.runs[0, 2].set_result(w0.result(0, 2))
        d.took(again)
        return d, w0

    d, _ = asyncio.run(main())
    a = _attempts(d)
    lost = a[a["agent_id"] == "0.1"]
    assert len(lost) == 2  # the attempt it had made, and the loss
    assert set(lost["worker"]) == {"vm:100"}  # the process that ran it, not its replacement
    assert lost["message"].str.contains("worker vm:100 was lost mid-prompt").all()
    ok = a[a["agent_id"] == "0.2"]
    assert set(ok["worker"]) == {"vm:101"}
    assert d.rows[0] is not None and d.rows[0]["error"] is None


def test_a_lost_try_carries_the_process_that_reported_on_it_not_the_one_known_at_dispatch() -> None:
    # the driver handed the try out while it still knew the old process; the new one ran it
    async def main() -> Driver:
        w0 = Worker("vm:100")
        d = _driver([w0], 1)
        w0.process = "vm:101"  # restarted before the driver heard of it
        d.fill(1)
        w0.says(0, 1, _attempt_row("run-0-1", "error"))
        await d.poll()
        w0.runs[0, 1].set_exception(RayActorError("the actor died"))
        d.took(_try_of(d, 0))
        return d

    a = _attempts(asyncio.run(main()))
    assert set(a["worker"]) == {"vm:101"}


def _run(d: Driver, per_worker: int = 2) -> Driver:
    async def main() -> Driver:
        await asyncio.wait_for(d.drive(per_worker, None), 120)  # a hang fails, not hangs
        return d

    return asyncio.run(main())


def test_a_worker_that_never_answers_is_given_up_and_its_prompts_run_elsewhere() -> None:
    mute, ok = Worker("vm:100"), Worker("vm:200", auto=True)
    mute.mute = True
    d = _run(_driver([mute, ok], 4, silent_s=0.5))
    assert all(r is not None and r["error"] is None for r in d.rows)  # every prompt has its row
    a = _attempts(d)
    lost = a[a["error_kind"] == "WorkerLost"]
    assert len(lost) >= 1 and set(lost["worker"]) == {"vm:100"}
    assert lost["message"].str.contains("vm:100 stopped answering").all()
    assert set(a[a["outcome"] == "ok"]["worker"]) == {"vm:200"}
    assert len(d.ray.cancelled) == len(lost)  # its calls were cancelled through Ray


def test_prompts_no_worker_can_take_end_with_a_row_that_says_so() -> None:
    dead = [Worker("vm:100"), Worker("vm:200")]
    for w in dead:
        w.alive = False
        w.auto = False
    d = _driver(dead, 3, silent_s=0.3)

    def submit(actor: Worker, i: int, attempt: int) -> Any:
        fut = actor.submit(i, attempt)
        fut.set_exception(RayActorError("dead"))
        return fut

    d.submit = submit
    _run(d, per_worker=1)
    assert all(r is not None and r["error"] == "WorkerLost" for r in d.rows)
    said = [r["error_message"] for r in d.rows if r is not None]
    assert all(m.startswith("no Ray worker answered for 0.3 s") for m in said)
    # two prompts had a try on a worker that died; the third never started
    assert [m.endswith("did not run again") for m in said] == [True, True, False]
    assert said[2].endswith("this prompt did not run")


def test_an_agent_that_does_nothing_for_too_long_is_stopped_and_its_row_says_what_it_awaited() -> (
    None
):
    stuck, ok = Worker("vm:100"), Worker("vm:200", auto=True)
    # the worker answers its drains, but its agent has waited for a slot for an hour
    stuck.stuck[0, 1] = (3600.0, "a slot from the rate limiter")
    d = _run(_driver([stuck, ok], 2, stall_s=5.0), per_worker=1)
    row = d.rows[0]
    assert row is not None and row["error"] == "Stalled"
    assert row["error_message"] == (
        "its agent on worker vm:100 did nothing for 5 s while waiting for a slot from the "
        "rate limiter; the batch stopped waiting for it"
    )
    assert d.rows[1] is not None and d.rows[1]["error"] is None
    assert d.ray.cancelled == [stuck.runs[0, 1]]  # its call was cancelled through Ray


def test_a_slow_agent_that_keeps_doing_things_is_not_stopped() -> None:
    async def main() -> Driver:
        w = Worker("vm:100")
        d = _driver([w], 1, stall_s=5.0)
        d.fill(1)
        for _ in range(3):
            w.stuck[0, 1] = (0.1, "the provider's reply")  # it just did something
            await d.poll()
            d.watch()
        w.runs[0, 1].set_result(w.result(0, 1))
        d.took(_try_of(d, 0))
        return d

    d = asyncio.run(main())
    assert d.rows[0] is not None and d.rows[0]["error"] is None


class StuckPacer:
    """A pacer whose slot never comes (as the cluster limiter's did on Python 3.10)."""

    async def acquire(self, clock: Any, ask: Any) -> None:
        await asyncio.Event().wait()

    def succeeded(self, now: float, headers: Any) -> None:
        pass

    def failed(self, now: float, error: BaseException) -> None:
        pass

    def allow_retry(self, error: BaseException) -> bool:
        return False


def test_a_worker_says_what_each_running_agent_waits_for_and_since_when() -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        worker = BatchWorker()
        spec: asyncio.Future[AgentSpec] = asyncio.get_running_loop().create_future()
        spec.set_result(AgentSpec({"model": "demo"}))
        stuck = asyncio.ensure_future(
            worker.run("b1", 0, 1, "What is 2 + 2?", [spec], StuckPacer())
        )
        done = await worker.run("b1", 1, 1, "Hello", [spec], False)
        await asyncio.sleep(0.05)
        drained = worker.drain("b1")
        worker.cancel("b1")
        row, _ = await asyncio.wait_for(stuck, 30)
        return drained, row, done[0]

    drained, row, done = asyncio.run(main())
    ((key, (quiet_s, what)),) = drained["busy"].items()  # the finished prompt is not there
    assert key == (0, 1) and quiet_s > 0
    assert what == "a slot from the rate limiter"
    assert done["error"] is None
    assert row["error"] == "Aborted"  # cancelled, it still returns its row


def test_the_progress_counts_what_a_worker_s_agents_did_failed_attempts_too() -> None:
    # the driver once heard only of lane moves, retries and paced waits: a Ray batch's
    # progress said 0 failed attempts whatever its agents met
    async def main(url: str) -> dict[str, Any]:
        worker = BatchWorker()
        spec: asyncio.Future[AgentSpec] = asyncio.get_running_loop().create_future()
        spec.set_result(AgentSpec({"model": "demo", "base_url": url}))
        off: LimiterChoice = False
        row, _ = await worker.run("b1", 0, 1, "Hello", [spec], off)
        assert row["error"] is None
        return worker.drain("b1")

    async def drive(drained: dict[str, Any]) -> Driver:
        d = _driver([Worker("vm:100")], 1)
        d.fill(1)
        d.apply(0, drained)
        return d

    with serve(faults=["503", "ok"]) as server:
        d = asyncio.run(drive(asyncio.run(main(server.url))))
    assert (d.progress.errors, d.progress.retries) == (1, 1)
    assert d.progress.retry_wait_s > 0 and d.progress.lanes == ["running"]
