"""What a batch was asked to do, in one place: the options of `map`, `amap` and `start`.

`map` spells its signature out (so an editor, `help()` and the reference show every option, as
httpx does for `Client`) and hands its call to `BatchOptions.of(locals())` as its first
statement; `amap` and `start` take the same options as `**options: Unpack[BatchKeywords]`,
bound through `map`'s signature (its defaults included) and shown with it by `help()`. An
option is added to `map`'s signature, to `BatchKeywords` and to `BatchOptions`, and checked
here; `of` refuses a call whose names are not exactly its fields, so the signature and this
class cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pandas as pd

from .._core._numbers import is_whole
from .._core._pacing import Pacer
from .._core._retry import RetryPolicy
from .._loop._agent_options import AgentFields
from .._loop._args import ModelSpec
from .._loop._output_step import refuse_mode_without_output
from ..errors import ConfigError
from ..providers._batch_wire import BatchCaps

BACKENDS = ("local", "ray", "provider")
Prompts: TypeAlias = "Iterable[str] | pd.Series[Any] | pd.DataFrame"
"""What a batch takes as its prompts: a list (or any iterable) of strings, a pandas Series, or a
DataFrame with the column named by `column=`. The results keep a Series' or DataFrame's index,
so `df.join(out.results)` lines them up."""


class BatchKeywords(AgentFields, total=False):
    """The keyword options of `map` / `amap` / `start` but `dry_run=` (see `map`): the batch's
    own, each `Agent`'s (`limiter=` also "process", for Ray), and `backend="provider"`'s."""

    concurrency: int
    column: str | None
    show: bool | None
    backend: str
    workers: int | None
    state: str | os.PathLike[str] | None
    output: Any
    limiter: Pacer | bool | str
    poll: tuple[float, float] | None
    batch_caps: tuple[int, int] | BatchCaps | None


@dataclass
class BatchOptions:
    """The options of one batch, checked (see the module docstring); `agent_kwargs` are the
    keywords that go to each `Agent` as they are."""

    prompts: Prompts
    model: ModelSpec | Sequence[ModelSpec]
    concurrency: int
    column: str | None
    tools: Iterable[Any]
    system: str | None
    retry: RetryPolicy | None
    show: bool | None
    backend: str
    workers: int | None
    state: str | os.PathLike[str] | None
    dry_run: bool
    output: Any = None
    agent_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, call: Mapping[str, Any]) -> BatchOptions:
        """The options of an entry point's call, from its `locals()` taken first thing."""
        names = {f.name for f in dataclasses.fields(cls)}
        if set(call) != names:  # a programming error of nbagent's, not the caller's
            raise TypeError(
                f"a batch entry point and BatchOptions disagree: {sorted(set(call) ^ names)}"
            )
        given = dict(call)
        return cls(**{**given, "agent_kwargs": dict(given["agent_kwargs"])})

    def __post_init__(self) -> None:
        positive_int("concurrency", self.concurrency)
        if self.backend not in BACKENDS:
            names = [repr(b) for b in BACKENDS]
            raise ConfigError(
                f"backend= takes {', '.join(names[:-1])} or {names[-1]}, not {self.backend!r}"
            )
        if self.workers is not None:
            positive_int("workers", self.workers)
        if self.workers is not None and self.backend != "ray":
            raise ConfigError("workers= is for backend='ray'; the local backend is one process")
        if self.state is not None and self.backend != "provider":
            raise ConfigError(
                "state= is for backend='provider' (a batch the provider runs, picked up again "
                "from its state file); the other backends finish in this process"
            )
        if self.state is not None and not isinstance(self.state, (str, os.PathLike)):
            raise ConfigError(
                f"state= takes a file path such as 'reviews.batch', not {self.state!r}"
            )
        refuse_mode_without_output(self.output, self.agent_kwargs.get("output_mode", "auto"))
        if not isinstance(self.dry_run, bool):
            raise ConfigError(f"dry_run= takes True or False, not {self.dry_run!r}")


def positive_int(name: str, value: Any) -> int:
    """`value` when it is a positive whole number, else a `ConfigError` naming `name`."""
    if not (is_whole(value) and value >= 1):
        raise ConfigError(f"{name} must be a positive whole number, not {value!r}")
    return value
