"""Structured answers (`output=`) through a provider's batch API, as a live agent has them.

Nothing here is a second structured-output path: the mode (`auto` picks per provider and model),
the schema in the provider's dialect, the output tool or the prompted instructions, the check of
an answer and the reask's messages are the live run's `StructuredOutput`, made for the batch's
one model with no tools of the user's. What a batch adds:

* **the reask is a resubmission**: an item whose answer is off its schema goes into the next
  batch with the failed answer (the latest only) and the errors after its prompt, as the live
  reask sends them; a retryable failure of that submission sends the same conversation again.
  What an item's next request carries is its `Tail` (JSON, kept in the state file, so a resume
  builds the same request);
* **the state file** keeps the schema as JSON Schema (a pydantic model cannot be stored safely),
  with the mode and `output_retries`, so `resume(state)` checks answers against it (values are
  then dicts), and `resume(state, output=Model)` gives instances again.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from .._core._attempts import AttemptFailure, Sent
from .._core._messages import Message
from .._loop._args import check_output_retries
from .._loop._output_schema import WRAP_KEY, OutputMode, OutputSchema
from .._loop._output_step import Checked, StructuredOutput
from ..errors import ConfigError, OutputInvalid, OutputIssue
from ..providers import Completed, Provider, ToolSpec


@dataclass(frozen=True)
class Tail:
    """What an item's request carries after its prompt: the latest failed answer and the
    errors asking again (how many reasks it has had is its `AttemptState`, by the record)."""

    messages: tuple[Message, ...]

    def to_json(self) -> dict[str, Any]:
        return {"messages": [m.to_dict() for m in self.messages]}

    @classmethod
    def from_json(cls, doc: Any) -> Tail:
        return cls(tuple(Message.from_dict(m) for m in doc["messages"]))


class BatchOutput:
    """A provider batch's structured answer (see the module docstring).

    Raises `ConfigError` when made: an unknown mode, or a schema the mode cannot take.
    """

    def __init__(
        self, schema: OutputSchema, *, mode: OutputMode, retries: int, provider: Provider
    ) -> None:
        self.schema = schema
        check_output_retries(retries)
        self.retries = retries
        self.structured = StructuredOutput(
            schema, mode=mode, validators=(), retries=self.retries, providers=[provider], tools=[]
        )
        # the one model's plan: its mode, and what every request carries (`plan.format`)
        self.plan = self.structured.plans[0]

    # -- the request --------------------------------------------------------------------------

    def system(self, system: str | None) -> str | None:
        """The system prompt of every item (prompted mode adds the schema)."""
        return self.structured.system(0, system)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools of every item: the output tool in tool mode, else none."""
        return self.structured.tools(0, ())

    def extra_chars(self) -> int:
        """What a request carries besides its messages, for the bill: the schema (in the
        system prompt, the output tool, or the provider's own field)."""
        if self.plan.mode == "native":
            return len(json.dumps(self.plan.format.schema, separators=(",", ":")))
        return 0

    # -- the answer ---------------------------------------------------------------------------

    def check(self, done: Completed, max_tokens: int) -> Checked:
        """The answer's checked value, as a live attempt checks it.

        Args:
            done: The item's answer, read as a live answer is.
            max_tokens: What the request allowed (a cut answer is truncated, not invalid).

        Returns:
            The checked value and the answer's raw text.

        Raises:
            OutputInvalid: The answer is not JSON, breaks the schema, or is not there.
            OutputTruncated: The answer was cut at max_tokens.
        """
        try:
            checked = self.structured.check(
                done, 0, max_tokens=max_tokens, sent=Sent(usage=done.usage)
            )
        except AttemptFailure as failure:
            raise failure.error from None
        if checked is None:  # the model paused, or called a tool it was not offered
            issue = OutputIssue("", "there was no answer: answer with the JSON")
            raise OutputInvalid([issue], done.message.text, usage=done.usage, answer=done.message)
        assert isinstance(checked, Checked)
        return checked

    def tail(self, error: OutputInvalid) -> Tail:
        """The tail of an item reasked after `error`: the live reask's pair, replacing the one
        before (only the latest failed answer is sent)."""
        return Tail(tuple(self.structured.reask(error, 0)))

    # -- the state file -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The converted schema (what the model is told, as JSON Schema), its name, the mode and
        the reasks allowed."""
        s = self.schema
        return {
            "schema": s.json_schema,
            "wrapped": s.wrapped,
            "name": s.name,
            "description": s.description,
            "mode": self.plan.mode,
            "retries": self.retries,
        }

    @classmethod
    def from_json(cls, doc: Any, *, provider: Provider, output: Any = None) -> BatchOutput:
        """The output of a resumed batch: checked against the stored JSON Schema, or against
        `output` (the model it began with, given again) when there is one."""
        if output is None:
            schema = _reloaded(doc)
        else:
            schema = OutputSchema.of(output)
            if (schema.json_schema, schema.wrapped) != (doc["schema"], doc["wrapped"]):
                raise ConfigError(
                    f"resume(output={schema.name}) has another schema than the batch began "
                    "with: give the same one, or leave output= out (the answers are then "
                    "checked against the stored JSON Schema and come back as dicts)"
                )
        return cls(schema, mode=doc["mode"], retries=int(doc["retries"]), provider=provider)


def _reloaded(doc: dict[str, Any]) -> OutputSchema:
    """The stored schema, told to the model exactly as before, its answers checked against
    it (the wrapped value against what the wrapper holds)."""
    told: dict[str, Any] = doc["schema"]
    check = told
    if doc["wrapped"]:
        check = dict(told["properties"][WRAP_KEY])
        if "$defs" in told:
            check["$defs"] = told["$defs"]
    schema = copy.copy(OutputSchema.of(check))  # a copy: the cached one stays as it is
    schema.json_schema, schema.wrapped = told, bool(doc["wrapped"])
    schema.name, schema.description = str(doc["name"]), str(doc["description"])
    if schema.wrapped:
        schema.fields = ()
    return schema
