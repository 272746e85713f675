"""Waiting for a paced slot: the turns this process's `RateLimiter` and the cluster's pacer
take alike between asking for a slot and sending (refuse a wait too long, announce and sleep
the rest, hand a slot back when its wait is refused or cancelled, drop one that came due too
late)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .._core._clock import Clock
from .._core._pacing import PaceRequest
from ..errors import RateLimited

LATE_S = 0.05
"""How late past its time a paced slot may still be spent: an event loop's jitter on a busy
machine. See `too_late`."""
LATE_NOTE = " (again: the last slot came due while this process was busy)"


def too_late(clock: Clock, slept_at: float, delay: float, interval: float | None) -> bool:
    """Whether a paced slot is too late to spend: the wait for it, begun at `slept_at` for
    `delay`, ended more than one interval (and `LATE_S`) past its time.

    Slots that fell due while the process was busy (its event loop blocked by other work, or
    the answer it waited for slow) would all leave at once when it wakes, a burst the
    provider's bucket may not hold: the limiter counted each as spent at its time, and a
    bucket that stayed full meanwhile kept no more than its capacity. So a late slot is
    dropped, not handed back (as spent, the bucket is never overdrawn), and a new one taken at
    the back of the queue. Only once per request: on a machine that is always slow, the second
    slot is spent however late, so requests still go out.

    An auto-advancing `VirtualClock` moves time by each sleep in turn, so a sleeper's time
    includes the others' sleeps: nothing there is late.
    """
    if interval is None or getattr(clock, "auto_advance", False):
        return False
    return clock.now() - slept_at - delay > max(LATE_S, interval)


async def sleep_for_slot(
    clock: Clock,
    ask: PaceRequest,
    delay: float,
    slot: bool,
    epoch: int,
    *,
    renewed: bool,
    who: str,
    release: Callable[[float, int], None],
) -> float | None:
    """One turn of a limiter's wait before a request (this process's `RateLimiter` and the
    cluster's pacer take the same turns): a wait that is too long is refused; the wait for a
    reserved slot, or everyone's wait after a 429, is announced and slept. A slot whose wait
    is refused or cancelled is handed back (`release(now, epoch)`).

    Args:
        clock: The clock to sleep on.
        ask: The run's deadline, the longest wait worth taking, and whom to tell of waits.
        delay: The wait the limiter answered, in seconds.
        slot: Whether a slot is reserved for the request at the end of it.
        epoch: The limiter's epoch the slot was reserved in.
        renewed: Whether a slot came due too late before and this is the one made again.
        who: Which limiter it is, for the refusal's message: "shared" (this process's) or
            "cluster-wide" (which the announced reason names too).
        release: Hands the slot back: `release(now, epoch)`, as `RateLimiter.release`.

    Returns:
        When the sleep began, on `clock`; None when nothing was slept (no slot, and a wait too
        short to announce: the request is held back while another probes the rate limit).

    Raises:
        RateLimited: The wait would pass the deadline or `ask.max_wait`.
    """
    refused = too_long(clock, delay, ask, who)
    if refused is not None:
        if slot:
            release(clock.now(), epoch)
        raise refused
    if not slot and delay <= 0.05:
        return None
    reason = (
        "pacing to the provider's learned rate" if slot else "the provider asked everyone to wait"
    )
    scope = "" if who == "shared" else f" ({who})"
    ask.on_wait(delay, reason + scope + (LATE_NOTE if renewed else ""))
    slept_at = clock.now()
    try:
        await clock.sleep(delay)
    except asyncio.CancelledError:
        if slot:
            release(clock.now(), epoch)
        raise
    return slept_at


def too_long(clock: Clock, delay: float, ask: PaceRequest, who: str) -> RateLimited | None:
    """The error for a pacing wait that will not be taken (it ends past the run's deadline, or
    is longer than a server may ask for), or None when the wait is fine."""
    past_deadline = ask.deadline is not None and clock.now() + delay > ask.deadline
    if not past_deadline and delay <= ask.max_wait:
        return None
    why = (
        "which ends past this run's wall-clock budget"
        if past_deadline
        else "because the provider asked everyone to wait that long"
    )
    return RateLimited(
        f"the {who} rate limiter asks to wait {delay:.3g} s before sending, {why}",
        provider=ask.provider,
        retry_after=delay,
    )
