"""An in-memory Message Batches server for the provider backend's tests, in virtual time.

`FakeBatchServer` keeps batches like Anthropic's (the field names and result lines of
anthropic-sdk-python `types/messages/`), answers each item by a script (`outcome(position,
submission)`), ends a batch `duration` seconds after its creation on the test's clock, and can
lose a create's answer, expire a batch part way, answer results out of order. `FakeBatches` is
the real `AnthropicBatches` with only its HTTP calls replaced, so the real parsing of result
lines and the real reading of each answer run.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from nbagent._core._clock import Clock
from nbagent.errors import RateLimited, TransportError
from nbagent.providers import AnthropicProvider
from nbagent.providers._anthropic_batch import AnthropicBatches
from nbagent.providers._batch_client import Items
from nbagent.providers._batch_wire import BatchCaps, BatchStatus, ItemResult

Outcome = Callable[[int, int], str]


def message(
    text: str, *, stop: str = "end_turn", tokens: tuple[int, int] = (12, 5)
) -> dict[str, Any]:
    """A Messages `message` as the API reference shows it."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }


def line_for(cid: str, kind: str, prompt: str) -> dict[str, Any]:
    """One results line for an outcome word."""
    if kind == "ok":
        return {
            "custom_id": cid,
            "result": {"type": "succeeded", "message": message(f"re: {prompt}")},
        }
    if kind == "refusal":
        msg = message("", stop="refusal")
        msg["content"] = []
        return {"custom_id": cid, "result": {"type": "succeeded", "message": msg}}
    errors = {
        "invalid": ("invalid_request_error", "max_tokens: Field required"),
        "credit": ("invalid_request_error", "Your credit balance is too low to access the API."),
        "overloaded": ("overloaded_error", "Overloaded"),
        "api_error": ("api_error", "Internal server error"),
    }
    if kind in errors:
        etype, text = errors[kind]
        err = {"type": "error", "error": {"type": etype, "message": text}}
        return {"custom_id": cid, "result": {"type": "errored", "error": err}}
    return {"custom_id": cid, "result": {"type": kind}}  # canceled, expired


@dataclass
class FakeBatch:
    id: str
    items: list[dict[str, Any]]
    created: float
    created_wall: float
    status: str = "in_progress"
    cancelled_at: float | None = None


@dataclass
class FakeBatchServer:
    clock: Clock
    outcome: Outcome = lambda pos, sub: "ok"
    duration: float = 30.0
    create_faults: list[str] = field(default_factory=list)  # "429", "lost" per create call
    expire_after: float | None = None  # items of the first batch not done by then expire
    done_fraction: float = 0.5  # with expiry: the share of items answered before it
    reverse: bool = True  # results in reverse order, with a foreign line first
    batches: dict[str, FakeBatch] = field(default_factory=dict)
    creates: int = 0
    polls: int = 0
    sent: list[tuple[int, int]] = field(default_factory=list)  # (position, submission) sent
    on_poll: Callable[[FakeBatchServer], None] | None = None

    def wall(self) -> float:
        return time.time()  # a provider stamps its batches on its own (real) clock

    def create(self, items: list[dict[str, Any]]) -> FakeBatch:
        self.creates += 1
        fault = self.create_faults.pop(0) if self.create_faults else "ok"
        if fault == "429":
            raise RateLimited(
                "rate limited", provider="anthropic", status_code=429, retry_after=2.0
            )
        batch = FakeBatch(
            f"msgbatch_{len(self.batches) + 1:03d}", items, self.clock.now(), self.wall()
        )
        self.batches[batch.id] = batch
        for item in items:
            _, pos, sub = item["custom_id"].split("-")
            self.sent.append((int(pos), int(sub)))
        if fault == "lost":
            raise TransportError("no response within 60 s (idle timeout)", provider="anthropic")
        return batch

    def _expires(self, batch: FakeBatch) -> bool:
        return self.expire_after is not None and batch.id == "msgbatch_001"

    def phase(self, batch: FakeBatch) -> str:
        age = self.clock.now() - batch.created
        if batch.cancelled_at is not None and self.clock.now() - batch.cancelled_at >= 1.0:
            return "ended"
        if batch.cancelled_at is not None:
            return "canceling"
        if self._expires(batch) and age >= (self.expire_after or 0.0):
            return "ended"
        return "ended" if age >= self.duration else "in_progress"

    def lines(self, batch: FakeBatch) -> list[dict[str, Any]]:
        out = []
        n = len(batch.items)
        for k, item in enumerate(batch.items):
            cid = item["custom_id"]
            _, pos, sub = cid.split("-")
            prompt = item["params"]["messages"][0]["content"][0]["text"]
            if batch.cancelled_at is not None and k >= n * self.done_fraction:
                kind = "canceled"
            elif self._expires(batch) and k >= n * self.done_fraction:
                kind = "expired"
            else:
                kind = self.outcome(int(pos), int(sub))
            out.append(line_for(cid, kind, prompt))
        if self.reverse:
            out.reverse()
            out.insert(0, line_for("someone-else-7", "ok", "not ours"))
            out.insert(0, line_for("0badc0de-0-1", "ok", "another run's"))
        return out

    def doc(self, batch: FakeBatch) -> dict[str, Any]:
        phase = self.phase(batch)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if phase == "ended":
            for line in self.lines(batch):
                if line["custom_id"] not in ("someone-else-7", "0badc0de-0-1"):
                    kind = line["result"]["type"]
                    counts[kind] = counts.get(kind, 0) + 1
        else:
            counts["processing"] = len(batch.items)
        stamp = batch.created_wall
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": phase,
            "request_counts": counts,
            "created_at": _rfc3339(stamp),
            "results_url": f"http://fake/v1/messages/batches/{batch.id}/results"
            if phase == "ended"
            else None,
        }


def _rfc3339(wall: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(wall, tz=timezone.utc).isoformat().replace("+00:00", "Z")


class FakeBatches(AnthropicBatches):
    """`AnthropicBatches` whose HTTP calls go to a `FakeBatchServer`."""

    def __init__(self, server: FakeBatchServer, *, caps: BatchCaps | None = None) -> None:
        provider = AnthropicProvider("claude-sonnet-4-0", api_key="sk-fake", base_url="http://fake")
        super().__init__(provider, caps=caps)
        self.server = server

    async def create(self, items: Items, *, count: int, size: int, tag: str) -> BatchStatus:
        decoded = [json.loads(b) for b in items()]
        assert len(decoded) == count
        return self.status(self.server.doc(self.server.create(decoded)))

    async def retrieve(self, batch_id: str) -> BatchStatus:
        self.server.polls += 1
        if self.server.on_poll is not None:
            self.server.on_poll(self.server)
        return self.status(self.server.doc(self.server.batches[batch_id]))

    async def cancel(self, batch_id: str) -> BatchStatus:
        batch = self.server.batches[batch_id]
        if batch.cancelled_at is None and self.server.phase(batch) != "ended":
            batch.cancelled_at = self.server.clock.now()
        return self.status(self.server.doc(batch))

    async def recent(self, since: float) -> list[BatchStatus]:
        docs = [self.status(self.server.doc(b)) for b in self.server.batches.values()]
        return [s for s in reversed(docs) if (s.created_at or 0) >= since - 120]

    async def results(self, status: BatchStatus) -> AsyncGenerator[ItemResult, None]:
        for line in self.server.lines(self.server.batches[status.id]):
            yield self._item(line)


def fake_batch(
    server: FakeBatchServer,
    prompts: Any,
    tmp_path: Any,
    *,
    caps: BatchCaps | None = None,
    retry: Any = None,
    poll: tuple[float, float] = (5.0, 60.0),
    name: str = "run.batch",
) -> Any:
    """A `ProviderBatch` of `prompts` whose client is `FakeBatches(server)`."""
    from nbagent.batch._provider_backend import ProviderBatch

    batch = ProviderBatch.from_options(
        provider_options(
            prompts,
            model="demo",
            retry=retry,
            state=tmp_path / name,
            agent_kwargs={"clock": server.clock, "poll": poll},
        ),
        *_prompts(prompts),
    )
    batch.client = FakeBatches(server, caps=caps)
    return batch


def resumed_batch(server: FakeBatchServer, path: Any, **kw: Any) -> Any:
    from nbagent.batch._provider_backend import ProviderBatch

    batch = ProviderBatch.from_state(path, clock=server.clock, **kw)
    batch.client = FakeBatches(server, caps=batch.client.caps)
    return batch


def provider_options(prompts: Any, *, model: Any, state: Any, **kw: Any) -> Any:
    """The `BatchOptions` of a `map(prompts, backend="provider", ...)` call: the entry
    points' defaults, with `kw` (`retry=`, `agent_kwargs=`, ...)."""
    from nbagent.batch._options import BatchOptions

    defaults: dict[str, Any] = {
        "concurrency": 1,
        "column": None,
        "tools": (),
        "system": None,
        "retry": None,
        "show": False,
        "workers": None,
        "dry_run": False,
    }
    return BatchOptions(
        prompts=prompts,
        model=model,
        backend="provider",
        state=state,
        **{**defaults, **kw},
    )


def _prompts(prompts: Any) -> Any:
    from nbagent.batch._frames import prompts_of

    return prompts_of(prompts, None)
