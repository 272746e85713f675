"""The Ray backend of `map`: prompts spread over worker processes, one rate budget for all.

Ray does the scheduling (where the worker actors live, restarting a dead one); this module only
hands prompts out and gathers rows (the bookkeeping is `_ray_driver.Driver`):

- **workers**: one async actor per worker process (`BatchWorker`), kept between batches of this
  Ray session, each running up to its share of `concurrency` agents at once;
- **the limiter**: one named actor per provider, endpoint and key *fingerprint* (never the key),
  holding the cluster's `LimiterCore`; restarted by Ray if it dies (`max_restarts=-1`), its calls
  retried there, so workers wait meanwhile and send nothing;
- **a worker that dies mid-batch**: its prompts go to another worker (each prompt's row is taken
  from the first try that returns, so it appears exactly once); the attempts that try had made
  (streamed by `drain`) are kept, marked with the process that ran them, plus one `WorkerLost`
  row;
- **no hang**: a worker that stops answering is given up like a dead one, an agent stuck for
  far longer than any of its steps may take is stopped, each with a row saying what it waited
  for (see `_ray_driver`);
- **cancel**: every worker cancels its agents (each returns its row, marked cancelled, with its
  attempts); calls that do not return within a grace period are cancelled through Ray.

Without a running Ray, `ray.init()` starts a local one with this machine's CPUs; after the user's
own `ray.init(address=...)` the batch runs on that cluster.
"""

from __future__ import annotations

import functools
import hashlib
import math
import uuid
from typing import Any

import pandas as pd

from .._core._words import counted
from .._loop._limiter import limiter_key
from ..errors import ConfigError
from ._cluster_limiter import LimiterCore
from ._progress import BatchProgress
from ._ray_driver import Driver, gather
from ._ray_worker import BatchWorker, ClusterLimiter, LimiterChoice
from ._spec import AgentsOptions, AgentSpec, BatchControl

NAMESPACE = "nbagent"
CPUS_PER_WORKER = 1.0
"""What each worker actor asks Ray for: one worker per CPU of the cluster by default."""

_pool: dict[str, list[Any]] = {}


def ensure_ray() -> Any:
    """The `ray` module, connected: a running session is used, else a local one is started."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "backend='ray' needs Ray, which is not installed: pip install 'nbagent-loop[ray]'"
        ) from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    return ray


def limiter_name(key: tuple[str, ...]) -> str:
    """The limiter actor's name: a hash of provider, endpoint and the key's fingerprint."""
    return "nbagent-limiter-" + hashlib.sha256("|".join(key).encode()).hexdigest()[:16]


def _limiter_actor(ray: Any, key: tuple[str, ...]) -> ClusterLimiter:
    name = limiter_name(key)
    actor = (
        ray.remote(LimiterCore)
        .options(
            name=name,
            namespace=NAMESPACE,
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
        )
        .remote()
    )
    return ClusterLimiter(name, actor)


def session_key(ray: Any) -> str:
    """This Ray session's key in `_pool`: the cluster's address and this driver's job."""
    ctx = ray.get_runtime_context()
    return f"{ctx.gcs_address}/{ctx.get_job_id()}"


def _workers(ray: Any, n: int, cpus: float) -> list[Any]:
    """`n` live worker actors, reusing those of earlier batches in this Ray session."""
    session = session_key(ray)
    pool = _pool.setdefault(session, [])
    live = []
    pings = [actor.ping.remote() for actor in pool]
    for actor, ping in zip(pool, pings, strict=True):
        try:
            ray.get(ping, timeout=60)
        except ray.exceptions.GetTimeoutError:
            pass  # still starting on a busy cluster: it will answer
        except ray.exceptions.RayError:  # gone for good: replaced below
            continue
        live.append(actor)
    cls = ray.remote(BatchWorker).options(
        num_cpus=cpus, max_restarts=-1, max_task_retries=0, max_concurrency=10_000
    )
    while len(live) < n:
        live.append(cls.remote())
    # a process is in one Ray session at a time: earlier sessions' actors are gone with them
    _pool.clear()
    _pool[session] = live
    return live[:n]


def worker_count(ray: Any, workers: int | None, cpus: float, prompts: int) -> int:
    if workers is None:
        total = float(ray.cluster_resources().get("CPU", 1.0))
        workers = max(1, int(total // max(cpus, 1e-9)) if cpus else int(total))
    return max(1, min(workers, prompts))


def limiter_choice(ray: Any, spec: AgentSpec, key: tuple[str, ...]) -> LimiterChoice:
    """How the workers' agents are paced, from `limiter=`: the limiter actor (True, the
    default), each worker's own in-process limiter ("process"), none (False), or a Pacer."""
    value = spec.kwargs.pop("limiter", True)
    if value is True or value == "cluster":
        return _limiter_actor(ray, key)
    if value == "process":
        return True
    if isinstance(value, str):
        raise ConfigError(
            f"limiter= takes True (one limiter for the cluster), 'process', False or a Pacer, "
            f"not {value!r}"
        )
    return value  # type: ignore[no-any-return]


async def run_ray(
    texts: list[str],
    options: AgentsOptions,
    progress: BatchProgress,
    control: BatchControl,
) -> tuple[list[dict[str, Any] | None], list[tuple[int, pd.DataFrame]], str]:
    """Rows in prompt order (None: never started), attempt frames, and the limiter's
    description."""
    spec = options.spec
    ray = ensure_ray()
    first = spec.make(limiter=False)  # a bad model string or a missing key fails here
    key = limiter_key(first.providers[0])
    await first.aclose()
    choice = limiter_choice(ray, spec, key)
    limiter = choice.actor if isinstance(choice, ClusterLimiter) else None
    try:
        spec_ref = ray.put(spec)
    except Exception as err:
        raise ConfigError(
            f"map(backend='ray') sends the agents' arguments to the workers, and one of them "
            f"cannot be pickled ({type(err).__name__})"
        ) from None
    n = worker_count(ray, options.workers, CPUS_PER_WORKER, len(texts))
    actors = _workers(ray, n, CPUS_PER_WORKER)
    progress.backend, progress.workers = "ray", n
    batch = uuid.uuid4().hex[:12]

    def submit(actor: Any, i: int, attempt: int) -> Any:
        return actor.run.remote(batch, i, attempt, texts[i], [spec_ref], choice)

    # every worker once before the prompts: its label (the process that runs its tries), and
    # the batch's limiter met (a first call to an actor can take seconds on a busy machine)
    met = await gather([a.connect.remote(choice) for a in actors], 60.0)
    labels = [m if isinstance(m, str) else f"worker {w}" for w, m in enumerate(met)]
    d = Driver(ray, texts, progress, control, actors, submit, batch=batch, labels=labels)
    incarnations: set[str] = set()
    pace = None if limiter is None else functools.partial(_pace, limiter, progress, incarnations)
    try:
        await d.drive(max(1, math.ceil(options.concurrency / n)), pace)
    finally:
        for a in actors:  # not awaited: the rows are in; the workers tidy up on their own
            a.finish.remote(batch)
    described = await _describe(limiter, choice, n, d.lost, incarnations)
    return d.rows, d.parts, described


async def _pace(limiter: Any, progress: BatchProgress, incarnations: set[str]) -> None:
    (stats,) = await gather([limiter.stats.remote()], 1.0)
    if isinstance(stats, dict):
        progress.pace = {k: stats.get(k) for k in ("rate", "capacity", "blocked_s", "rejected")}
        incarnations.add(str(stats.get("incarnation")))


async def _describe(
    limiter: Any, choice: LimiterChoice, workers: int, lost: int, incarnations: set[str]
) -> str:
    where = counted(workers, "Ray worker")
    where += f", {counted(lost, 'prompt')} lost with a worker" if lost else ""
    if limiter is None:
        what = "off" if choice is False else "a Pacer"
        return f"{'one limiter per worker process' if choice is True else what} ({where})"
    (s,) = await gather([limiter.stats.remote()], 5.0)
    if not isinstance(s, dict):
        return f"cluster-wide limiter (unreachable) ({where})"
    incarnations.add(str(s.get("incarnation")))
    if len(incarnations) > 1:
        where += f", limiter restarted {len(incarnations) - 1}x"
    rate = f"{s['rate']:.2f}/s" if s.get("rate") else "unknown"
    cap = "unknown" if s.get("capacity") is None else f"{s['capacity']:g}"
    return (
        f"cluster-wide RateLimiter(rate={rate}, capacity={cap}, admitted={s['admitted']:g}, "
        f"rejected={s['rejected']:g}, budget={s['budget']:g}) in one Ray actor "
        f"({where}; {s['calls']} calls, {s['us_per_request']:.0f} µs of actor time per request)"
    )
