"""Argument checks built off the event loop, when a tool is made rather than when it is called.

Why: the first `import jsonschema` costs about a second where Jupyter is installed (its format
module imports `rfc3987_syntax`, which builds a grammar), and compiling a schema costs tens of
milliseconds more. Done at the first tool call, that time landed inside the tool's timed window
and blocked the event loop (a calculator with `timeout=0.5` showed a 1.3 s bar, and the widget
froze meanwhile). So every tool's `ArgumentCheck` is handed, as it is made, to one daemon thread
that imports jsonschema and compiles the checks in order; a call awaits its check (without
blocking the loop) only if it comes before the thread got to it, and the wait is never counted
as the tool's time.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from typing import Any

from ._schema import ArgumentCheck

__all__ = ["CheckBuilder", "PendingCheck", "builder"]


class PendingCheck:
    """One schema's check, being built (or built) by the builder thread."""

    __slots__ = ("_future", "schema")

    def __init__(self, schema: Any, future: Future[ArgumentCheck]) -> None:
        self.schema = schema
        self._future = future

    @property
    def ready(self) -> bool:
        return self._future.done()

    def result(self) -> ArgumentCheck:
        """The check, waiting for the builder if needed (for callers off the event loop)."""
        return self._future.result()

    async def wait(self) -> ArgumentCheck:
        """The check, awaited: the event loop goes on while the builder works."""
        if not self._future.done():
            await asyncio.wrap_future(self._future)
        return self._future.result()


class CheckBuilder:
    """A queue of schemas and one daemon thread compiling their checks, started on first use.

    A daemon thread, so an interpreter that exits while jsonschema is still importing does not
    wait for it; one thread, so the import happens once and schemas compile in the order given.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, Future[ArgumentCheck]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, schema: Any) -> PendingCheck:
        future: Future[ArgumentCheck] = Future()
        self._queue.put((schema, future))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="nbagent-argument-checks", daemon=True
                )
                self._thread.start()
        return PendingCheck(schema, future)

    def _work(self) -> None:
        while True:
            schema, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(ArgumentCheck(schema))
            except BaseException as exc:  # surfaced to whoever waits for the check
                future.set_exception(exc)


builder = CheckBuilder()
"""The process's one builder: every tool's check goes through it."""
