"""The Ray backend of `map`: prompts spread over worker processes, one rate budget for all.

Ray does the scheduling (where the worker actors live, restarting a dead one); this module only
hands prompts out and gathers rows:

- **workers**: one async actor per worker process (`BatchWorker`), kept between batches of this
  Ray session, each running up to its share of `concurrency` agents at once;
- **the limiter**: one named actor per provider, endpoint and key *fingerprint* (never the key),
  holding the cluster's `LimiterCore`; restarted by Ray if it dies (`max_restarts=-1`), its calls
  retried there, so workers wait meanwhile and send nothing;
- **a worker that dies mid-batch**: its prompts go to another worker (each prompt's row is taken
  from the first try that returns, so it appears exactly once); the attempts that try had made
  (streamed by `drain`) are kept, marked with the lost worker, plus one `WorkerLost` row;
- **cancel**: every worker cancels its agents (each returns its row, marked cancelled, with its
  attempts); calls that do not return within `CANCEL_GRACE_S` are cancelled through Ray.

Without a running Ray, `ray.init()` starts a local one with this machine's CPUs; after the user's
own `ray.init(address=...)` the batch runs on that cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import time
import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .._loop._frame import frame_from_records, with_origin
from .._loop._limiter import limiter_key
from ..errors import ConfigError
from ._cluster_limiter import AsyncLimiterCore
from ._frames import row_failed
from ._local import state_of
from ._progress import BatchProgress
from ._ray_worker import BatchWorker, LimiterChoice
from ._spec import AgentSpec, BatchControl, cancelled_row

__all__ = ["ensure_ray", "run_ray"]

NAMESPACE = "nbagent"
MAX_TRIES = 3
"""A prompt whose worker died this many times gets a `WorkerLost` row instead of a fourth try."""
CANCEL_GRACE_S = 0.8
POLL_S = 0.1
LIMITER_POLL_S = 0.5

_pool: dict[str, list[Any]] = {}


def ensure_ray() -> Any:
    """The `ray` module, connected: a running session is used, else a local one is started."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "backend='ray' needs Ray, which is not installed: pip install 'nbagent[ray]'"
        ) from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    return ray


class _LimiterActor(AsyncLimiterCore):
    """The cluster's limiter as a Ray actor (async: a held request's ask can wait for news)."""


def limiter_name(key: tuple[str, ...]) -> str:
    """The limiter actor's name: a hash of provider, endpoint and the key's fingerprint."""
    return "nbagent-limiter-" + hashlib.sha256("|".join(key).encode()).hexdigest()[:16]


def _limiter_actor(ray: Any, key: tuple[str, ...]) -> tuple[str, Any]:
    name = limiter_name(key)
    actor = (
        ray.remote(_LimiterActor)
        .options(
            name=name,
            namespace=NAMESPACE,
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
        )
        .remote(key[0])
    )
    return name, actor


def _workers(ray: Any, n: int, cpus: float) -> list[Any]:
    """`n` live worker actors, reusing those of earlier batches in this Ray session."""
    ctx = ray.get_runtime_context()
    session = f"{ctx.gcs_address}/{ctx.get_job_id()}"
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
    _pool[session] = live
    return live[:n]


def worker_count(ray: Any, workers: int | None, cpus: float, prompts: int) -> int:
    if workers is None:
        total = float(ray.cluster_resources().get("CPU", 1.0))
        workers = max(1, int(total // max(cpus, 1e-9)) if cpus else int(total))
    return max(1, min(workers, prompts))


def limiter_choice(ray: Any, spec: AgentSpec, key: tuple[str, ...]) -> tuple[LimiterChoice, Any]:
    """How the workers' agents are paced, from `limiter=`: the limiter actor (True, the
    default), each worker's own in-process limiter ("process"), none (False), or a Pacer."""
    value = spec.kwargs.pop("limiter", True)
    if value is True or value == "cluster":
        name, actor = _limiter_actor(ray, key)
        return ("cluster", (name, actor)), actor
    if value == "process":
        return ("process", None), None
    if value is False:
        return ("off", None), None
    if isinstance(value, str):
        raise ConfigError(
            f"limiter= takes True (one limiter for the cluster), 'process', False or a Pacer, "
            f"not {value!r}"
        )
    return ("pacer", value), None


class _Driver:
    """Hands prompts to workers and gathers rows; see the module docstring."""

    def __init__(
        self,
        ray: Any,
        texts: list[str],
        progress: BatchProgress,
        control: BatchControl,
        actors: list[Any],
        submit: Any,
    ) -> None:
        self.ray, self.texts, self.progress, self.control = ray, texts, progress, control
        self.actors = actors
        self.submit = submit
        n = len(texts)
        self.rows: list[dict[str, Any] | None] = [None] * n
        self.parts: list[tuple[int, pd.DataFrame]] = []
        self.tries = [0] * n
        self.queue: deque[int] = deque(range(n))
        self.inflight: dict[asyncio.Future[Any], tuple[int, int, int, Any]] = {}
        self.load = [0] * len(actors)
        self.labels = [f"worker {w}" for w in range(len(actors))]
        self.down: set[int] = set()
        self.streamed: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
        self.lost = 0

    def fill(self, per_worker: int) -> None:
        while self.queue:
            up = [w for w in range(len(self.actors)) if w not in self.down]
            free = [w for w in up if self.load[w] < per_worker]
            if not free:
                return
            w = min(free, key=lambda k: self.load[k])
            i = self.queue.popleft()
            self.tries[i] += 1
            ref = self.submit(self.actors[w], i, self.tries[i])
            self.inflight[asyncio.ensure_future(ref)] = (i, self.tries[i], w, ref)
            self.load[w] += 1
            self.progress.set_lane(i, "running")

    def took(self, fut: asyncio.Future[Any]) -> None:
        i, attempt, w, _ref = self.inflight.pop(fut)
        self.load[w] -= 1
        try:
            row, frame = fut.result()
        except self.ray.exceptions.RayActorError:
            self.worker_lost(i, attempt, w)
            return
        except self.ray.exceptions.WorkerCrashedError:
            self.worker_lost(i, attempt, w)
            return
        except Exception as err:  # the worker's own code failed: this prompt's row says so
            cause = getattr(err, "cause", None) or err
            row = row_failed(self.texts[i], _no_attempts(), cause, 0.0)
            frame = _no_attempts()
        self.streamed.pop((i, attempt), None)
        self.keep(i, row, frame)

    def keep(self, i: int, row: dict[str, Any], frame: pd.DataFrame) -> None:
        if self.rows[i] is not None:
            return  # exactly once: the first try that returned
        self.rows[i] = row
        self.parts.append((i, frame))
        self.progress.finish(i, state_of(row))

    def worker_lost(self, i: int, attempt: int, w: int) -> None:
        self.lost += 1
        self.down.add(w)
        label = self.labels[w]
        note = f"worker {label} was lost mid-prompt (its process died)"
        again = attempt < MAX_TRIES and not self.control.cancelled
        self.parts.append((i, self.lost_rows(i, attempt, label, note, again)))
        if again:
            self.queue.appendleft(i)
            self.progress.set_lane(i, "waiting")
            return
        err = _WorkerLost(f"{note}; gave up after {attempt} tries")
        self.keep(i, row_failed(self.texts[i], _no_attempts(), err, 0.0), _no_attempts())

    def lost_rows(self, i: int, attempt: int, label: str, note: str, again: bool) -> pd.DataFrame:
        """The attempts a lost try had made, kept and marked, and one row for the loss."""
        rows = [r for _, r in sorted(self.streamed.pop((i, attempt), {}).items())]
        for r in rows:
            r["message"] = f"{r['message']} · {note}" if r.get("message") else note
        run_id = rows[-1].get("run_id") if rows else None
        then = "the prompt runs again on another worker" if again else "the prompt failed"
        rows.append(
            {
                "run_id": run_id,
                "phase": "request",
                "outcome": "cancelled",
                "error_kind": "WorkerLost",
                "action": "retry" if again else "fail",
                "message": f"{note}; {then}",
            }
        )
        return with_origin(frame_from_records(rows), f"{i}.{attempt}", label)

    def apply(self, w: int, drained: Mapping[str, Any]) -> None:
        self.labels[w] = str(drained.get("worker") or self.labels[w])
        for i, attempt, state in drained["lanes"]:
            if attempt == self.tries[i] and state in ("running", "waiting"):
                self.progress.set_lane(i, state)
        counts = drained["counts"]
        if counts.get("retry"):
            self.progress.add_retry(float(counts.get("retry_s", 0.0)), int(counts["retry"]))
        if counts.get("paced"):
            self.progress.paced += int(counts["paced"])
            self.progress.paced_wait_s += float(counts.get("paced_s", 0.0))
        for (i, attempt, idx), row in drained["rows"].items():
            self.streamed.setdefault((i, attempt), {})[idx] = row
        self.progress.changed()


class _WorkerLost(Exception):
    """A prompt's worker process died on every try."""


_WorkerLost.__name__ = "WorkerLost"


def _no_attempts() -> pd.DataFrame:
    return with_origin(frame_from_records([]), "", "")


async def _gather(futs: list[Any], timeout: float) -> list[Any]:
    """Each result, or the exception it raised (a dead worker's drain raises)."""
    tasks = [asyncio.ensure_future(f) for f in futs]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    return [
        t.exception() or t.result() if t in done and not t.cancelled() else TimeoutError()
        for t in tasks
    ]


async def run_ray(
    texts: list[str],
    spec: AgentSpec,
    concurrency: int,
    progress: BatchProgress,
    control: BatchControl,
    *,
    workers: int | None = None,
    cpus_per_worker: float = 1.0,
) -> tuple[list[dict[str, Any]], list[tuple[int, pd.DataFrame]], str]:
    """Rows in prompt order, attempt frames, and the limiter's description."""
    ray = ensure_ray()
    first = spec.make(limiter=False)  # a bad model string or a missing key fails here
    key = limiter_key(first.providers[0])
    await first.aclose()
    choice, limiter = limiter_choice(ray, spec, key)
    try:
        spec_ref = ray.put(spec)
    except Exception as err:
        raise ConfigError(
            f"map(backend='ray') sends the agents' arguments to the workers, and one of them "
            f"cannot be pickled ({type(err).__name__})"
        ) from None
    n = worker_count(ray, workers, cpus_per_worker, len(texts))
    actors = _workers(ray, n, cpus_per_worker)
    progress.backend, progress.workers = "ray", n
    batch = uuid.uuid4().hex[:12]

    def submit(actor: Any, i: int, attempt: int) -> Any:
        return actor.run.remote(batch, i, attempt, texts[i], [spec_ref], choice)

    if choice[0] == "cluster":
        await _gather([a.connect.remote(choice) for a in actors], 60.0)
    d = _Driver(ray, texts, progress, control, actors, submit)
    per_worker = max(1, math.ceil(concurrency / n))
    stop = asyncio.ensure_future(control.wait())
    next_poll = next_pace = 0.0
    incarnations: set[str] = set()
    try:
        while (d.queue or d.inflight) and not control.cancelled:
            d.fill(per_worker)
            if not d.inflight and d.queue and not d.down:
                break
            waits: set[asyncio.Future[Any]] = {*d.inflight, stop}
            done, _ = await asyncio.wait(waits, timeout=POLL_S, return_when="FIRST_COMPLETED")
            for fut in done:
                if fut is not stop:
                    d.took(fut)
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + POLL_S
                await _poll(d, batch)
            if limiter is not None and now >= next_pace:
                next_pace = now + LIMITER_POLL_S
                await _pace(limiter, progress, incarnations)
        if control.cancelled:
            await _cancel(d, batch)
    except asyncio.CancelledError:
        await _cancel(d, batch)
        raise
    finally:
        stop.cancel()
        for a in actors:  # not awaited: the rows are in; the workers tidy up on their own
            a.finish.remote(batch)
    out = []
    for i, row in enumerate(d.rows):
        if row is None:
            row = cancelled_row(texts[i], "the batch was cancelled before this prompt started")
            progress.finish(i, "cancelled")
        out.append(row)
    described = await _describe(limiter, choice, n, d.lost, incarnations)
    return out, d.parts, described


async def _poll(d: _Driver, batch: str) -> None:
    up = [w for w in range(len(d.actors)) if w not in d.down]
    results = await _gather([d.actors[w].drain.remote(batch) for w in up], 2.0)
    for w, res in zip(up, results, strict=True):
        if isinstance(res, BaseException):
            d.down.add(w)
        else:
            d.apply(w, res)
    for w in sorted(d.down):  # a restarted worker takes prompts again once it answers
        (res,) = await _gather([d.actors[w].ping.remote()], 0.05)
        if isinstance(res, str):
            d.labels[w] = res
            d.down.discard(w)


async def _pace(limiter: Any, progress: BatchProgress, incarnations: set[str]) -> None:
    (stats,) = await _gather([limiter.stats.remote()], 1.0)
    if isinstance(stats, dict):
        progress.pace = {k: stats.get(k) for k in ("rate", "capacity", "blocked_s", "rejected")}
        incarnations.add(str(stats.get("incarnation")))


async def _cancel(d: _Driver, batch: str) -> None:
    """Stop every worker's agents; keep the rows that come back within the grace period."""
    d.queue.clear()
    await _gather([a.cancel.remote(batch) for a in d.actors], CANCEL_GRACE_S)
    if d.inflight:
        done, _ = await asyncio.wait(set(d.inflight), timeout=CANCEL_GRACE_S)
        for fut in done:
            d.took(fut)
    await _poll(d, batch)
    for fut, (i, attempt, w, ref) in list(d.inflight.items()):
        with contextlib.suppress(Exception):
            d.ray.cancel(ref, force=False)
        fut.cancel()
        d.inflight.pop(fut)
        rows = [r for _, r in sorted(d.streamed.pop((i, attempt), {}).items())]
        d.parts.append((i, with_origin(frame_from_records(rows), f"{i}.{attempt}", d.labels[w])))
        d.keep(
            i,
            cancelled_row(d.texts[i], "the batch was cancelled while this prompt ran"),
            _no_attempts(),
        )


async def _describe(
    limiter: Any, choice: LimiterChoice, workers: int, lost: int, incarnations: set[str]
) -> str:
    where = f"{workers} Ray workers" + (f", {lost} prompts lost with a worker" if lost else "")
    if limiter is None:
        what = {"process": "one limiter per worker process", "off": "off"}.get(choice[0], "a Pacer")
        return f"{what} ({where})"
    (s,) = await _gather([limiter.stats.remote()], 5.0)
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
