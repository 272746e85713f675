"""Argument checks built off the event loop, when a tool is made rather than when it is called.

Why: the first `import jsonschema` costs about a second where Jupyter is installed (its format
module imports `rfc3987_syntax`, which builds a grammar), and compiling a schema costs tens of
milliseconds more. Done at the first tool call, that time landed inside the tool's timed window
and blocked the event loop (a calculator with `timeout=0.5` showed a 1.3 s bar, and the widget
froze meanwhile). So every tool's `ArgumentCheck` is handed, as an agent takes the tool (or a
source lists it), to one daemon thread
that imports jsonschema and compiles the checks in order; a call awaits its check (without
blocking the loop) only if it comes before the thread got to it, and the wait is never counted
as the tool's time.

Most of that second is a grammar nbagent never uses: jsonschema's format module imports
`rfc3987_syntax` for its "iri" format checks, and that module builds an Earley parser as it
loads. nbagent validates without a format checker, so the builder imports jsonschema with that
module deferred (`import_jsonschema`): jsonschema sees a stand-in whose `is_valid_syntax`
imports the real module on its first call, so an "iri" check anyone makes later in the process
works exactly as before, only the grammar is built when (if ever) it is first needed. That
makes the import about a fifth of what it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import queue
import sys
import threading
import types
from concurrent.futures import Future
from typing import Any

from ._schema import ArgumentCheck

_DEFERRED = "rfc3987_syntax"
_LOCK = threading.Lock()


def import_jsonschema() -> None:
    """`import jsonschema`, with `rfc3987_syntax` (a grammar built at import) deferred to the
    first "iri" format check: see the module docstring. Once imported, this costs nothing."""
    with _LOCK:  # a second caller waits for the first, never sees a half-imported module
        if (
            "jsonschema" in sys.modules
            or _DEFERRED in sys.modules
            or importlib.util.find_spec(_DEFERRED) is None
        ):
            import jsonschema  # noqa: F401 (waits for an import another thread began)
        else:
            _import_deferring()


def _import_deferring() -> None:
    stand_in = types.ModuleType(_DEFERRED)

    def is_valid_syntax(term: str, value: str) -> Any:
        if sys.modules.get(_DEFERRED) is stand_in:
            sys.modules.pop(_DEFERRED, None)
        return importlib.import_module(_DEFERRED).is_valid_syntax(term, value)

    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[_DEFERRED] = stand_in
    try:
        import jsonschema  # noqa: F401
    finally:
        if sys.modules.get(_DEFERRED) is stand_in:
            del sys.modules[_DEFERRED]


class PendingCheck:
    """One schema's check, being built (or built) by the builder thread."""

    __slots__ = ("_future", "schema")

    def __init__(self, schema: Any, future: Future[ArgumentCheck]) -> None:
        self.schema = schema
        self._future = future

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
        # a failure here shows again, and is reported, where ArgumentCheck imports it
        with contextlib.suppress(Exception):
            import_jsonschema()
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
