"""The bill before the batch: `map(..., dry_run=True)` sends nothing and says what it would cost
(`dry_run_estimate`, priced from the call's options).

Input tokens are estimated the way the agent estimates them before it sends (about four
characters a token, `_loop._estimate`), the schema of `output=` included wherever the request
carries it (the system prompt, the output tool, the provider's own field: providers bill it as
input), output tokens are bounded by `max_tokens` (the most each
answer may cost), and both are priced with genai-prices' bundled data, live and through the
provider's batch API (`_pricing.estimate_cost(batch=True)`). A model genai-prices does not know
has no price (NaN, never a guess); a provider without a batch API has no batch price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from .._core._budget import Usage
from .._core._messages import Message, TextBlock
from .._core._words import counted
from .._loop._args import resolve_model_spec
from .._loop._estimate import CHARS_PER_TOKEN, estimate_tokens
from .._loop._output_schema import OutputSchema
from ..errors import ConfigError
from ..providers._base import ToolSpec
from ..providers._models import batch_client
from ..providers._pricing import estimate_cost
from ._frames import prompts_of
from ._options import BatchOptions, positive_int
from ._provider_backend import one_model
from ._provider_output import BatchOutput

DRY_RUN_KEY = "dry-run-sends-nothing"
"""The stand-in key of a dry run without one: it prices, it never sends."""

_DTYPES = {
    "prompt": "string",
    "input_tokens": "Int64",
    "max_output_tokens": "Int64",
    "cost_live_usd": "float64",
    "cost_batch_usd": "float64",
}
ESTIMATE_COLUMNS = tuple(_DTYPES)
"""The columns of `BatchEstimate.rows`, one row per prompt."""


@dataclass
class BatchEstimate:
    """What a batch would cost, from `map(..., dry_run=True)`; nothing was sent.

    `rows` has one row per prompt (the input's index): `prompt`, `input_tokens` (estimated),
    `max_output_tokens` (the `max_tokens` bound), `cost_live_usd` and `cost_batch_usd` (the most
    it may cost, live and through the batch API; NaN where there is no price). The totals are
    the sums.

    Attributes:
        rows: One row per prompt, with the input's index (columns: `ESTIMATE_COLUMNS`).
        model: The model whose prices these are ("anthropic:claude-haiku-4-5").
        provider: Its provider ("anthropic").
        has_batch_api: Whether the provider has a batch API (without one there is no batch
            price: `cost_batch_usd` is NaN).
    """

    rows: pd.DataFrame
    model: str
    provider: str
    has_batch_api: bool

    @property
    def input_tokens(self) -> int:
        """The estimated input tokens of every prompt, together."""
        return int(self.rows["input_tokens"].sum())

    @property
    def max_output_tokens(self) -> int:
        """The most output tokens every answer together may take (`max_tokens` each)."""
        return int(self.rows["max_output_tokens"].sum())

    @property
    def cost_live_usd(self) -> float:
        """The most the batch may cost sent live (NaN when the model has no known price)."""
        return _total(self.rows["cost_live_usd"])

    @property
    def cost_batch_usd(self) -> float:
        """The most it may cost through the provider's batch API (NaN without one)."""
        return _total(self.rows["cost_batch_usd"])

    def summary(self) -> str:
        """One line: prompts, tokens, and the most it may cost live and through the batch API.

        Returns:
            "3 prompts to demo: about 42 input tokens, at most 12,288 output tokens; ...".
        """
        n = len(self.rows)
        live, batch = _money(self.cost_live_usd), _money(self.cost_batch_usd)
        via = f"{batch} through the batch API" if self.has_batch_api else "no batch API"
        return (
            f"{counted(n, 'prompt')} to {self.model}: about {self.input_tokens:,} input "
            f"tokens, at most {self.max_output_tokens:,} output tokens; at most {live} live, {via} "
            "(nothing was sent)"
        )

    def __repr__(self) -> str:
        return f"BatchEstimate: {self.summary()}\n{self.rows!r}"

    def _repr_html_(self) -> str:
        table = self.rows._repr_html_()  # type: ignore[operator]
        return f"<p><b>BatchEstimate</b>: {escape(self.summary())}</p>{table}"


def _total(column: pd.Series[Any]) -> float:
    values = column.to_numpy(dtype=float)
    return math.nan if bool(np.isnan(values).any()) else float(values.sum())


def _money(value: float) -> str:
    return "an unknown price" if math.isnan(value) else f"${value:,.4f}"


def dry_run_estimate(options: BatchOptions) -> BatchEstimate:
    """The `BatchEstimate` of a call with `dry_run=True` (see the module docstring): one
    request per prompt to the model (a chain's first, live); with `output=`, the system prompt
    and the tools a structured request carries, and the schema the provider's own field carries
    (native mode). Nothing is sent."""
    texts, index = prompts_of(options.prompts, options.column)
    kw = options.agent_kwargs
    max_tokens = positive_int("max_tokens", kw.get("max_tokens", 4096))
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
        batch_client(provider)  # raises when the provider has no batch API
        has_batch_api = True
    except ConfigError:
        if options.backend == "provider":
            raise
        has_batch_api = False
    system, extra_chars = options.system, 0
    tools: tuple[ToolSpec, ...] = ()
    if options.output is not None:  # what a structured request carries: the schema
        out = BatchOutput(
            OutputSchema.of(options.output),
            mode=kw.get("output_mode", "auto"),
            retries=kw.get("output_retries", 2),
            provider=provider,
        )
        system, tools, extra_chars = out.system(system), out.tools, out.extra_chars()
    name, wire_model = provider.name, provider.model
    tokens: list[int] = []
    live: list[float] = []
    batch: list[float] = []
    prices: dict[int, tuple[float, float]] = {}
    for text in texts:
        n = estimate_tokens((Message("user", (TextBlock(text),)),), system, tools)
        n += extra_chars // CHARS_PER_TOKEN
        tokens.append(n)
        if n not in prices:
            usage = Usage(input_tokens=n, output_tokens=max_tokens)
            a = estimate_cost(name, wire_model, usage)
            b = estimate_cost(name, wire_model, usage, batch=True) if has_batch_api else None
            prices[n] = (math.nan if a is None else a, math.nan if b is None else b)
        live.append(prices[n][0])
        batch.append(prices[n][1])
    values: tuple[Any, ...] = (texts, tokens, [max_tokens] * len(texts), live, batch)
    rows = pd.DataFrame(
        {c: pd.array(v, dtype=t) for (c, t), v in zip(_DTYPES.items(), values, strict=True)}
    )
    if index is not None:
        rows.index = index
    label = model if isinstance(model, str) else f"{name}:{wire_model}"
    return BatchEstimate(rows, label, name, has_batch_api)
