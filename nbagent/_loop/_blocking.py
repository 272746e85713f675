"""Running a coroutine to completion from synchronous code, inside a notebook or not.

A notebook cell already runs inside the kernel's event loop, where `asyncio.run` refuses to
start. Rather than patching the loop (nest_asyncio's approach, which on ipykernel 7 has been seen
to drop the next queued cell), the coroutine runs on a worker thread with a loop of its own while
the calling thread waits. An interrupt (the kernel's Stop, Ctrl-C) cancels the run there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..errors import Aborted

T = TypeVar("T")


def loop_running() -> bool:
    """Whether this thread runs an event loop now (a notebook cell's, for one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(
    make: Callable[[], Coroutine[Any, Any, T]], *, stop: Callable[[], None] | None = None
) -> T:
    """Run `make()` to completion and return its result; cancellation surfaces as `Aborted`.

    With `stop` (a batch's own stop, which ends it with what finished), the run always goes to
    a worker thread, and an interrupt calls `stop` instead of cancelling: what `make()` then
    returns is the result."""
    if stop is None and not loop_running():
        try:
            return asyncio.run(make())
        except asyncio.CancelledError:
            raise Aborted("the run was cancelled") from None
        except KeyboardInterrupt:
            raise Aborted("the run was interrupted") from None

    loop_box: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> T:
        loop_box["loop"] = asyncio.get_running_loop()
        loop_box["task"] = asyncio.current_task()
        ready.set()
        return await make()

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nbagent-run") as pool:
        future = pool.submit(asyncio.run, main())
        try:
            return future.result()
        except KeyboardInterrupt:
            if stop is not None:
                stop()
                return future.result()
            ready.wait(5)
            loop, task = loop_box.get("loop"), loop_box.get("task")
            if loop is not None and task is not None:
                loop.call_soon_threadsafe(task.cancel)
            with contextlib.suppress(BaseException):
                future.result(timeout=10)
            raise Aborted("the run was interrupted") from None
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            raise Aborted("the run was cancelled") from None
