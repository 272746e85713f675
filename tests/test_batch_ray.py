"""`map(..., backend="ray")` on a real local Ray (2 CPUs, one session for the module).

The mock server runs in this process on 127.0.0.1; the Ray workers are other processes and
reach it over HTTP, as they would a provider. Faults of the engine are real: a worker process is
killed with SIGKILL, the limiter actor with `ray.kill`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ray_support import per_second_peak, ray_session

from nbagent import Agent, ConfigError
from nbagent._loop._limiter import limiter_key
from nbagent.batch import BatchHandle, BatchResult, map, start
from nbagent.batch._ray import NAMESPACE, _pool, limiter_name, session_key
from nbagent.mock import MockServer, RateLimit, serve

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RATE, BURST = 20.0, 5
LEARNING = 3
"""429s any limiter spends learning the rate (each 429's Retry-After names the refill)."""
CORRECTING = 4
"""429s the limiter spends correcting a rate measured too fast (see `nbagent.RateLimiter`): what
a busy machine causes, Retry-Afters and outcomes heard late."""


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    yield from ray_session(num_cpus=2)


def _prompts(n: int) -> list[str]:
    return [f"What is {i} * 7?" for i in range(n)]


def _sent(server: MockServer) -> list[float]:
    return [r.received_at for r in server.requests if r.method == "POST"]


async def _when(handle: BatchHandle, done: int) -> None:
    while handle.progress.done < done and not handle.done():
        await asyncio.sleep(0.02)


def test_results_in_prompt_order_every_attempt_with_its_worker(ray: Any) -> None:
    prompts = _prompts(24)
    with serve() as server:
        out = map(prompts, base_url=server.url, backend="ray", system="Answer briefly.", show=False)
        systems = {_system_text(r.body) for r in server.requests if r.method == "POST"}
    assert isinstance(out, BatchResult) and out.backend == "ray"
    df = out.results
    assert df["prompt"].tolist() == prompts
    assert df["error"].isna().all() and (df["end_reason"] == "end_turn").all()
    assert df["run_id"].is_unique
    assert systems == {"Answer briefly."}  # the agents' keywords reached every worker
    a = out.attempts
    assert list(a.columns[:2]) == ["prompt_index", "run_id"]
    assert list(a.columns[-2:]) == ["agent_id", "worker"]
    assert sorted(set(a["prompt_index"])) == list(range(24))
    assert set(a["agent_id"]) == {f"{i}.1" for i in range(24)}
    assert a["worker"].nunique() == 2  # spread over both worker processes
    assert all(f":{os.getpid()}" not in w for w in a["worker"])  # none ran in this process
    assert "cluster-wide RateLimiter" in out.limiter and "2 Ray workers" in out.limiter


def test_one_budget_for_every_worker(ray: Any) -> None:
    with serve(rate_limit=RateLimit(requests_per_s=RATE, burst=BURST)) as server:
        out = map(_prompts(80), base_url=server.url, backend="ray", concurrency=16, show=False)
        sent, statuses = _sent(server), [r.status for r in server.requests]
    assert out.results["error"].isna().all()
    # the server's bucket admits at most BURST + RATE in any second, however late a slot is
    # spent; beyond those, only the 429s the design spends: learning the rate, and correcting a
    # rate a busy machine made it measure too fast. (One limiter per worker sends ~40-50.)
    assert per_second_peak(sent, 0.999) <= RATE + BURST + LEARNING + CORRECTING
    # few rejections: learning the rate costs a handful, a large share of only 80 requests on a
    # busy machine (benchmarks/bench_ray.py holds 400 prompts to <= 0.1 rejected per success)
    assert statuses.count(429) <= 0.2 * statuses.count(200)
    assert "cluster-wide RateLimiter(rate=" in out.limiter  # one limiter, shared
    if statuses.count(429) > LEARNING:  # it met the limit (a very slow machine may not)
        assert "rate=unknown" not in out.limiter  # and learned it


def test_a_killed_worker_s_prompts_run_again_elsewhere_exactly_once(ray: Any) -> None:
    n = 24
    killed: list[str] = []

    async def main(url: str) -> BatchResult:
        handle = start(_prompts(n), base_url=url, backend="ray", concurrency=8, show=False)
        await _when(handle, 3)
        workers = _pool[session_key(ray)]  # this session's, whatever ran before
        victim = ray.get(workers[0].ping.remote())
        os.kill(int(victim.rsplit(":", 1)[1]), signal.SIGKILL)
        killed.append(victim)
        return await handle

    with serve(demo_delay_s=0.03) as server:  # each reply streams for a while
        out = asyncio.run(main(server.url))
    df, a = out.results, out.attempts
    assert len(df) == n and df["prompt"].tolist() == _prompts(n)
    assert df["error"].isna().all()  # every prompt finished, on some worker
    assert df["run_id"].is_unique
    lost = a[a["error_kind"] == "WorkerLost"]
    assert len(lost) >= 1
    assert lost["message"].str.contains("was lost mid-prompt").all()
    assert set(lost["worker"]) == set(killed)  # the process that ran them, not its replacement
    for i in lost["prompt_index"]:
        tries = a[a["prompt_index"] == i]
        # the lost try's own requests may have succeeded before its process died: look at the
        # tries that returned
        returned = tries[~tries["agent_id"].isin(set(lost["agent_id"]))]
        ok = returned[(returned["outcome"] == "ok") & (returned["phase"] == "request")]
        assert ok["agent_id"].str.endswith(".2").any()  # its second try succeeded
        assert set(ok["worker"]).isdisjoint(set(killed))  # on another process
        assert df.loc[i, "run_id"] in set(ok["run_id"])  # the row is that try's


def test_the_limiter_actor_killed_mid_batch_restarts_and_workers_do_not_hammer(ray: Any) -> None:
    learned: dict[str, Any] = {}

    async def main(url: str) -> BatchResult:
        handle = start(_prompts(80), base_url=url, backend="ray", concurrency=16, show=False)
        await _when(handle, 10)
        key = limiter_key(Agent("demo", base_url=url)._providers[0])
        actor = ray.get_actor(limiter_name(key), namespace=NAMESPACE)
        # kill it once it has learned the rate and told the workers (its answers to their next
        # slot requests carry it), or half-way, on a machine too slow to meet the limit
        told = None
        while not handle.done() and handle.progress.done < 40:
            learned.update(await actor.stats.remote())
            if learned["rate"] and told is None:
                told = learned["requests"] + 2
            if told is not None and learned["requests"] >= told:
                learned["told"] = True
                break
            await asyncio.sleep(0.05)
        learned["killed_at"] = time.time()
        ray.kill(actor, no_restart=False)
        return await handle

    with serve(rate_limit=RateLimit(requests_per_s=RATE, burst=BURST)) as server:
        out = asyncio.run(main(server.url))
        sent, statuses = _sent(server), [r.status for r in server.requests]
        after = [r.status for r in server.requests if r.received_at > learned["killed_at"]]
        # what to read when it fails: each reply after the kill, seconds after it
        story = [
            f"{r.received_at - learned['killed_at']:.2f}s:{r.status}"
            for r in server.requests
            if r.received_at > learned["killed_at"]
        ]
    assert out.results["error"].isna().all()
    assert "limiter restarted" in out.limiter
    assert statuses.count(429) <= 0.2 * statuses.count(200)
    if learned.get("told"):
        # seeded by the workers with what the old one knew: it paces at once, no relearning. A
        # rate the old one measured too fast (a busy machine) it goes on correcting, as the old
        # one would have; slots that came due while a worker was busy are not sent together
        # (on a busy machine a slot the new actor answered late can still leave with the burst
        # after a lull: at most a learning's worth of 429s, where a storm would be dozens)
        correcting = CORRECTING if learned["rate"] > RATE else 0
        assert after.count(429) <= LEARNING + correcting, f"learned: {learned}; after: {story}"
        assert per_second_peak(sent, 0.999) <= RATE + BURST + LEARNING + CORRECTING
    else:
        # the workers knew no rate to pass on: the new one learns again, a few 429s, not a storm;
        # a rate it measured too fast (a busy machine) it corrects, as in the seeded case
        assert after.count(429) <= 2 * LEARNING + CORRECTING, f"after the kill: {story}"
        assert per_second_peak(sent, 0.999) <= RATE + BURST + 2 * LEARNING + CORRECTING


def test_cancel_stops_every_worker_and_returns_what_finished(ray: Any) -> None:
    n = 40

    async def main(server: MockServer) -> tuple[BatchResult, int, int]:
        handle = start(_prompts(n), base_url=server.url, backend="ray", concurrency=4, show=False)
        await _when(handle, 4)
        handle.cancel()
        out = await handle
        seen = len(server.requests)
        await asyncio.sleep(1.0)
        return out, seen, len(server.requests)

    with serve(demo_delay_s=0.03) as server:
        out, seen, later = asyncio.run(main(server))
    df = out.results
    assert out.cancelled and "(cancelled)" in out.summary()
    assert len(df) == n and df["prompt"].tolist() == _prompts(n)
    ok, cancelled = df[df["error"].isna()], df[df["end_reason"] == "cancelled"]
    assert len(ok) >= 4 and len(cancelled) >= 1 and len(ok) + len(cancelled) == n
    assert (cancelled["error"] == "Aborted").all()
    assert later == seen  # nothing is sent once the batch has returned


def test_bad_arguments_for_the_ray_backend(ray: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    lock = threading.Lock()

    def holds_a_lock() -> str:
        """A tool that cannot travel to another process."""
        with lock:
            return "x"

    with serve() as server:
        with pytest.raises(ConfigError, match="cannot be pickled"):
            map(["x"], base_url=server.url, backend="ray", tools=[holds_a_lock], show=False)
        with pytest.raises(ConfigError, match="limiter="):
            map(["x"], base_url=server.url, backend="ray", limiter="bogus", show=False)
        with pytest.raises(ConfigError, match="workers"):
            map(["x"], base_url=server.url, backend="ray", workers=0, show=False)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ConfigError, match=r"pip install 'nbagent-loop\[ray\]'"):
        map(["x"], backend="ray", show=False)


def _system_text(body: dict[str, Any]) -> str:
    """The system prompt of an Anthropic request body: a string, or text blocks (with a cache
    breakpoint, as nbagent sends it)."""
    system = body.get("system")
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system if isinstance(b, dict))
    return str(system)
