"""`backend="provider"`: a batch through the provider's own batch API, at half the price.

    out = nbagent.map(df["review"], model="anthropic:claude-haiku-4-5", backend="provider",
                      state="reviews.batch")

The prompts go to Anthropic's Message Batches, OpenAI's or Azure's Batch API, or Gemini's batch
mode (`demo`: the mock server's Message Batches), and come back as the same `BatchResult` as the
other backends (`results` in prompt order with the input's index; `attempts` one row per item
per submission, with its `batch_id`). The run itself is `_provider_run`; this module checks
the options (before anything is sent), makes the state, and builds the result. A request is
one user message: tools, budgets and fallback chains belong to live agents and are refused
with a sentence; `output=` asks every item for a schema (`_provider_output`), and `log=` gets
every item attempt as the rows record it. `resume(state)` picks a run up from its state file,
in this process or another; `dry_run=True` is `_estimate.dry_run_estimate`, which sends nothing.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from .._core._clock import Clock
from .._core._retry import RetryPolicy
from .._loop._args import ModelSpec, resolve_model_spec
from .._loop._durable_log import DurableLog, default_worker
from .._loop._output_schema import OutputSchema
from ..errors import ConfigError
from ..providers._batch_client import BatchClient
from ..providers._batch_wire import BatchCaps
from ..providers._models import batch_client
from ._frames import BatchResult
from ._options import BatchOptions, positive_int
from ._provider_events import ItemEvents
from ._provider_items import DEFAULT_POLL
from ._provider_output import BatchOutput
from ._provider_run import ProviderRun
from ._provider_state import ProviderState


@dataclass(frozen=True)
class ProviderOptions:
    """The keywords `backend="provider"` takes besides the batch's own options, checked when
    made (`poll` when the run is made, `output_mode` and `output_retries` by `BatchOutput`, as
    a live agent's)."""

    api_key: str | None = None
    base_url: str | None = None
    max_tokens: int = 4096
    options: dict[str, Any] = field(default_factory=dict)
    clock: Any = None
    log: Any = None
    poll: Any = None
    batch_caps: Any = None
    output_mode: Any = "auto"
    output_retries: Any = 2

    @classmethod
    def of(cls, kwargs: dict[str, Any]) -> ProviderOptions:
        names = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise ConfigError(
                f"{unknown[0]}= is not an option of backend='provider' (it takes "
                f"{', '.join(names)}): leave it out, or use backend='local'."
            )
        return cls(**kwargs)

    def __post_init__(self) -> None:
        positive_int("max_tokens", self.max_tokens)
        if not isinstance(self.options or {}, dict):
            raise ConfigError("options= takes a dict of request fields, e.g. {'temperature': 0}")
        if self.clock is not None and not isinstance(self.clock, Clock):
            raise ConfigError("clock= takes a clock such as nbagent.VirtualClock()")

    def caps(self, client: BatchClient) -> BatchCaps:
        """`batch_caps=` checked, or the client's own."""
        value = self.batch_caps
        if value is None or isinstance(value, BatchCaps):
            return value or client.default_caps
        if not _positive_pair(value, int):
            raise ConfigError(
                "batch_caps= takes (requests, bytes) per batch, e.g. (1000, 10_000_000), "
                f"not {value!r}"
            )
        return BatchCaps(int(value[0]), int(value[1]))


def _positive_pair(value: Any, kind: type[int] | tuple[type[int], type[float]]) -> bool:
    """Whether `value` is two positive numbers of `kind` (a tuple or a list; no bools)."""
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, kind) and not isinstance(v, bool) and v > 0 for v in value)
    )


def _poll(value: Any) -> tuple[float, float]:
    if value is None:
        return DEFAULT_POLL
    if not _positive_pair(value, (int, float)):
        raise ConfigError(
            f"poll= takes (first, most) seconds between polls, e.g. poll=(5, 60), not {value!r}"
        )
    first, most = float(value[0]), float(value[1])
    return first, max(first, most)


def one_model(model: ModelSpec | Sequence[ModelSpec]) -> ModelSpec:
    """The one model of a provider batch (a fallback chain is a live agent's)."""
    if isinstance(model, (list, tuple)):
        if len(model) != 1:
            raise ConfigError(
                "backend='provider' sends every prompt to one model's batch API: pass one "
                "model, not a fallback chain."
            )
        first: ModelSpec = model[0]
        return first
    return model  # type: ignore[return-value]


class ProviderBatch(ProviderRun):
    """A provider batch: made with its options checked, client and state made, nothing sent;
    `run` drives it (`ProviderRun`) and builds its result."""

    @classmethod
    def from_options(
        cls,
        options: BatchOptions,
        texts: list[str],
        index: pd.Index[Any] | None,
        output: OutputSchema | None = None,
    ) -> ProviderBatch:
        """The batch of a `map`/`amap`/`start` call with `backend="provider"`: `texts` and
        `index` its prompts, `output` its `output=` as a schema, already checked."""
        spec = one_model(options.model)
        if list(options.tools or ()):
            raise ConfigError(
                "backend='provider' sends each prompt as one request, so the model cannot call "
                "tools: leave tools= out, or use backend='local'."
            )
        opts = ProviderOptions.of(options.agent_kwargs)
        if options.retry is not None and not isinstance(options.retry, RetryPolicy):
            raise ConfigError("retry= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=5)")
        provider = resolve_model_spec(spec, api_key=opts.api_key, base_url=opts.base_url)
        client = batch_client(provider)
        client.caps = opts.caps(client)
        structured = None
        if output is not None:  # each item's mode and the schema's dialect: checked now
            structured = BatchOutput(
                output, mode=opts.output_mode, retries=opts.output_retries, provider=provider
            )
        policy = options.retry or RetryPolicy()
        state = ProviderState.begin(
            options.state,
            log=opts.log,
            policy=policy,
            prompts=texts,
            index=index,
            model=spec.strip() if isinstance(spec, str) else f"{provider.name}:{provider.model}",
            provider=client.name,
            base_url=getattr(provider, "base_url", None),
            request={
                "system": options.system,
                "max_tokens": opts.max_tokens,
                "options": opts.options or {},
            },
            caps=[client.caps.max_requests, client.caps.max_bytes],
            output=structured.to_json() if structured is not None else None,
        )
        return cls(
            client,
            state,
            policy=policy,
            clock=opts.clock,
            poll=_poll(opts.poll),
            output=structured,
            log=opts.log,
        )

    @classmethod
    def from_state(
        cls,
        state: str | os.PathLike[str],
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        poll: tuple[float, float] | None = None,
        output: Any = None,
    ) -> ProviderBatch:
        """The batch of a `resume` call (its arguments, as `resume` describes them)."""
        loaded = ProviderState.load(state)
        base_url = base_url or loaded.base_url
        _refuse_a_gone_demo_server(loaded.provider, base_url, str(loaded.path))
        provider = resolve_model_spec(loaded.model, api_key=api_key, base_url=base_url)
        client = batch_client(provider, caps=BatchCaps(*loaded.caps))
        structured = None
        if loaded.output is not None:
            structured = BatchOutput.from_json(loaded.output, provider=provider, output=output)
        elif output is not None:
            raise ConfigError(
                f"the batch in {loaded.path} began without output=, so its answers are text: "
                "leave output= out of resume()"
            )
        return cls(
            client,
            loaded,
            policy=retry or RetryPolicy(**loaded.retry),
            clock=clock,
            poll=_poll(poll),
            output=structured,
            log=loaded.log,
        )

    def announce(self) -> None:
        """The first progress line: where the state is, and how to pick the batch up."""
        print(
            f"nbagent: {self.client.label} batch state in {self.state.path} "
            f"(after a restart: nbagent.batch.resume({str(self.state.path)!r}))",
            file=sys.stderr,
            flush=True,
        )

    async def run(self) -> BatchResult:
        t0 = time.monotonic()
        worker = default_worker()
        # the items' attempts go to the durable log as they are recorded, one agent id per
        # item (its run id), as each agent of the local backend writes its own
        durable = DurableLog(self.log, self.state.tag, worker=worker) if self.log else None
        out = self.output
        self.item_rows = items = ItemEvents(
            self.state.prompts,
            model=self.client.provider.model,
            max_attempts=self.policy.max_attempts,
            worker=worker,
            run_tag=self.state.tag,
            output=out.schema if out is not None else None,
        )
        if durable is not None:
            items.log.on_row = lambda _, row: durable.put(row["run_id"], row["attempt"] - 1, row)
        try:
            await self.run_records()
        finally:
            await self.client.provider.aclose()
            if durable is not None:
                durable.close()
        return BatchResult(
            results=items.results(self.state.input_index()),
            attempts=items.attempts(),
            duration_s=time.monotonic() - t0,
            limiter=f"{self.client.label} ({len(self.state.batches)} batches)",
            backend="provider",
            cancelled=self.control.cancelled,
            state_path=str(self.state.path),
        )


def _refuse_a_gone_demo_server(provider: str, url: str | None, state: str) -> None:
    """Raise a `ConfigError` when a demo batch's server is gone (nothing listens at `url`).

    The demo model's batches live in its loopback mock server, inside the process that began
    them. Resumed in a new process, the stored URL leads nowhere, and the client used to find
    out after its retries, with a `ConnectError`; one connect says so at once, and why.

    Args:
        provider: The provider the state names ("demo" is checked; the others are not).
        url: The server's base URL, as stored or given.
        state: The state file, for the sentence.

    Raises:
        ConfigError: The demo model's server at `url` no longer answers.
    """
    if provider != "demo" or not url:
        return
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 2.0):
            return
    except OSError:
        pass
    raise ConfigError(
        f"the demo batch in {state} cannot be resumed here: its batches lived in the demo "
        f"model's loopback server ({url}), which ran inside the process that began it and "
        "ended with it; run the map() again (a demo batch takes seconds)"
    )
