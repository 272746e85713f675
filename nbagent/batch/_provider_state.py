"""What a provider batch must remember across a dead kernel: the state file (`state=`).

The provider keeps working while nobody watches (a batch takes up to 24 hours), so what nbagent
needs to pick its work up again is on disk before anything is polled: the prompts and their
index, how each request was built (model, system prompt, `max_tokens`, options, the structured
answer's JSON Schema, mode and reasks allowed), the retry policy, the durable log's file, and
one record per batch (its tag, the items it holds as ranges of prompt positions, the submission
it is, the provider's id once the create answered, how far nbagent got with it, and for an item
reasked the failed answer and the errors its request carries after the prompt, and for an item
sent again what its attempts carry, the `AttemptState` that `decide` steps).
The custom ids are derived from those (`<the tag's random part>-<position>-<submission>`), so the
map from a result line back to its prompt is in the file without being written out item by item.

The file is JSON, replaced atomically (written beside, flushed, renamed over), so a kernel that
dies mid-write leaves the previous state whole, never half a file. The prompts are encoded once
and spliced into every write. A batch record goes through: planned → creating (the create call
may have reached the provider: a resume looks for the batch before creating it again) → running
→ ended → collected (its results are read and the retryable and reasked items are in a new
planned record, in the same write).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .._core._decision import AttemptState
from .._core._retry import RetryPolicy
from ..errors import ConfigError

KIND = "nbagent.provider-batch"
VERSION = 1
OUTPUT_VERSION = 2  # a state with a structured answer: an older nbagent would not check them


def new_tag() -> str:
    """A tag for one `map` call: `nb-<date>-<random>`, short enough for any provider's field."""
    return f"nb-{time.strftime('%Y%m%d')}-{secrets.token_hex(4)}"


def log_file(log: Any) -> str | None:
    """The durable log's file as the state keeps it (a connection cannot be kept: a resume
    then writes no log unless given one)."""
    if isinstance(log, (str, os.PathLike)) and str(log) not in ("", ":memory:"):
        return os.path.abspath(os.fspath(log))
    return None


def default_state_path(tag: str, log: Any = None) -> Path:
    """Next to the durable log when `log=` names a file, else in the working directory."""
    file = log_file(log)
    if file is not None:
        path = Path(file)
        return path.with_name(f"{path.stem}-{tag}.batch")
    return Path.cwd() / f"nbagent-{tag}.batch"


def policy_doc(policy: RetryPolicy) -> dict[str, Any]:
    """The retry policy as the state keeps it (`RetryPolicy(**doc)` on a resume)."""
    doc = {
        f.name: getattr(policy, f.name)
        for f in dataclasses.fields(policy)
        if f.init and not f.name.startswith("_")
    }
    if not isinstance(doc.get("jitter"), (str, int, float, type(None))):
        doc["jitter"] = "full"  # a Jitter object: the default strategy on a resume
    return doc


def index_to_json(index: pd.Index[Any] | None, n: int) -> Any:
    """The input's index as JSON (None for positions 0..n-1), to rebuild it on a resume."""
    if index is None or (isinstance(index, pd.RangeIndex) and index.equals(pd.RangeIndex(n))):
        return None
    kind = index.dtype.kind
    if kind == "M":
        values: list[Any] = [str(v) for v in index]
    else:  # numbers, strings, booleans as they are; anything else as its text
        values = [
            v if isinstance(v, (str, int, float, bool)) or v is None else str(v)
            for v in index.tolist()
        ]
    return {"values": values, "name": index.name, "datetime": kind == "M"}


def custom_id(run: str, position: int, submission: int) -> str:
    """The custom id (Anthropic, OpenAI) or key (Gemini) of a prompt in a submission of run
    `run` (its tag): `<run's random part>-<position>-<submission>`, so a line of another run's
    batch never passes for one of this run's."""
    return f"{run.rsplit('-', 1)[-1]}-{position}-{submission}"


def parse_custom_id(run: str, text: str) -> tuple[int, int] | None:
    """(position, submission) of a custom id of run `run`, else None."""
    prefix = run.rsplit("-", 1)[-1] + "-"
    if not text.startswith(prefix):
        return None
    head, sep, tail = text[len(prefix) :].partition("-")
    if not sep or not head.isdigit() or not tail.isdigit():
        return None
    return int(head), int(tail)


def ranges(positions: Sequence[int]) -> list[list[int]]:
    """Sorted positions as `[start, end)` runs: 100,000 consecutive prompts are one pair."""
    out: list[list[int]] = []
    for p in sorted(positions):
        if out and out[-1][1] == p:
            out[-1][1] = p + 1
        else:
            out.append([p, p + 1])
    return out


@dataclass
class BatchRecord:
    """One batch of one submission, as the state file keeps it."""

    n: int  # its number in this run (1, 2, ...)
    tag: str  # what the provider's batch carries (metadata, display name)
    submission: int  # 1 for the first send of its items, 2 for their first resubmission, ...
    items: list[list[int]]  # prompt positions, as ranges
    count: int
    step: str = "planned"  # planned | creating | running | canceling | ended | collected | failed
    id: str | None = None  # the provider's batch id, once known
    not_before: float = 0.0  # wall time before which it is not created (the backoff)
    create_began: float | None = None  # wall time of the first create call
    cancel_sent: bool = False
    error: str | None = None  # why it could not be created (kind: message)
    size: int | None = None  # bytes of its items, as planned (the create's content-length)
    # what an item's request carries after its prompt (a structured answer's reask), by position
    tails: dict[str, Any] = field(default_factory=dict)
    # what a resubmitted item's attempts carried into this record (`AttemptState`), by position
    attempts: dict[str, Any] = field(default_factory=dict)

    def attempt_state(self, pos: int) -> AttemptState:
        """The attempt state of the item at `pos` as this record sends it. A state file of an
        older nbagent kept none: it is derived from the submission and the item's tail."""
        kept = self.attempts.get(str(pos))
        if kept is not None:
            return AttemptState.from_json(kept).begin()
        tail = self.tails.get(str(pos))
        if tail and "since" in tail:  # the older file's count of reasks and their submission
            return AttemptState(
                self.submission - int(tail["since"]) + 1, reasks=int(tail["reasks"])
            )
        return AttemptState(self.submission)

    def positions(self) -> Iterator[int]:
        """Its prompt positions, from its ranges."""
        for start, end in self.items:
            yield from range(start, end)


_NOT_IN_HEAD = ("path", "prompts", "batches", "_prompts_json")
"""The fields the file's head does not hold as they are: where it is, the prompts (written
after the head, once), and the records (each as a dict)."""


def _as_is(value: Any) -> Any:
    return value


_READ: dict[str, Callable[[Any], Any]] = {
    "tag": str,
    "model": str,
    "provider": str,
    "request": dict,
    "retry": dict,
    "caps": lambda caps: [int(c) for c in caps],
}
"""How a state file's head fields are read back (a null or a wrong type: a damaged file)."""


@dataclass
class ProviderState:
    """The state of one provider batch run (see the module docstring)."""

    path: Path
    tag: str
    model: str
    provider: str
    base_url: str | None
    request: dict[str, Any]  # system, max_tokens, options
    retry: dict[str, Any]
    caps: list[int]
    prompts: list[str]
    index: Any  # the input's index as JSON (None: positions)
    output: dict[str, Any] | None = None  # the structured answer (`BatchOutput.to_json`)
    log: str | None = None  # the durable log's file (`log=`), where item attempts go
    batches: list[BatchRecord] = field(default_factory=list)
    _prompts_json: str | None = field(default=None, repr=False)

    @classmethod
    def begin(
        cls,
        path: str | os.PathLike[str] | None,
        *,
        log: Any,
        policy: RetryPolicy,
        prompts: list[str],
        index: pd.Index[Any] | None,
        **head: Any,
    ) -> ProviderState:
        """A new run's state, not yet written: its tag, its file (`path`, else beside `log=`'s
        file or in the working directory; a file that exists is refused: it is another run's),
        and the retry policy, the input's index and the log as the file keeps them."""
        tag = new_tag()
        where = Path(path) if path is not None else default_state_path(tag, log)
        if where.exists():
            raise ConfigError(
                f"the batch state file {where} exists already: resume that batch with "
                f"nbagent.batch.resume({str(where)!r}), or pass another state='...'."
            )
        return cls(
            path=where,
            tag=tag,
            retry=policy_doc(policy),
            prompts=prompts,
            index=index_to_json(index, len(prompts)),
            log=log_file(log),
            **head,
        )

    # -- batches ----------------------------------------------------------------------------

    def add(
        self,
        submission: int,
        positions: Sequence[int],
        *,
        not_before: float = 0.0,
        tails: Mapping[int, Any] | None = None,
        attempts: Mapping[int, AttemptState] | None = None,
    ) -> BatchRecord:
        n = len(self.batches) + 1
        record = BatchRecord(
            n,
            f"{self.tag}-b{n}",
            submission,
            ranges(positions),
            len(positions),
            not_before=not_before,
            tails={str(p): tails[p] for p in positions if tails.get(p)} if tails else {},
            attempts={str(p): attempts[p].to_json() for p in positions if p in attempts}
            if attempts
            else {},
        )
        self.batches.append(record)
        return record

    def input_index(self) -> pd.Index[Any] | None:
        """The input's index, rebuilt from the state (None: positions)."""
        doc = self.index
        if not isinstance(doc, dict):
            return None
        values = doc.get("values") or []
        if doc.get("datetime"):
            dates: pd.Index[Any] = pd.DatetimeIndex(pd.to_datetime(values), name=doc.get("name"))
            return dates
        out: pd.Index[Any] = pd.Index(values, name=doc.get("name"))
        return out

    def known_ids(self) -> frozenset[str]:
        return frozenset(b.id for b in self.batches if b.id)

    # -- the file ---------------------------------------------------------------------------

    def save(self) -> None:
        """Replace the file atomically: a reader (or a restarted kernel) sees the old state or
        the new one, never part of one."""
        if self._prompts_json is None:
            self._prompts_json = json.dumps(self.prompts, ensure_ascii=False)
        kept = [f.name for f in dataclasses.fields(self) if f.name not in _NOT_IN_HEAD]
        head = {
            "kind": KIND,
            "version": VERSION if self.output is None else OUTPUT_VERSION,
            **{name: getattr(self, name) for name in kept},
            "batches": [asdict(b) for b in self.batches],
        }
        # written in parts: the prompts (megabytes for a large batch) are not copied per save
        parts = (
            json.dumps(head, ensure_ascii=False)[:-1],
            ', "prompts": ',
            self._prompts_json,
            "}",
        )
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(parts)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ConfigError(
                f"cannot write the batch state file {self.path} ({exc.strerror or exc}): "
                "pass state='...' with a path in a folder you can write to."
            ) from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProviderState:
        """The state in `path`; `ConfigError` for a file that is missing or not one."""
        p = Path(path)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"no batch state file at {p}: pass the path the batch's first progress line "
                "named (state='...')."
            ) from None
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p} is not a readable batch state file ({exc}).") from None
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            raise ConfigError(f"{p} is not an nbagent provider batch state file.")
        if doc.get("version") not in (VERSION, OUTPUT_VERSION):
            raise ConfigError(
                f"{p} was written by another nbagent (state version {doc.get('version')!r}, "
                f"this one reads {VERSION} and {OUTPUT_VERSION}): resume it with that version."
            )
        head = {f.name for f in dataclasses.fields(cls)} - set(_NOT_IN_HEAD)  # as `save` wrote
        try:
            state = cls(
                path=p,
                prompts=[str(t) for t in doc["prompts"]],
                batches=[BatchRecord(**b) for b in doc["batches"]],
                **{name: _READ.get(name, _as_is)(doc[name]) for name in head if name in doc},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{p} is a damaged batch state file ({exc!r}).") from None
        return state
