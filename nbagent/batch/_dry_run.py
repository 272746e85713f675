"""`dry_run=True`: the `BatchEstimate` of a batch call, priced from its options; nothing is sent."""

from __future__ import annotations

from .._loop._args import resolve_model_spec
from .._loop._output_schema import OutputSchema
from ..errors import ConfigError
from ..providers._base import ToolSpec
from ..providers._models import batch_client
from ._estimate import BatchEstimate, estimate
from ._frames import prompts_of
from ._options import BatchOptions
from ._provider_backend import one_model
from ._provider_output import BatchOutput

__all__ = ["DRY_RUN_KEY", "dry_run_estimate"]

DRY_RUN_KEY = "dry-run-sends-nothing"
"""The stand-in key of a dry run without one: it prices, it never sends."""


def dry_run_estimate(options: BatchOptions) -> BatchEstimate:
    """The `BatchEstimate` of a call with `dry_run=True`: nothing is sent."""
    texts, index = prompts_of(options.prompts, options.column)
    kw = options.agent_kwargs
    chain = options.model
    if options.backend != "provider" and isinstance(chain, (list, tuple)) and chain:
        chain = chain[0]  # the live price of the chain's first model
    model = one_model(chain)
    try:
        provider = resolve_model_spec(model, api_key=kw.get("api_key"), base_url=kw.get("base_url"))
    except ConfigError as err:
        if "no API key" not in str(err):
            raise
        # nothing is sent: a key is not needed to price the prompts
        provider = resolve_model_spec(model, api_key=DRY_RUN_KEY, base_url=kw.get("base_url"))
    try:
        batch_client(provider)
        has_batch = True
    except ConfigError:
        if options.backend == "provider":
            raise
        has_batch = False
    name = model if isinstance(model, str) else f"{provider.name}:{provider.model}"
    system, extra = options.system, 0
    tools: tuple[ToolSpec, ...] = ()
    if options.output is not None:  # what a structured request carries: the schema
        out = BatchOutput(
            OutputSchema.of(options.output),
            mode=kw.get("output_mode", "auto"),
            retries=kw.get("output_retries", 2),
            provider=provider,
        )
        system, tools, extra = out.system(system), out.tools, out.extra_chars()
    return estimate(
        texts,
        index,
        provider=provider,
        model=name,
        system=system,
        max_tokens=kw.get("max_tokens", 4096),
        has_batch_api=has_batch,
        tools=tools,
        extra_chars=extra,
    )
