"""The batch backends behind one protocol: local agents, Ray agents, the provider's batch API.

`map`, `amap`, `start` and `resume` make a `Backend` once (`backend_for`: one table, keyed by
`backend=`) and then only ask it for its progress, its stop control, its first progress line
and its run. Each backend's own options are a dataclass: `AgentsOptions` (local and Ray: the
keywords that go to each `Agent`) and `ProviderOptions` (`backend="provider"`: the keywords of
one batch API request, checked by name against its fields).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Protocol

import pandas as pd

from .._loop._output_schema import OutputSchema
from ._frames import BatchResult, attempts_frame, rows_frame, rows_or_cancelled
from ._local import run_local
from ._options import BatchOptions
from ._progress import BatchProgress
from ._provider_backend import ProviderBatch
from ._spec import AgentsOptions, BatchControl


class Backend(Protocol):
    """What the batch front door asks of a backend."""

    progress: BatchProgress
    control: BatchControl

    def announce(self) -> None:
        """The first progress line, if the backend has one to say (where its state is)."""

    async def run(self) -> BatchResult:
        """Run every prompt to its row."""
        ...


class AgentsBackend:
    """One agent per prompt, in this process (`ray=False`) or over Ray's workers (made from a
    batch call's options: the keywords that go to each agent)."""

    def __init__(
        self,
        options: BatchOptions,
        texts: list[str],
        index: pd.Index[Any] | None,
        output: OutputSchema | None,
        *,
        ray: bool,
    ) -> None:
        if ray:
            from ._ray import ensure_ray

            ensure_ray()  # here, in the caller's thread: Ray starts from the main thread
        self.options = AgentsOptions.of(options, in_process=not ray)
        self.texts, self.index, self.output = texts, index, output
        self.ray, self.name = ray, "ray" if ray else "local"
        self.progress = BatchProgress(total=len(texts), backend=self.name)
        self.control = BatchControl()

    def announce(self) -> None:
        pass

    async def run(self) -> BatchResult:
        t0 = time.monotonic()
        if self.ray:
            from ._ray import run_ray as run_agents
        else:
            run_agents = run_local
        ran, parts, limiter = await run_agents(
            self.texts, self.options, self.progress, self.control
        )
        rows = rows_or_cancelled(ran, self.texts, self.progress)
        return BatchResult(
            results=rows_frame(rows, self.index, self.output),
            attempts=attempts_frame(parts),
            duration_s=time.monotonic() - t0,
            limiter=limiter,
            backend=self.name,
            cancelled=self.control.cancelled,
        )


_BACKENDS: dict[str, Callable[[BatchOptions, list[str], Any, OutputSchema | None], Backend]] = {
    "local": functools.partial(AgentsBackend, ray=False),
    "ray": functools.partial(AgentsBackend, ray=True),
    "provider": ProviderBatch.from_options,
}


def backend_for(
    options: BatchOptions, texts: list[str], index: Any, output: OutputSchema | None
) -> Backend:
    """The backend `options.backend` names, made (options checked, nothing sent)."""
    return _BACKENDS[options.backend](options, texts, index, output)
