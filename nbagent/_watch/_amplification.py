"""Retry amplification: an outer layer's retries, told apart from new calls, and multiplied out.

An SDK retries inside one logical call (its own retry counter goes 0, 1, 2); a framework or a
wrapper on top retries by calling the SDK again, which starts a new logical call whose counter
is back at 0. The watcher cannot see the outer layer, but it sees what it sends: the same
request (method, path and the body's digest, the one recordings compute: a retry sends the same
snapshot) as a new logical call of the same client, while or shortly after
(`OUTER_RETRY_WINDOW_S`) a logical call with that request failed, no later call having
continued it, and with no other logical call with that request running. Whatever thread, task
or context it comes from (an outer layer may run each try in a task of its own, as
pydantic-ai's `agent.run` under tenacity does), such a logical call is the failed one's next
try: together they are one **intended call**, `call` the run id of its first logical call,
`layer_attempt` the outer layer's tries (1, 2, ...). A call that succeeded or failed long ago
is never continued, and one sent while a call with its request is still running (the same
prompt in a concurrent map) continues none: sending the same prompt again on purpose is a new
call.

When an intended call takes more HTTP requests than the retrying layer alone allows (the SDK's
`max_retries` + 1), the client's watcher warns once with `RetryAmplification`, with both
layers' shares of the requests so far.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pandas as pd

OUTER_RETRY_WINDOW_S = 120.0
"""How long after a failed logical call the same request still counts as an outer retry of it
(longer than any wait a retrying layer should take: nbagent's `max_retry_after` is 60 s)."""


class RetryAmplification(UserWarning):
    """Warned once per watched client when one intended call became more HTTP requests than
    its retrying layer alone allows: two layers (the SDK and a framework, or a wrapper of your
    own) both retry, and their retries multiply. It is warned when the outer layer's try that
    crossed the line ends, and says the requests so far with each layer's share (the SDK's
    requests in each try, the outer layer's tries); `w.amplification` keeps counting."""


@dataclass(frozen=True)
class Who:
    """Who retries inside each logical call, and how to make it the only layer that does:
    `label` is its name in the warning ("the SDK"), `allowed` the requests it alone makes at
    most for one call, `advice` the sentence after "Let one layer retry: "."""

    label: str
    allowed: int
    advice: str


@dataclass(eq=False)
class _Try:
    call: str
    layer: int
    key: tuple[str, str, str]
    requests: int = 0
    ended: float | None = None
    failed: bool = False


@dataclass
class _Intended:
    call: str
    model: str
    started: float
    tries: list[_Try] = field(default_factory=list)
    outcome: str = "running"

    @property
    def requests(self) -> int:
        return sum(t.requests for t in self.tries)


# The amplification frame's columns and their types (`Watcher.amplification`)
_FRAME_TYPES = {
    "call": "string",
    "model": "string",
    "logical_calls": "int64",
    "requests": "int64",
    "factor": "float64",
    "allowed": "int64",
    "outcome": "string",
}


class Amplification:
    """The intended calls of one watched client (see the module docstring); thread-safe."""

    def __init__(self, who: Who) -> None:
        self.who = who
        self.warned = False
        self._lock = threading.Lock()
        self._tries: dict[str, _Try] = {}
        self._calls: dict[str, _Intended] = {}
        self._waiting: dict[tuple[str, str, str], list[_Try]] = {}

    def begin(
        self, run_id: str, key: tuple[str, str, str], t: float, model: str = ""
    ) -> tuple[str, int]:
        """A new logical call `run_id` sends `key` at `t`: the next try of the failed call it
        continues, if any (see the module docstring), else a new intended call. Returns
        `(call, layer_attempt)`."""
        with self._lock:
            # the logical calls with this request that are running, or failed and continued by
            # no one yet, within the window
            same = [
                x
                for x in self._waiting.pop(key, [])
                if x.ended is None or t - x.ended <= OUTER_RETRY_WINDOW_S
            ]
            failed = [x for x in same if x.ended is not None]
            if failed and len(failed) == len(same):  # none of them running
                prev = max(failed, key=lambda x: x.ended or 0.0)
                same.remove(prev)
                mine = _Try(prev.call, prev.layer + 1, key)
            else:
                mine = _Try(run_id, 1, key)
                self._calls[run_id] = _Intended(run_id, model, t)
            self._waiting[key] = [*same, mine]
            self._tries[run_id] = mine
            self._calls[mine.call].tries.append(mine)
            return mine.call, mine.layer

    def request(self, run_id: str) -> None:
        """One more HTTP request of logical call `run_id`."""
        with self._lock:
            found = self._tries.get(run_id)
            if found is not None:
                found.requests += 1

    def ended(self, run_id: str, end_reason: str, t: float) -> str | None:
        """Logical call `run_id` ended (`end_reason` as in `RunFinished`). The first time an
        intended call has gone past what the retrying layer alone allows, returns the warning's
        sentence, for the caller to `warn` once its own bookkeeping is done."""
        with self._lock:
            mine = self._tries.get(run_id)
            if mine is None:
                return None
            mine.ended = t
            mine.failed = end_reason in ("error", "cancelled")
            waiting = self._waiting.get(mine.key, [])
            if not mine.failed and mine in waiting:  # a success is never continued
                waiting.remove(mine)
            intended = self._calls[mine.call]
            intended.outcome = (
                "cancelled" if end_reason == "cancelled" else "error" if mine.failed else "ok"
            )
            text = None
            if not self.warned and intended.requests > self.who.allowed and mine.layer > 1:
                self.warned = True
                text = self.sentence(intended)
        return text

    def sentence(self, intended: _Intended) -> str:
        """The warning's words for `intended`: the requests so far, and each layer's share (the
        retrying layer's requests in each try, the outer layer's tries)."""
        each = [t.requests for t in intended.tries]
        most = max(each)
        share = f"up to {most}" if min(each) != most else f"{most}"
        return (
            f"1 call has become {intended.requests} requests so far: {self.who.label}'s "
            f"{share} in each of {len(each)} tries by an outer layer (each further try adds up "
            f"to {self.who.allowed}; the watcher's amplification frame keeps counting). "
            f"Let one layer retry: {self.who.advice}"
        )

    def of(self, run_id: str) -> tuple[str, int] | None:
        """`(call, layer_attempt)` of logical call `run_id`."""
        found = self._tries.get(run_id)
        return None if found is None else (found.call, found.layer)

    def frame(self) -> pd.DataFrame:
        """One row per intended call, the most amplified first (see `Watcher.amplification`)."""
        with self._lock:
            rows: list[dict[str, Any]] = [
                {
                    "call": c.call,
                    "model": c.model,
                    "logical_calls": len(c.tries),
                    "requests": c.requests,
                    "factor": float(c.requests),
                    "allowed": self.who.allowed,
                    "outcome": c.outcome,
                }
                for c in self._calls.values()
                if c.requests
            ]
        df = pd.DataFrame(rows, columns=list(_FRAME_TYPES)).astype(_FRAME_TYPES)
        # worst first; among equals, in the order they were made
        worst: pd.DataFrame = df.sort_values("factor", ascending=False, kind="stable")
        out: pd.DataFrame = worst.reset_index(drop=True)
        return out


_OUR_MODULES = (
    "nbagent",
    "httpx",
    "httpx2",
    "httpcore",
    "anthropic",
    "openai",
    "google",
    "pydantic_ai",
    "tenacity",
    "asyncio",
    "anyio",
    "concurrent",
    "threading",
    "contextlib",
)


def warn(text: str) -> None:
    """Warn `text` as `RetryAmplification`, pointed at the first frame outside the libraries
    between the caller's code and the socket, and never swallowed by the warning registry of an
    earlier client's identical sentence (once per client is the watcher's own rule). Never
    raised into the watched client's call."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).partition(".")[0] not in _OUR_MODULES:
            break
        frame = frame.f_back
    # no caller's frame on this thread (a guarded client's worker thread): say whose it is
    filename, lineno, module = ("nbagent", 0, "nbagent")
    if frame is not None:
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        module = str(frame.f_globals.get("__name__", ""))
    # Nothing of the warning may reach the client's own call: raised here it would break it
    # (an SDK reads any exception of its transport as a connection error). That covers filters
    # that turn warnings into errors, and Python 3.12+'s source lookup for a caller without a
    # module loader (an IPython cell), which is why no module_globals are given. The frame and
    # the widget still tell the amplification.
    with contextlib.suppress(Exception):
        warnings.warn_explicit(
            RetryAmplification(text),
            RetryAmplification,
            filename,
            lineno,
            module=module,
            registry={},
        )
