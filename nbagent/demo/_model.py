"""The offline demo model: deterministic, tool-using replies computed from the conversation.

``demo_reply(conversation)`` returns a neutral ``MockReply``; ``wire.py`` encodes it in either
format. Markers in the prompt trigger misbehaviour on demand: ``[demo:unknown_tool]``,
``[demo:bad_json]``, ``[demo:bad_args]``, ``[demo:long]``, ``[demo:deltas=N]``,
``[demo:max_tokens]``. A request for a structured answer (`output=`, any mode) gets valid JSON
built from its schema (`_structured`); ``[demo:schema_mismatch]``, ``[demo:invalid_json]``,
``[demo:refusal]`` and ``[demo:truncated]`` make its first answer misbehave.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from .._loop._summaries import SUMMARY_MARKER  # how a compaction opens its summary
from ..mock import (
    Conversation,
    MockReply,
    MockToolCall,
    StopReason,
    ToolResult,
    ToolUse,
    Turn,
    answer_fault,
    estimate_tokens,
    split_words,
)
from ..mock._answer_faults import mismatching
from ._arithmetic import evaluate, find_expression
from ._structured import MARKER, StructuredAsk, is_reask, sample, structured_ask

MAX_TOOL_ROUNDS = 2
MAX_DELTAS = 1_000_000
_PATH = re.compile(r"[\w.~/-]*[\w~/]")
_FILE_WORDS = re.compile(r"\b(read|open|show|cat|contents?|look at|summari[sz]e|what does)\b", re.I)
_DIR_WORDS = re.compile(r"\b(list|ls|files|director(y|ies)|folder|entries)\b", re.I)
_SUMMARY = re.compile(r"\bsummar(y|ies|ise|ize)\b", re.I)
_FILLER = (
    "the agent loop streams each delta as it arrives so the notebook shows "
    "progress while the request is still open and every failure is recorded"
)
_WORDS = tuple(_FILLER.split())
_Round = tuple[tuple[ToolUse, ...], dict[str, ToolResult]]  # a reply's tool calls, their results


# --- intents ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Intent:
    tool: str
    arguments: dict[str, Any]
    preamble: str


def _find_path(prompt: str) -> str | None:
    for token in _PATH.findall(prompt):
        if "/" in token or re.search(r"\w\.[A-Za-z]\w{0,7}$", token):
            if re.fullmatch(r"[\d./]+", token):  # a fraction like 3/4 is not a path
                continue
            return str(token)
    return None


def _intent(prompt: str, offered: dict[str, dict[str, Any]]) -> _Intent | None:
    """The tool call a helpful model would make for this prompt, if the tool is offered."""
    path = _find_path(prompt)
    is_file = path is not None and re.search(r"\.[A-Za-z]\w{0,7}$", path) is not None
    if path and is_file and "read_file" in offered and _FILE_WORDS.search(prompt):
        return _Intent("read_file", {"path": path}, f"I'll read {path} first.")
    if "list_dir" in offered and (_DIR_WORDS.search(prompt) or (path and path.endswith("/"))):
        where = path if path and not is_file else "."
        return _Intent("list_dir", {"path": where}, f"Let me list what is in {where}.")
    if path and is_file and "read_file" in offered:
        return _Intent("read_file", {"path": path}, f"I'll read {path} first.")
    expression = find_expression(prompt)
    if expression and "calculator" in offered:
        return _Intent(
            "calculator", {"expression": expression}, "I'll use the calculator to work that out."
        )
    return None


# --- replies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Draft:
    text: str = ""
    calls: tuple[MockToolCall, ...] = ()
    stop: StopReason = "end_turn"
    deltas: tuple[str, ...] | None = None


def _digest(conv: Conversation, salt: str) -> str:
    material = json.dumps(
        [conv.system, [(t.role, repr(t.blocks)) for t in conv.turns], salt], ensure_ascii=False
    )
    return hashlib.sha256(material.encode()).hexdigest()


def _call_id(conv: Conversation, salt: str) -> str:
    code = base64.b32encode(bytes.fromhex(_digest(conv, salt)[:30])).decode()
    if conv.format == "openai":
        return "call_" + code.lower()[:24]
    return "toolu_01" + code[:22]


def _call(conv: Conversation, name: str, arguments: str, preamble: str) -> _Draft:
    call = MockToolCall(_call_id(conv, name + arguments), name, arguments)
    return _Draft(text=preamble, calls=(call,), stop="tool_use")


def _topic(prompt: str) -> str:
    clean = " ".join(MARKER.sub(" ", prompt).split()).rstrip("?.! ")
    return clean if len(clean) <= 70 else clean[:67].rstrip() + "..."


def _general_text(prompt: str, conv: Conversation) -> str:
    topic = _topic(prompt) or "your message"
    pick = int(_digest(conv, "general")[:8], 16)
    openers = (
        f"Here is how I would approach “{topic}”.",
        f"Good question: “{topic}”.",
        f"Let me think through “{topic}” step by step.",
    )
    middles = (
        "First, separate what is known from what is only assumed; most confusion starts there.",
        "The useful first step is to pin down what a good answer would let you do next.",
        "It helps to start from the simplest case and add detail only when it changes the answer.",
    )
    ends = (
        "Then check the result against a small example you can verify by hand.",
        "Then write the answer down in one sentence and see whether it still holds up.",
        "Then look for the one assumption that, if wrong, would change everything.",
    )
    return (
        f"{openers[pick % 3]} {middles[(pick // 3) % 3]} {ends[(pick // 9) % 3]} "
        "I am the offline demo model, so this reply is illustrative rather than researched; "
        "connect a real provider for a substantive answer."
    )


def _long_text(prompt: str) -> str:
    topic = _topic(prompt) or "the question"
    sentences = [
        f"Part {i + 1}: thinking about {topic}, the point worth adding here is that "
        + " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(12))
        + "."
        for i in range(120)
    ]
    return " ".join(sentences)


def _exact_deltas(n: int) -> tuple[str, ...]:
    deltas = tuple(("" if i == 0 else " ") + _WORDS[i % len(_WORDS)] for i in range(n))
    return (*deltas[:-1], deltas[-1] + ".") if deltas else ()


_TRANSCRIPT = re.compile(r"<conversation>\n?(.*?)\n?</conversation>", re.S)
_CALLED = re.compile(r"^Assistant called the tool (\w[\w-]*)\(", re.M)


def _summary_text(conv: Conversation, prompt_index: int, prompt: str) -> str:
    quoted = _TRANSCRIPT.search(prompt)
    if quoted:  # a summary request: the conversation comes as a plain-text transcript
        body = quoted.group(1)
        earlier = [
            line[len("User: ") :]
            for line in body.splitlines()
            if line.startswith("User: ") and not line[6:].startswith(SUMMARY_MARKER)
        ]
        tools = _CALLED.findall(body)
    else:
        turns = conv.turns[:prompt_index]
        summaries = [
            t.text.partition("\n")[2].strip()
            for t in turns
            if t.role == "user" and t.text.startswith(SUMMARY_MARKER)
        ]
        earlier = [
            t.text
            for t in turns
            if t.role == "user" and t.text and not t.text.startswith(SUMMARY_MARKER)
        ]
        tools = [u.name for t in turns for u in t.tool_uses]
        if summaries and summaries[-1]:
            since = "; ".join(f"“{_topic(t)}”" for t in earlier[-5:])
            more = f" Since then the user asked {since}." if since else ""
            return f"{summaries[-1]}{more}"
    if not earlier:
        sentences = re.split(r"(?<=[.!?])\s+", " ".join(prompt.split()))
        return "Summary: " + " ".join(sentences[:3])
    asked = "; ".join(f"“{_topic(t)}”" for t in earlier[-5:])
    used = f" Tools used: {', '.join(sorted(set(tools)))}." if tools else ""
    return f"Summary of the conversation so far: the user asked {asked}.{used}"


def _first_move(prompt: str, markers: dict[str, int | None], conv: Conversation) -> _Draft:
    offered = conv.tools
    intent = _intent(prompt, offered)
    if "unknown_tool" in markers:
        return _call(conv, "delete_everything", '{"path": "/"}', "Let me clean up first.")
    if "bad_json" in markers or "bad_args" in markers:
        name = intent.tool if intent else ("calculator" if "calculator" in offered else None)
        name = name or next(iter(offered), "calculator")
        if "bad_json" in markers:
            arguments = json.dumps(intent.arguments if intent else {"input": prompt[:40]})
            return _call(conv, name, arguments[: max(1, len(arguments) - 2)], "Calling the tool.")
        bad = mismatching(offered.get(name), extra="unexpected_argument")
        return _call(conv, name, json.dumps(bad), "Calling the tool.")
    if "deltas" in markers:
        return _Draft(deltas=_exact_deltas(min(markers["deltas"] or 0, MAX_DELTAS)))
    if "long" in markers:
        return _Draft(text=_long_text(prompt))
    if intent is not None:
        return _call(conv, intent.tool, json.dumps(intent.arguments), intent.preamble)
    expression = find_expression(prompt)
    value = evaluate(expression) if expression else None
    if expression and value is not None:
        return _Draft(text=f"{expression} = {value}. I worked this out without a calculator tool.")
    return _Draft(text=_general_text(prompt, conv))


def _parsed(arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments)
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _result_text(call: ToolUse, result: ToolResult) -> str:
    content = result.content.strip()
    args = _parsed(call.arguments)
    if call.name == "calculator":
        return f"{args.get('expression', 'The expression')} = {content}."
    if call.name == "read_file":
        lines = content.splitlines()
        shown = [line.strip() for line in lines if line.strip()][:3]
        # a long line is cut at a word, never inside one ("said 2 seconds e")
        cut = [textwrap.shorten(line, 80, placeholder=" …") for line in shown]
        quoted = " / ".join(f"“{line}”" for line in cut) or "nothing (it is empty)"
        words = len(content.split())
        return (
            f"{args.get('path', 'The file')} has {len(lines)} lines and {words} words. "
            f"It begins with: {quoted}."
        )
    if call.name == "list_dir":
        try:
            parsed = json.loads(content)
            entries = [str(e) for e in parsed] if isinstance(parsed, list) else []
        except ValueError:
            entries = [e.strip() for e in re.split(r"[\n,]", content) if e.strip()]
        listed = ", ".join(entries[:10]) + (
            f" and {len(entries) - 10} more" if len(entries) > 10 else ""
        )
        where = args.get("path", "The directory")
        return f"{where} contains {len(entries)} entries: {listed or 'none'}."
    preview = content if len(content) <= 200 else content[:197] + "..."
    return f"The {call.name} tool returned: {preview}"


def _after_tools(prompt: str, rounds: list[_Round], conv: Conversation) -> _Draft:
    calls, results = rounds[-1]
    failed = [(c, results[c.id]) for c in calls if c.id in results and results[c.id].is_error]
    if not failed:
        texts = [_result_text(c, results[c.id]) for c in calls if c.id in results]
        return _Draft(text=" ".join(texts) or "The tool returned nothing, so I have no answer yet.")
    call, error = failed[0]
    reason = " ".join(error.content.split())[:160] or "no details"
    intent = _intent(prompt, conv.tools)
    if intent is not None and len(rounds) < MAX_TOOL_ROUNDS:
        right = (intent.tool, json.dumps(intent.arguments))
        if (call.name, _parsed(call.arguments)) != (intent.tool, intent.arguments):
            return _call(
                conv,
                intent.tool,
                right[1],
                f"Sorry, that call failed ({reason.rstrip('.')}). "
                f"Let me use the {intent.tool} tool properly.",
            )
    text = f"The {call.name} tool reported an error: {reason.rstrip('.')}."
    expression = find_expression(prompt)
    value = evaluate(expression) if expression else None
    if expression and value is not None:
        return _Draft(text=f"{text} Working it out myself instead: {expression} = {value}.")
    return _Draft(text=f"{text} I can't complete that with the tools available, so I'll stop here.")


def _last_prompt(turns: tuple[Turn, ...]) -> tuple[int, str]:
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if turn.role == "user" and not turn.tool_results and turn.text.strip():
            if is_reask(turn):
                continue  # a structured answer asked for again: not a new question
            return index, turn.text
    return -1, ""


def _rounds(episode: tuple[Turn, ...]) -> list[_Round]:
    rounds: list[_Round] = []
    for turn in episode:
        if turn.role == "assistant" and turn.tool_uses:
            rounds.append((turn.tool_uses, {}))
        elif turn.role == "user" and rounds:
            rounds[-1][1].update({r.tool_use_id: r for r in turn.tool_results})
    return rounds


_MISBEHAVE = ("schema_mismatch", "invalid_json", "refusal", "truncated")


def _structured_reply(
    conv: Conversation,
    ask: StructuredAsk,
    prompt: str,
    markers: dict[str, int | None],
    rounds: list[_Round],
    reasked: bool,
) -> MockReply:
    """The answer in the shape asked for; a marker's misbehaviour the first time only."""
    results = " ".join(
        r.content for _, done in rounds for r in done.values() if not r.is_error
    ).strip()
    value = sample(ask.schema, prompt, seed=_digest(conv, "structured"), found=results)
    arguments = json.dumps(value, ensure_ascii=False)
    if ask.tool is not None:
        call = MockToolCall(_call_id(conv, ask.tool + arguments), ask.tool, arguments)
        reply = MockReply(tool_calls=(call,), stop_reason="tool_use")
    else:
        text = f"```json\n{arguments}\n```" if ask.fenced else arguments
        reply = MockReply(text_deltas=split_words(text))
    reply = dataclasses.replace(
        reply,
        input_tokens=conv.prompt_tokens,
        output_tokens=max(1, estimate_tokens(len(arguments))),
    )
    for kind in _MISBEHAVE:
        if kind in markers and not reasked:
            return answer_fault(kind, reply, conv)
    return reply


def demo_reply(conv: Conversation) -> MockReply:
    """The demo model's deterministic reply to ``conv``.

    Args:
        conv: The conversation the mock server received, read from any wire format.

    Returns:
        The reply: text, tool calls and a stop reason, which the mock server streams in the
            request's wire format.
    """
    index, prompt = _last_prompt(conv.turns)
    markers = {
        m.group(1).lower(): (int(m.group(2)) if m.group(2) else None)
        for m in MARKER.finditer(prompt)
    }
    if "max_tokens" in markers:
        return MockReply(stop_reason="max_tokens", input_tokens=conv.prompt_tokens)
    rounds = _rounds(conv.turns[index + 1 :]) if index >= 0 else []
    ask = structured_ask(conv) if index >= 0 else None
    if ask is not None:  # the answer's own tool calls and reasks are not tool rounds
        rounds = [r for r in rounds if all(c.name != ask.tool for c in r[0])]
    if index < 0:
        draft = _Draft(text="I did not receive a question. What would you like me to do?")
    elif rounds:
        draft = _after_tools(prompt, rounds, conv)
    elif _SUMMARY.search(prompt) and _intent(prompt, conv.tools) is None:
        draft = _Draft(text=_summary_text(conv, index, prompt))
    else:
        draft = _first_move(prompt, markers, conv)
    if draft.calls and len(rounds) >= MAX_TOOL_ROUNDS:
        draft = _Draft(text=draft.text)
    if ask is not None:
        # the user's tools first, when the prompt needs them and the request names no tool to
        # call; then the answer in its shape
        reasked = bool(conv.turns) and is_reask(conv.turns[-1])
        if ask.named or reasked or not [c for c in draft.calls if c.name != ask.tool]:
            return _structured_reply(conv, ask, prompt, markers, rounds, reasked)
    deltas = draft.deltas if draft.deltas is not None else split_words(draft.text)
    thinking: tuple[str, ...] = ()
    signature = ""
    if conv.thinking and conv.format == "anthropic" and draft.deltas is None:
        thought = f"The user asks: {_topic(prompt) or 'nothing yet'}. " + (
            "A tool call will answer this reliably." if draft.calls else "I can answer directly."
        )
        thinking = split_words(thought)
        signature = base64.b64encode(hashlib.sha256(thought.encode()).digest() * 2).decode()
    chars = sum(len(d) for d in deltas) + sum(len(d) for d in thinking)
    chars += sum(len(c.name) + len(c.arguments) for c in draft.calls)
    return MockReply(
        text_deltas=deltas,
        tool_calls=draft.calls,
        stop_reason=draft.stop,
        thinking_deltas=thinking,
        signature=signature,
        input_tokens=conv.prompt_tokens,
        output_tokens=max(1, estimate_tokens(chars)) if chars else 0,
    )
