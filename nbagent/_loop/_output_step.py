"""One run's structured answer: the mode per model, the request's part of it, the check, the reask.

`StructuredOutput` is made when a run with `output=` starts, before anything is sent: for each
model of the chain it resolves the mode (`auto` picks per provider and model) and puts the
schema in the provider's dialect, so a schema the mode cannot take is a `ConfigError` naming
the field and the keyword now, not a 400 later.

Each attempt's answer is checked in the attempt (`check`), before the attempt counts as a
success: an answer off its schema fails the attempt with `OutputInvalid` (reasked while
`output_retries` allows), one cut at max_tokens with `OutputTruncated` (never reasked), both
with the answer's usage, so the attempt log's row carries its tokens and cost. A message that
only calls the user's tools is not the answer yet: the run goes on with the tools.

In `auto` mode a server that refuses the native form (`SchemaRejected`: a 400 or 422 naming
`response_format`, or a request-validation body naming it under any status) gets the next form
once (`reform`): `json_object` with the schema where the Chat format may take it, then tool
mode. The provider keeps the refusal (`refused_output_forms`), so its next run starts with the
form that worked; the switch is the failed attempt's row (`action="retry"`, the message says
to what) and the successful one's note.

The reask (`reask`) is compact: the failed answer once (the latest only: the caller replaces
the previous pair) and the errors with their paths, as a tool result in tool mode or a user
message otherwise; never the answer repeated inside the errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._core._attempts import AttemptFailure, Sent
from .._core._messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ..errors import ConfigError, OutputInvalid, OutputTruncated, SchemaRejected
from ..providers import Completed, Provider, ToolSpec
from ..providers._base import OutputFormat
from ..providers._output_wire import Form, Mode, native_forms, output_modes, wire_format
from ._output_schema import (
    ANSWER_TOOL,
    OutputMode,
    OutputSchema,
    OutputValidator,
    answer_text,
    run_validators,
)

_MODES = ("auto", "native", "tool", "prompted")


def _shown(mode: Mode, form: Form) -> str:
    """A mode and form as the attempt log says them."""
    return "native, json_object with the schema" if form == "json_object" else mode


def _auto_forms(provider: Provider, tools: bool) -> list[tuple[Mode, Form]]:
    """What `auto` may send, best first: each native form, then tool mode (never prompted)."""
    out: list[tuple[Mode, Form]] = []
    for mode in output_modes(provider, tools=tools):
        if mode == "native":
            out += [(mode, form) for form in native_forms(provider)]
        elif mode == "tool":
            out.append((mode, "json_schema"))
    return out


def _refusals(provider: Provider) -> set[str]:
    kept = getattr(provider, "refused_output_forms", None)
    return kept if isinstance(kept, set) else set()


def answer_limit(max_tokens: int, options: Mapping[str, Any]) -> int:
    """The max_tokens an answer is cut at (where a structured one is truncated, not invalid):
    the request `options`' own, when they carry one."""
    value = options.get("max_tokens")
    return value if isinstance(value, int) else max_tokens


def refuse_mode_without_output(output: Any, mode: Any) -> None:
    """A ConfigError for `output_mode=` given without `output=` (it would be ignored)."""
    if output is None and mode != "auto":
        raise ConfigError(
            f"output_mode={mode!r} says how a structured answer is asked for, but output= is "
            "not given: pass output=YourModel too, or leave output_mode out"
        )


def _wire_format(provider: Provider, mode: Mode, **kw: Any) -> OutputFormat:
    """`wire_format`, its schema errors in the model's own words where the provider names its
    native structured outputs itself (`outputs_named`: the demo model speaks Anthropic's
    dialect, but a demo user should not read that Anthropic refused the schema)."""
    try:
        return wire_format(provider, mode, **kw)
    except ConfigError as exc:
        named = getattr(provider, "outputs_named", None)
        if named is None:
            raise
        said = re.sub(r"\S+'s structured outputs", lambda _: named, str(exc))
        raise ConfigError(said) from None


def prompted_instructions(schema: OutputSchema) -> str:
    """What prompted mode adds to the system prompt: the schema, and how to answer."""
    text = json.dumps(schema.json_schema, ensure_ascii=False, separators=(",", ":"))
    return (
        "Answer with one JSON value and nothing else: no prose before or after it, no code "
        f"fences. It must match this JSON Schema:\n{text}"
    )


@dataclass(frozen=True)
class OutputPlan:
    """How one model of the chain is asked: the mode, the request's `OutputFormat`, the
    output tool (tool mode) and the system prompt's addition (prompted mode)."""

    mode: Mode
    format: OutputFormat
    tool: ToolSpec | None = None
    instructions: str = ""
    why: str = ""  # how the mode was chosen, for the attempt log


@dataclass(frozen=True)
class Checked:
    """A structured answer that passed: its value and its raw text."""

    value: Any
    raw: str


class StructuredOutput:
    """One run's structured answer (see the module docstring).

    Raises `ConfigError` when made: an unknown mode, a tool of the user's named like the
    output tool, a schema a model's mode cannot take.
    """

    def __init__(
        self,
        schema: OutputSchema,
        *,
        mode: OutputMode,
        validators: Sequence[OutputValidator],
        retries: int,
        providers: Sequence[Provider],
        tools: Sequence[str],
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(
                f"output_mode takes 'auto', 'native', 'tool' or 'prompted', not {mode!r}"
            )
        if ANSWER_TOOL in tools:
            raise ConfigError(
                f"a tool is named `{ANSWER_TOOL}`, the name tool mode gives the answer's tool; "
                "rename it"
            )
        self.schema = schema
        self.validators = tuple(validators)
        self.retries = retries
        self.mode = mode
        self.providers = list(providers)
        self._tools = bool(tools)
        # the native forms each provider refused: kept on the provider where it can keep them
        # (`refused_output_forms`), so a later run of `auto` starts with the form that worked
        self._refused = [_refusals(p) for p in providers]
        self.plans = [
            self._plan(p, mode, bool(tools), refused)
            for p, refused in zip(providers, self._refused, strict=True)
        ]

    def _plan(
        self, provider: Provider, requested: OutputMode, tools: bool, refused: set[str]
    ) -> OutputPlan:
        s = self.schema
        form: Form = "json_schema"
        if requested == "auto":
            forms = _auto_forms(provider, tools)
            mode, form = next(
                ((m, f) for m, f in forms if m != "native" or f not in refused), forms[-1]
            )
            why = f"output_mode=auto: {_shown(mode, form)}"
            if refused & set(native_forms(provider)):
                why += f" (the server refused {', '.join(sorted(refused))})"
        else:
            mode = requested
            why = f"output_mode={mode}"
        name = ANSWER_TOOL if mode == "tool" else s.name  # tool mode names the tool to call
        fmt = _wire_format(
            provider, mode, name=name, schema=s.json_schema, description=s.description, form=form
        )
        if mode == "tool":
            described = s.description or f"The answer ({s.name})."
            tool = ToolSpec(
                ANSWER_TOOL,
                f"Give the final answer by calling this tool; its arguments are the answer. "
                f"{described}",
                s.json_schema,
            )
            return OutputPlan(mode, fmt, tool=tool, why=why)
        if mode == "prompted":
            return OutputPlan(mode, fmt, instructions=prompted_instructions(s), why=why)
        return OutputPlan(mode, fmt, why=why)

    def reform(self, index: int, error: BaseException) -> str:
        """After `error`, in `auto` mode: when the server refused model `index`'s native form,
        switch to the next one (the refusal is kept) and say so; "" otherwise."""
        plan = self.plans[index]
        if self.mode != "auto" or plan.mode != "native" or not isinstance(error, SchemaRejected):
            return ""
        self._refused[index].add(plan.format.form)
        new = self._plan(self.providers[index], "auto", self._tools, self._refused[index])
        if (new.mode, new.format.form) == (plan.mode, plan.format.form):
            return ""  # no other form to send
        self.plans[index] = new
        old, now = _shown(plan.mode, plan.format.form), _shown(new.mode, new.format.form)
        return f"output_mode=auto: {old} refused by the server; trying {now}"

    def system(self, index: int, system: str | None) -> str | None:
        """The system prompt for model `index` (prompted mode adds the schema)."""
        extra = self.plans[index].instructions
        if not extra:
            return system
        return f"{system}\n\n{extra}" if system else extra

    def tools(self, index: int, tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        """The tools offered to model `index` (tool mode adds the output tool, last)."""
        tool = self.plans[index].tool
        return (*tools, tool) if tool is not None else tools

    # -- the answer ----------------------------------------------------------------------------

    def check(self, completed: Completed, index: int, *, max_tokens: int, sent: Sent) -> Any:
        """The answer's `Checked` value; None when the message only calls the user's tools.

        Raises `AttemptFailure` carrying `OutputInvalid` or `OutputTruncated` (and the answer's
        usage), for the attempt loop to decide about.
        """
        plan = self.plans[index]
        message = completed.message
        raw, call = answer_text(message, plan.mode)
        others = [b for b in message.tool_uses if b.name != ANSWER_TOOL]
        if (call is None and others) or completed.stop_reason == "pause_turn":
            return None  # a tool step on the way to the answer, or a turn the server paused
        if completed.stop_reason == "max_tokens":
            err: Exception = OutputTruncated(
                max_tokens, completed.usage.output_tokens or None, raw, usage=completed.usage
            )
            raise AttemptFailure(err, text=raw, answered=sent)
        try:
            value = run_validators(self.schema.read(message, mode=plan.mode), self.validators, raw)
        except OutputInvalid as exc:
            err = OutputInvalid(exc.errors, raw, usage=completed.usage, answer=message)
            raise AttemptFailure(err, text=raw, answered=sent) from None
        return Checked(value, raw)

    def reask(
        self, error: OutputInvalid, index: int, before: tuple[Block, ...] = ()
    ) -> list[Message]:
        """The failed answer (only what the answer was, after `before`: the paused part of the
        turn it continued) and the message asking again."""
        answer = error.answer if isinstance(error.answer, Message) else None
        failed = answer or Message.assistant(error.raw or "(no answer)")
        if before:
            failed = Message("assistant", (*before, *failed.blocks))
        listed = "\n".join(f"- {e}" for e in error.errors)
        n = len(error.errors)
        head = f"{n} validation error{'s' if n != 1 else ''}"
        kept = tuple(b for b in failed.blocks if isinstance(b, TextBlock) and b.text.strip())
        again = "Answer again with the whole JSON, the errors fixed."
        if self.plans[index].mode == "tool":
            call = next(
                (b for b in failed.blocks if isinstance(b, ToolUseBlock) and b.name == ANSWER_TOOL),
                None,
            )
            if call is not None:
                text = f"{head}:\n{listed}\nCall {ANSWER_TOOL} again with the errors fixed."
                result = ToolResultBlock(call.id, (TextBlock(text),), is_error=True)
                return [Message("assistant", (*kept, call)), Message("user", (result,))]
            again = f"Give the answer by calling the {ANSWER_TOOL} tool."
        answer = Message("assistant", kept or (TextBlock("(no answer)"),))
        return [answer, Message.user(f"{head}:\n{listed}\n{again}")]

    def final_messages(self, completed: Completed, index: int) -> list[Message]:
        """What a tool-mode answer leaves in the conversation after the assistant's message:
        a result for each call (the answer's, and the user's tools it made beside it, not run),
        so the history stays well formed for the next prompt."""
        if self.plans[index].mode != "tool":
            return []
        results = []
        for block in completed.message.tool_uses:
            if block.name == ANSWER_TOOL:
                results.append(ToolResultBlock(block.id, (TextBlock("Answer received."),)))
            else:
                note = "Not run: the final answer was given in the same message."
                results.append(ToolResultBlock(block.id, (TextBlock(note),), is_error=True))
        return [Message("user", tuple(results))] if results else []
