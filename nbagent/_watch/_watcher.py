"""`nbagent.watch` and `nbagent.watching`: the SDK's own retries, seen as nbagent sees its own.

A `Watcher` is another source of the agent's typed events (see `_calls`): the attempt log, the
live timeline (through the core's presenter seam, filled by the notebook layer), the durable log
(`log=`) and tracing (`nbagent.tracing.instrument()`, which hears every event bus) subscribe to
it as they subscribe to an agent. It reads and classifies; the SDK decides and retries.
"""

from __future__ import annotations

import functools
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from .._core._clock import Clock, RealClock
from .._core._presenter import LiveView, presenter
from .._loop._attempt_log import AttemptLog
from .._loop._durable_layout import LogTarget
from .._loop._durable_log import DurableLog
from ..errors import ConfigError
from ..events import Event, EventBus, RetryScheduled
from ..recording import Recorder
from ..recording._writer import recorder_for
from ._calls import CallLog
from ._clients import kind_of, wrap
from ._guarded import GuardCore, guarded_transport
from ._record import RecordingObserver
from ._sdk import GUARD, SdkRules, rules_for
from ._transport import ObserverFactory

C = TypeVar("C")

_WATCHERS: weakref.WeakKeyDictionary[Any, Watcher] = weakref.WeakKeyDictionary()


class Watcher:
    """What a watched client did, attempt by attempt (`attempts`), and the events it told.

    Made by `watch` / `watching`; `client` is the watched client. As a context manager
    (`with nbagent.watching(client) as w:`) it shows the live timeline under the cell for the
    duration of the block, in a notebook.

    Args:
        client: The SDK or httpx client to watch (see `watch` for the kinds).
        log: A durable attempt log (a SQLite path or connection), as `Agent(log=...)`.
        clock: The clock the attempts are timed on; None for real time.
        show: Whether a `with` block shows the live timeline: None where a notebook can.
        record: A path or a `Recorder`: every HTTP exchange is written to a recording.
        guard: The decision a guarded client's transport runs (`nbagent.guard` makes it); None
            for a watcher that only watches.

    Attributes:
        recorder: Where exchanges are recorded, or None.
        clock: The clock.
        name: The watcher's id in the attempt log's `agent_id` ("watch-…").
        events: The event bus the watched attempts are told on.
        observers: What else sees each exchange (the recorder's observer, say).

    Raises:
        ConfigError: `client` is not a kind nbagent can watch, or `record` or `log` cannot
            be used.
    """

    def __init__(
        self,
        client: Any,
        *,
        log: LogTarget | None = None,
        clock: Clock | None = None,
        show: bool | None = None,
        record: str | Path | Recorder | None = None,
        guard: GuardCore | None = None,
    ) -> None:
        kind = kind_of(client)  # a clear ConfigError before anything is built
        # a recording that cannot be opened (not a recording, a newer format) is refused first
        self.recorder = None if record is None else recorder_for(record, "nbagent.watch")
        self.clock: Clock = clock or RealClock()
        self.name = f"watch-{uuid.uuid4().hex[:8]}"
        self.events = EventBus()
        self._durable = DurableLog(log, self.name) if log is not None else None
        self._log = AttemptLog(on_row=self._durable)
        self.events.subscribe(self._log)
        self.observers: list[ObserverFactory] = []
        self._show = show
        self._view: LiveView | None = None
        self._unsubscribe: Callable[[], None] | None = None
        outer = None if guard is None else functools.partial(guarded_transport, core=guard)
        self.client: Any = wrap(client, self.observers, self.clock.now, outer)
        self.rules = rules_for(kind, client)
        if guard is not None:  # nbagent retries, not the SDK
            self.rules = SdkRules(GUARD, "none", guard.policy.max_attempts - 1)
        self._calls = CallLog(
            self.events,
            self.rules,
            name=self.name,
            now=self.clock.now,
            after_wait=self._waited,
        )
        if guard is not None:
            guard.calls = self._calls
        self.observers.append(self._calls)
        if self.recorder is not None:
            self.observers.append(RecordingObserver(self.recorder))
        _WATCHERS[self.client] = self  # every kind of client takes a weak reference

    def __repr__(self) -> str:
        return f"Watcher({self.rules.label}, {len(self._log)} attempts)"

    # -- the attempt log ------------------------------------------------------------------

    @property
    def attempts(self) -> pd.DataFrame:
        """One row per HTTP attempt, with the columns of `agent.attempts` and `nbagent_action`.

        `action` is what the SDK did (retry or fail), `delay_s` the wait it took before its next
        attempt (measured), `policy_delay_s` its own backoff where no server asked for a wait,
        and `nbagent_action` what nbagent's `classify` and the default `RetryPolicy` would have
        done with the same failure ("none" for a success). For a guarded client
        (`nbagent.guard`) `action` is nbagent's own decision. `call` is the intended call the
        row belongs to and `layer_attempt` the outer layer's try it was sent in (see
        `amplification`), beside the SDK's own `attempt`."""
        df = self._log.frame()
        keys = list(zip(df["run_id"].tolist(), df["attempt"].tolist(), strict=True))
        actions = self._calls.nbagent_actions
        df["nbagent_action"] = pd.array([actions.get(k) for k in keys], dtype="string")
        layers = [self._calls.amplification.of(r) for r in df["run_id"].tolist()]
        df["call"] = pd.array([x[0] if x else None for x in layers], dtype="string")
        df["layer_attempt"] = pd.array([x[1] if x else None for x in layers], dtype="Int64")
        return df

    @property
    def amplification(self) -> pd.DataFrame:
        """One row per intended call, the most amplified first.

        An intended call is one logical call and the outer layer's retries of it (the same
        request sent again as a new call, from any thread or task, while or shortly after it
        failed and while no other call with it runs; see `nbagent.RetryAmplification`).
        Columns: `call` (the run id of its first logical call, as in `attempts["call"]`),
        `model`, `logical_calls` (the outer layer's tries), `requests` (HTTP requests in all),
        `factor` (requests per intended call), `allowed` (the requests the retrying layer
        alone makes at most: the SDK's `max_retries` + 1, or a guard's `max_attempts`) and
        `outcome` (ok, error, cancelled, running)."""
        return self._calls.amplification.frame()

    def _waited(self, key: tuple[str, int], waited: float) -> None:
        self._log.update(*key, delay_s=waited)  # the SDK's wait, as measured

    # -- showing and closing ----------------------------------------------------------------

    def show(self) -> None:
        """Show the live timeline of this client's calls under the current cell."""
        self._hide()
        view = presenter().open(None)

        def to_view(event: Event) -> None:
            view(event)
            if isinstance(event, RetryScheduled):  # the SDK sleeps now: show it
                view.close()

        self._view = view
        self._unsubscribe = self.events.subscribe(to_view)

    def close(self) -> None:
        """End the calls still waiting for a retry, commit the durable log, stop showing."""
        self._stop_showing()
        if self._durable is not None:
            self._durable.close()

    def _stop_showing(self) -> None:
        self._calls.settle()
        self._hide()

    def _hide(self) -> None:
        """Close the live timeline (if one is shown) and stop feeding it."""
        if self._view is not None:
            self._view.close()
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._view, self._unsubscribe = None, None

    def __enter__(self) -> Watcher:
        show = presenter().active() if self._show is None else self._show
        if show:
            self.show()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_showing()
        if self._durable is not None:
            self._durable.flush()


def _watcher_of(client: Any) -> Watcher | None:
    try:
        return _WATCHERS.get(client)
    except TypeError:  # no client at all: `Watcher` says what it takes
        return None


def watch(
    client: C,
    *,
    log: LogTarget | None = None,
    show: bool = False,
    record: str | Path | Recorder | None = None,
) -> C:
    """The same client, watched: every HTTP attempt it makes is recorded, nothing else changes.

    `client` is an `anthropic.Anthropic` / `AsyncAnthropic`, an `openai.OpenAI` / `AsyncOpenAI`
    / `AzureOpenAI` / `AsyncAzureOpenAI`, a `google.genai.Client`, or an httpx (or httpx2)
    `Client` / `AsyncClient`. The copy gives the same responses, streams, retries and exceptions;
    `nbagent.watching(copy)` gives its `Watcher` (`.attempts`, the live timeline). `log=` writes
    the attempts to a durable log as `Agent(log=...)` does; `show=True` shows the live timeline
    under the current cell at once. `record="calls.nbrec"` (a path, or a
    `nbagent.recording.Recorder`) also writes every HTTP exchange, chunk by chunk with its timing,
    to a recording that `MockServer(replay=...)` serves again offline; no key or auth header is
    written.

    Args:
        client: The client to watch; it is not changed.
        log: A durable attempt log (a SQLite path or connection).
        show: Whether to show the live timeline under the current cell now.
        record: A path or a `Recorder` to write every exchange to.

    Returns:
        A watched copy of the same type, to use in place of `client`.

    Raises:
        ConfigError: `client` is not a kind nbagent can watch, or `record` or `log` cannot
            be used.
    """
    w = Watcher(client, log=log, show=show, record=record)
    if show:
        w.show()
    watched: C = w.client
    return watched


def watching(
    client: Any,
    *,
    log: LogTarget | None = None,
    show: bool | None = None,
    record: str | Path | Recorder | None = None,
) -> Watcher:
    """The `Watcher` of a watched client (from `watch`), or of a new watched copy of `client`
    (`w.client`). `with nbagent.watching(client) as w:` shows the live timeline under the cell
    while the block runs (in a notebook; `show=False` never, `show=True` always). `record=`
    writes a new copy's exchanges to a recording, as `watch(client, record=...)` does.

    Args:
        client: A watched copy (from `watch`), or a client to make one of.
        log: A durable attempt log, for a new copy.
        show: Whether a `with` block shows the live timeline: None where a notebook can,
            False never, True always.
        record: A path or a `Recorder`, for a new copy.

    Returns:
        The watcher: `.attempts` (one row per HTTP attempt), `.client`, the live timeline.

    Raises:
        ConfigError: `record=` for a client already watched (give it to `watch` instead), or
            `client` is not a kind nbagent can watch.
    """
    w = _watcher_of(client)
    if w is None:
        return Watcher(client, log=log, show=show, record=record)
    if record is not None:
        raise ConfigError(
            "this client is watched already: give record= to nbagent.watch(client, record=...) "
            "when you make the watched copy"
        )
    if show is not None:
        w._show = show
    return w
