"""The driver of a Ray batch: hands prompts to the worker actors and gathers their rows.

Only bookkeeping: Ray is reached through the actor handles and `ray.exceptions`, so tests
drive it with fakes.

- **one try, one process**: a try remembers the process that ran it: the worker's label when
  it was handed out, then the label of the process that reports on it (`drain`). Ray restarts
  a dead worker under the same handle with a new process; the lost try keeps the label of the
  process that died, not of the one that replaced it;
- **exactly once**: a prompt's row is taken from the first try that returns;
- **every wait has a bound**: each call to a worker waits a poll interval or a few seconds; a
  worker that answers none of them for `silent_s` is given up (its prompts run again
  elsewhere, as a dead worker's); a try whose agent has done nothing for `stall_s` (no event:
  no streamed text, no attempt, no tool finishing) is stopped and its row says what it waited
  for; prompts that no worker could take for `silent_s` end with a row that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .._loop._frame import frame_from_records, with_origin
from ..errors import Aborted
from ._frames import row_failed
from ._progress import BatchProgress, lane_state
from ._spec import BatchControl

MAX_TRIES = 3
"""A prompt whose worker died this many times gets a `WorkerLost` row instead of a fourth try."""
CANCEL_GRACE_S = 0.8
POLL_S = 0.1
DRAIN_WAIT_S = 2.0
"""A worker that does not answer a drain within this is taken as down until it answers a ping."""
WORKER_SILENT_S = 60.0
"""A worker that answers no call for this long is given up. Its drain does no I/O: a live
worker answers at once, a busy machine delays it by seconds; Ray restarts a dead one in seconds."""
STALL_S = 600.0
"""A try whose agent has done nothing for this long is stopped. Every step of a healthy agent
has a bound of at most a minute (a stream's idle timeout, the longest wait a server may ask
for, the longest backoff): ten times that is a stuck agent, however busy the machine."""


@dataclass
class Try:
    """One try of one prompt on one worker, in flight."""

    i: int
    attempt: int
    w: int
    ref: Any
    label: str


class Driver:
    """Hands prompts to workers and gathers rows; see the module docstring."""

    def __init__(
        self,
        ray: Any,
        texts: list[str],
        progress: BatchProgress,
        control: BatchControl,
        actors: list[Any],
        submit: Callable[[Any, int, int], Any],
        *,
        batch: str,
        labels: list[str] | None = None,
        silent_s: float = WORKER_SILENT_S,
        stall_s: float = STALL_S,
    ) -> None:
        self.ray, self.texts, self.progress, self.control = ray, texts, progress, control
        self.actors, self.submit, self.batch = actors, submit, batch
        self.silent_s, self.stall_s = silent_s, stall_s
        n = len(texts)
        self.rows: list[dict[str, Any] | None] = [None] * n
        self.parts: list[tuple[int, pd.DataFrame]] = []
        self.tries = [0] * n
        self.queue: deque[int] = deque(range(n))
        self.inflight: dict[asyncio.Future[Any], Try] = {}
        self.load = [0] * len(actors)
        self.labels = list(labels) if labels else [f"worker {w}" for w in range(len(actors))]
        self.down: set[int] = set()
        self.streamed: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
        self.lost = 0
        start = time.monotonic()
        self.heard = [start] * len(actors)  # when each worker last answered
        self.none_up_since: float | None = None
        self.busy: dict[tuple[int, int], tuple[float, str]] = {}  # last news of a try's agent
        self.pings: dict[int, asyncio.Future[Any]] = {}

    # -- handing out and taking back --------------------------------------------------------

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
            self.inflight[asyncio.ensure_future(ref)] = Try(
                i, self.tries[i], w, ref, self.labels[w]
            )
            self.load[w] += 1
            self.progress.set_lane(i, "running")

    def took(self, fut: asyncio.Future[Any]) -> None:
        t = self._drop(fut)
        try:
            row, frame = fut.result()
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError):
            self.worker_lost(t, "was lost mid-prompt (its process died)")
            return
        except Exception as err:  # the worker's own code failed: this prompt's row says so
            cause = getattr(err, "cause", None) or err
            row = row_failed(self.texts[t.i], cause)
            frame = None
        self.heard[t.w] = time.monotonic()
        self.streamed.pop((t.i, t.attempt), None)
        self.keep(t.i, row, frame)

    def _drop(self, fut: asyncio.Future[Any]) -> Try:
        t = self.inflight.pop(fut)
        self.load[t.w] -= 1
        self.busy.pop((t.i, t.attempt), None)
        return t

    def keep(self, i: int, row: dict[str, Any], frame: pd.DataFrame | None = None) -> None:
        if self.rows[i] is not None:
            return  # exactly once: the first try that returned
        self.rows[i] = row
        if frame is not None:  # its attempts (none: it made none, or they are kept already)
            self.parts.append((i, frame))
        self.progress.finish_row(i, row)

    def worker_lost(self, t: Try, what: str) -> None:
        """A try ended with its worker: its attempts are kept, marked with the process that
        ran them; the prompt runs again elsewhere, or fails after `MAX_TRIES`."""
        self.lost += 1
        self.down.add(t.w)
        note = f"worker {t.label} {what}"
        again = t.attempt < MAX_TRIES and not self.control.cancelled
        self.parts.append((t.i, self.lost_rows(t, note, again)))
        if again:
            self.queue.appendleft(t.i)
            self.progress.set_lane(t.i, "waiting")
            return
        err = WorkerLost(f"{note}; gave up after {t.attempt} tries")
        self.keep(t.i, row_failed(self.texts[t.i], err))

    def lost_rows(self, t: Try, note: str, again: bool) -> pd.DataFrame:
        """The attempts a lost try had made, kept and marked, and one row for the loss."""
        rows = self._streamed_rows(t)
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
        return _frame(t, rows)

    def _streamed_rows(self, t: Try) -> list[dict[str, Any]]:
        return [r for _, r in sorted(self.streamed.pop((t.i, t.attempt), {}).items())]

    def _given_up(self, t: Try, err: BaseException) -> None:
        """A try the driver stopped waiting for: the attempts it streamed are kept, and the
        prompt's row ends with `err`."""
        frame = _frame(t, self._streamed_rows(t))
        self.parts.append((t.i, frame))
        self.keep(t.i, row_failed(self.texts[t.i], err, frame))

    # -- what the workers say ---------------------------------------------------------------

    def apply(self, w: int, drained: Mapping[str, Any]) -> None:
        """A worker's drain: its agents' events (lanes, counters), ended attempt rows, each
        try's last news."""
        now = time.monotonic()
        self.heard[w] = now
        label = str(drained.get("worker") or self.labels[w])
        self.labels[w] = label
        ours = {(t.i, t.attempt): t for t in self.inflight.values() if t.w == w}
        busy = drained.get("busy", {})
        told = {(i, a) for i, a, _ in drained["events"]} | {(i, a) for i, a, _ in drained["rows"]}
        for key in (told | busy.keys()) & ours.keys():
            ours[key].label = label  # this process runs it
        for i, attempt, event in drained["events"]:
            self.progress.count(event)
            state = lane_state(event)
            if attempt == self.tries[i] and state is not None:  # an earlier try's: not its lane
                self.progress.set_lane(i, state)
        for (i, attempt, idx), row in drained["rows"].items():
            self.streamed.setdefault((i, attempt), {})[idx] = row
        for key, (quiet_s, what) in busy.items():
            if key in ours:
                self.busy[key] = (now - float(quiet_s), str(what))
        self.progress.changed()

    async def poll(self) -> None:
        """Drain every worker that is up; ping those that are down (one ping at a time)."""
        up = [w for w in range(len(self.actors)) if w not in self.down]
        results = await gather([self.actors[w].drain.remote(self.batch) for w in up], DRAIN_WAIT_S)
        for w, res in zip(up, results, strict=True):
            if isinstance(res, BaseException):
                self.down.add(w)
            else:
                self.apply(w, res)
        for w in sorted(self.down):  # a restarted worker takes prompts again once it answers
            ping = self.pings.get(w)
            if ping is None:
                ping = self.pings[w] = asyncio.ensure_future(self.actors[w].ping.remote())
            await asyncio.wait({ping}, timeout=0.05)
            if not ping.done():
                continue
            del self.pings[w]
            if not ping.cancelled() and ping.exception() is None:
                self.heard[w] = time.monotonic()
                self.labels[w] = str(ping.result())
                self.down.discard(w)

    # -- bounds -----------------------------------------------------------------------------

    def watch(self) -> None:
        """Give up on what has waited past its bound (see the module docstring)."""
        now = time.monotonic()
        for fut, t in list(self.inflight.items()):
            if now - self.heard[t.w] > self.silent_s:
                self._stop(fut)
                what = f"stopped answering (no reply to the driver for {self.silent_s:g} s)"
                self.worker_lost(t, what)
            elif (t.i, t.attempt) in self.busy:
                since, what = self.busy[t.i, t.attempt]
                if now - since > self.stall_s:
                    self._stop(fut)
                    why = (
                        f"its agent on worker {t.label} did nothing for {self.stall_s:g} s while "
                        f"waiting for {what}; the batch stopped waiting for it"
                    )
                    self._given_up(t, Stalled(why))
        up = len(self.down) < len(self.actors)
        if up or not self.queue:
            self.none_up_since = None
            return
        if self.none_up_since is None:
            self.none_up_since = now
        elif now - self.none_up_since > self.silent_s:
            why = (
                f"no Ray worker answered for {self.silent_s:g} s (every worker of the batch "
                f"was lost or stopped answering); this prompt did not run"
            )
            while self.queue:
                i = self.queue.popleft()
                why_i = why + (" again" if self.tries[i] else "")
                self.keep(i, row_failed(self.texts[i], WorkerLost(why_i)))

    def _stop(self, fut: asyncio.Future[Any]) -> None:
        t = self.inflight[fut]
        with contextlib.suppress(Exception):
            self.ray.cancel(t.ref, force=False)
        fut.cancel()
        self._drop(fut)

    # -- the loop ---------------------------------------------------------------------------

    async def drive(self, per_worker: int, tick: Callable[[], Awaitable[None]] | None) -> None:
        """Run the batch to its end: every prompt has a row, or the batch was cancelled."""
        stop = asyncio.ensure_future(self.control.wait())
        next_poll = next_tick = 0.0
        try:
            while (self.queue or self.inflight) and not self.control.cancelled:
                self.fill(per_worker)
                waits: set[asyncio.Future[Any]] = {*self.inflight, stop}
                done, _ = await asyncio.wait(waits, timeout=POLL_S, return_when="FIRST_COMPLETED")
                for fut in done:
                    if fut is not stop and fut in self.inflight:
                        self.took(fut)
                now = time.monotonic()
                if now >= next_poll:
                    next_poll = now + POLL_S
                    await self.poll()
                if tick is not None and now >= next_tick:
                    next_tick = now + 5 * POLL_S
                    await tick()
                self.watch()
            if self.control.cancelled:
                await self.cancel()
        except asyncio.CancelledError:
            await self.cancel()
            raise
        finally:
            stop.cancel()
            for ping in self.pings.values():
                ping.cancel()

    async def cancel(self) -> None:
        """Stop every worker's agents; keep the rows that come back within the grace period."""
        self.queue.clear()
        await gather([a.cancel.remote(self.batch) for a in self.actors], CANCEL_GRACE_S)
        if self.inflight:
            done, _ = await asyncio.wait(set(self.inflight), timeout=CANCEL_GRACE_S)
            for fut in done:
                self.took(fut)
        await self.poll()
        for fut, t in list(self.inflight.items()):
            self._stop(fut)
            self._given_up(t, Aborted("the batch was cancelled while this prompt ran"))


class WorkerLost(Exception):
    """A prompt's worker process died on every try (or no worker answered)."""


class Stalled(Exception):
    """A prompt's agent did nothing for longer than any of its steps may take."""


def _frame(t: Try, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Attempt rows of a try as a frame, marked with the try and the process that ran it."""
    return with_origin(frame_from_records(rows), f"{t.i}.{t.attempt}", t.label)


async def gather(futs: list[Any], timeout: float) -> list[Any]:
    """Each result, or the exception it raised (a dead worker's drain raises), or a
    `TimeoutError` for one that did not answer within `timeout`."""
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
