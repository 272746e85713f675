"""Checking `Agent(...)` arguments and turning model specs into providers, before anything runs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from .._core._budget import Budget
from .._core._clock import Clock
from .._core._messages import Message
from .._core._numbers import is_number, is_whole
from .._core._pacing import Pacer
from ..errors import ConfigError
from ..events import Subscriber
from ..providers import HTTPProvider
from ..providers._base import Provider
from ..recording import Recorder
from ..recording._writer import recorder_for

ModelSpec = str | Provider
"""A model, as `Agent(model=...)` and `nbagent.map` take it: a model string such as "demo",
"anthropic:claude-sonnet-4-5", "openai:gpt-4o", "gemini:gemini-2.5-flash", "ollama:llama3.2"
or "replay:storm.nbrec" (resolved by `nbagent.providers.resolve_model`), or a `Provider`
object (a `ScriptedModel`, a provider built with its own endpoint, key or client)."""


_NONE = type(None)
_TAKES: dict[str, tuple[tuple[type, ...], str]] = {
    "budget": ((Budget, _NONE), "a Budget(...), e.g. Budget(max_cost_usd=0.50)"),
    "limiter": ((bool, Pacer), "True (shared), False (off) or a RateLimiter"),
    "cache": ((bool,), "True (use the provider's prompt cache) or False"),
    "system": ((str, _NONE), "the system prompt as a string"),
    "clock": ((Clock, _NONE), "a clock such as VirtualClock() or RealClock()"),
    "options": ((dict, _NONE), "a dict of request fields"),
}
"""The arguments of one kind: what each takes (None: the default), for the sentence naming it."""


def check_arguments(args: Mapping[str, Any]) -> tuple[list[Subscriber], list[Message]]:
    """Arguments of a wrong kind, caught before anything runs: one sentence each on what to
    change. (Out-of-range numbers are checked or normalised where they are used.) `args` is
    `Agent.__init__`'s `locals()`, taken before it assigns anything, so each argument is named
    once, in its signature. Returns the subscribers and the history as lists (either may have been a
    one-shot iterator)."""
    a = SimpleNamespace(**args)
    if not (is_whole(a.max_tokens) and a.max_tokens >= 1):
        raise ConfigError(f"max_tokens must be a positive whole number, not {a.max_tokens!r}")
    for name, (kinds, what) in _TAKES.items():
        if not isinstance(args[name], kinds):
            raise ConfigError(f"{name}= takes {what}, not {args[name]!r}")
    for name in ("max_length_resumes", "max_compactions_per_step"):
        value = args[name]
        if not is_number(value) or value != int(value):
            raise ConfigError(f"{name} must be a whole number such as 2, not {value!r}")
    window = a.context_window
    if window is not None and not (is_whole(window) and window >= 1):
        raise ConfigError(f"context_window must be a positive number of tokens, not {window!r}")
    threshold = a.compaction_threshold
    if not is_number(threshold) or not 0 < threshold <= 1:
        raise ConfigError(
            "compaction_threshold is a share of the window in (0, 1] such as 0.85, "
            f"not {threshold!r}"
        )
    if callable(a.subscribers) or isinstance(a.subscribers, (str, bytes)):
        raise ConfigError("subscribers= takes a list of callables, e.g. subscribers=[print]")
    subscribers = list(a.subscribers)
    for fn in subscribers:
        if not callable(fn):
            raise ConfigError(f"each subscriber must be a callable taking one event, not {fn!r}")
    history = a.history
    if not isinstance(history, (str, bytes, Message)):
        history = list(history)
    if not isinstance(history, list) or any(not isinstance(m, Message) for m in history):
        raise ConfigError(
            "history= takes a list of Message objects, e.g. "
            "[Message.user('hi'), Message.assistant('hello')] (Message.from_dict reads dicts)"
        )
    if a.compaction is not None and not callable(getattr(a.compaction, "compact", None)):
        raise ConfigError(
            "compaction= takes a strategy such as DefaultCompaction() or StubOldToolOutput(), "
            f"not {a.compaction!r}"
        )
    return subscribers, history


def model_specs(model: ModelSpec | Sequence[ModelSpec]) -> list[ModelSpec]:
    """`model=` as the chain's list of specs (ConfigError for an empty one)."""
    specs: list[ModelSpec] = (
        list(model) if isinstance(model, (list, tuple)) else [model]  # type: ignore[list-item]
    )
    if not specs:
        raise ConfigError("model= needs at least one model, e.g. model='demo'")
    return specs


def resolve_model_spec(spec: ModelSpec, *, api_key: str | None, base_url: str | None) -> Provider:
    if isinstance(spec, str):
        from ..providers._models import resolve_model

        return resolve_model(spec, api_key=api_key, base_url=base_url)
    if isinstance(spec, Provider):
        return spec
    raise ConfigError(
        f"model= takes a model string such as 'demo' or 'anthropic:claude-sonnet-4-5', "
        f"or a Provider, not {type(spec).__name__}"
    )


def check_output_retries(output_retries: Any) -> None:
    """`output_retries=` is a whole number of reasks, 0 or more."""
    if not (is_whole(output_retries) and output_retries >= 0):
        raise ConfigError(
            f"output_retries is how many reasks are allowed, a whole number such as 2, "
            f"not {output_retries!r}"
        )


def make_recorder(
    record: str | os.PathLike[str] | Recorder | None, providers: list[Provider]
) -> Recorder | None:
    """`record=` as a Recorder (a path opens one; ConfigError for anything else), set on each
    HTTP provider of the chain: every exchange is appended as it happens (nbagent.recording)."""
    recorder = None if record is None else recorder_for(record, "nbagent Agent(record=...)")
    for p in providers:
        if isinstance(p, HTTPProvider) and recorder is not None:
            p.recorder = recorder
    return recorder
