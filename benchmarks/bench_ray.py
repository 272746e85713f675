"""Ray: 400 prompts over 4 worker processes against one rate-limited provider.

The mock server runs in its own process with a token bucket of 20 requests/s, burst 10 (429
with honest retry-after). Three ways to run the same 400 prompts on the same 4 Ray worker
processes, side by side:

- nbagent, `map(backend="ray")`: one limiter for the cluster, in a Ray actor;
- nbagent, `map(backend="ray", limiter="process")`: each worker paces with its own in-process
  limiter (which already learns remaining and rate from the server's headers and 429s);
- the official `anthropic` SDK in each worker (100 prompts each), with its own retries
  (`max_retries=999`, so every prompt finishes; its default of 2 leaves most failed).

Reported: makespan over the ideal (400 / 20 = 20 s) and rejected requests (429s) per success.
The worker processes (and, for the first row, the limiter actor) are started before the clock
starts: they are what a notebook keeps between batches; the limiter has learned nothing then.

Then the actor's cost: its own time per request (measured inside it during the run), and the
round trip of an `ask` as a caller sees it, with 1, 8 and 64 slots per call.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Goal, Report, median, mock_process

import nbagent
from nbagent import Agent
from nbagent._loop._limiter import limiter_key
from nbagent.batch._ray import NAMESPACE, _limiter_actor, _workers, limiter_name

RATE, BURST = 20.0, 10
WORKERS = 4
CONCURRENCY = 32
PROMPT = "Say hello."


def start_ray(num_cpus: int) -> Any:
    """A local Ray for the benchmark. jsonschema's optional IRI checker (rfc3987_syntax, from
    jupyter's extras) takes seconds of CPU to import in each of Ray's processes and can make
    Ray's start time out on 2 busy cores: it is hidden from them (see tests/ray_support.py)."""
    import ray

    tmp = tempfile.mkdtemp(prefix="nbagent-bench-ray-")
    stub = Path(tmp) / "rfc3987_syntax"
    stub.mkdir()
    (stub / "__init__.py").write_text("raise ImportError('hidden from Ray processes')\n")
    os.environ["PYTHONPATH"] = tmp + os.pathsep + os.environ.get("PYTHONPATH", "")
    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


class SdkWorker:
    """One worker process running its share of the prompts with the anthropic SDK."""

    def ready(self) -> bool:
        import anthropic  # noqa: F401  (imported before the clock starts)

        return True

    async def run(self, url: str, n: int, concurrency: int) -> tuple[int, int, int]:
        import anthropic

        counts = {"ok": 0, "failed": 0, "rejected": 0}

        async def seen(response: Any) -> None:
            if response.status_code == 429:
                counts["rejected"] += 1

        http = anthropic.DefaultAsyncHttpxClient(event_hooks={"response": [seen]})
        client = anthropic.AsyncAnthropic(
            base_url=url, api_key="bench", max_retries=999, http_client=http
        )
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                try:
                    async with client.messages.stream(
                        model="demo",
                        max_tokens=256,
                        messages=[{"role": "user", "content": PROMPT}],
                    ) as stream:
                        await stream.get_final_message()
                    counts["ok"] += 1
                except anthropic.APIError:
                    counts["failed"] += 1

        try:
            await asyncio.gather(*(one() for _ in range(n)))
        finally:
            await client.close()
        return counts["ok"], counts["failed"], counts["rejected"]


def _nbagent(url: str, n: int, limiter: Any) -> tuple[int, int, int, dict[str, Any]]:
    out = nbagent.map(
        [PROMPT] * n,
        base_url=url,
        backend="ray",
        workers=WORKERS,
        concurrency=CONCURRENCY,
        limiter=limiter,
        show=False,
    )
    a = out.attempts
    requests = a[(a["phase"] == "request") & (a["action"] != "paced") & a["status_code"].notna()]
    rejected = int((requests["status_code"] == 429).sum())
    ok = int(out.results["error"].isna().sum())
    return ok, len(out.results) - ok, rejected, {"limiter": out.limiter}


def _sdk(ray: Any, sdk: list[Any], url: str, n: int) -> tuple[int, int, int, dict[str, Any]]:
    share = n // len(sdk)
    per = max(1, CONCURRENCY // len(sdk))
    res = ray.get([w.run.remote(url, share, per) for w in sdk])
    return sum(r[0] for r in res), sum(r[1] for r in res), sum(r[2] for r in res), {}


def _limiter_stats(ray: Any, url: str) -> dict[str, Any]:
    key = limiter_key(Agent("demo", base_url=url)._providers[0])
    actor = ray.get_actor(limiter_name(key), namespace=NAMESPACE)
    stats: dict[str, Any] = ray.get(actor.stats.remote())
    ray.kill(actor)
    return stats


def round_trips(ray: Any, url: str, calls: int) -> dict[int, float]:
    """µs per requested slot of an `ask` round trip, seen by a caller, for 1, 8, 64 slots."""
    key = ("bench", url, "round-trip")
    actor = _limiter_actor(ray, key).actor
    seed = {"rate": 1e9, "capacity": 1e9}  # far above what is asked: every slot granted
    ray.get(actor.ask.remote("bench", 1, 40.0, seed, None))
    out = {}
    for k in (1, 8, 64):
        t0 = time.perf_counter()
        for _ in range(calls):
            ray.get(actor.ask.remote("bench", k, 40.0, None, None))
        out[k] = 1e6 * (time.perf_counter() - t0) / (calls * k)
    ray.kill(actor)
    return out


def run(short: bool = False) -> Report:
    n = 40 if short else 400
    repeats = 1 if short else 2
    ideal = n / RATE
    ray = start_ray(num_cpus=WORKERS)
    workers = _workers(ray, WORKERS, 1.0)  # started, and warmed by a batch, before any clock
    with mock_process() as url:
        nbagent.map(
            [PROMPT] * 8 * WORKERS, base_url=url, backend="ray", workers=WORKERS, show=False
        )
    sdk = [ray.remote(SdkWorker).options(num_cpus=0).remote() for _ in range(WORKERS)]
    ray.get([w.ready.remote() for w in sdk])
    rep = Report(
        f"ray: {n} prompts over {WORKERS} Ray worker processes, server bucket "
        f"{RATE:g} req/s burst {BURST}"
    )
    rows: list[tuple[str, Any]] = [
        ("nbagent, cluster-wide limiter (one Ray actor)", True),
        ("nbagent, one limiter per worker process", "process"),
        ("anthropic SDK retries in each worker (max_retries=999)", None),
    ]
    figures: dict[str, tuple[float, float]] = {}
    table = []
    actor_us: list[float] = []
    for name, limiter in rows:
        spans, rejects, fails = [], [], []
        for _ in range(repeats):
            with mock_process("--requests-per-s", str(RATE), "--burst", str(BURST)) as url:
                if limiter is True:  # the actor exists, and the workers know it, before the
                    # clock starts (as after a first batch in a notebook); it has learned nothing
                    key = limiter_key(Agent("demo", base_url=url)._providers[0])
                    choice = _limiter_actor(ray, key)
                    ray.get([w.connect.remote(choice) for w in workers])
                t0 = time.perf_counter()
                if limiter is None:
                    ok, failed, rejected, _ = _sdk(ray, sdk, url, n)
                else:
                    ok, failed, rejected, _ = _nbagent(url, n, limiter)
                span = time.perf_counter() - t0
                if limiter is True:
                    actor_us.append(float(_limiter_stats(ray, url)["us_per_request"]))
            print(f"  {name}: {span:.1f} s, {rejected} rejected, {failed} failed", flush=True)
            spans.append(span / ideal)
            rejects.append(rejected / max(1, ok))
            fails.append(failed)
        figures[name] = (median(spans), median(rejects))
        table.append([name, median(spans), median(rejects), int(max(fails))])
    rep.table(["client", "makespan/ideal", "rejected/success", "failed"], table)
    ours, per_process = figures[rows[0][0]], figures[rows[1][0]]
    rep.goals.append(Goal("actor row makespan / ideal", ours[0], 1.1))
    rep.goals.append(Goal("actor row rejected per success", ours[1], 0.1))
    rep.goals.append(
        Goal("actor rejections / per-process ones", ours[1] / max(per_process[1], 1e-9), 0.5)
    )
    with mock_process() as url:
        trips = round_trips(ray, url, 20 if short else 200)
    own = statistics.median(actor_us) if actor_us else float("nan")
    rep.lines.append("")
    rep.table(
        ["the limiter actor's cost", "us/request"],
        [
            ["its own time per request, during the runs above", own],
            *[
                [f"ask round trip seen by a caller, {k} slot(s) per call", v]
                for k, v in trips.items()
            ],
        ],
    )
    # The actor serves every request of the cluster, one after another: with C agents in
    # flight and replies of L seconds it is busy C * cost / L of the time (its own time per
    # request); a caller also waits one round trip per call, batched over the slots it asks.
    for latency in (1.0, 10.0):
        largest = int(0.05 * latency / (own * 1e-6))
        rep.lines.append(
            f"  largest batch in flight (agents at once) keeping the actor under 5 % busy, "
            f"replies of {latency:g} s: {largest:,}"
        )
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
