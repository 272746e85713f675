"""Google Gemini, native API, streamed (`POST {base}/v1beta/models/{model}:streamGenerateContent
?alt=sse`, the key in the `x-goog-api-key` header, never in the URL that logs show).

Each SSE event is a whole `GenerateContentResponse`: parts (text, `thought` text, whole function
calls: parallel calls arrive together in one chunk), the `finishReason` on the last, and the
`usageMetadata` so far. There is no end marker: a stream that ends without a `finishReason` broke.

What the answer's end means:

* `STOP` -> `end_turn` (`tool_use` when it called functions); `MAX_TOKENS` -> `max_tokens` (the
  length path);
* `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `LANGUAGE` and the image
  kinds, and a `promptFeedback.blockReason` -> `ContentFiltered`;
* `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`, `OTHER` ->
  `StreamInterrupted`: the model gets another attempt;
* an `error` object mid-stream -> classified by its status like an HTTP error (`_http_errors`);
  a 500 for a request larger than the model's window -> `ContextOverflow` (Gemini's documented
  cause of such 500s), any other 500 `ServerError`.

Usage: `promptTokenCount` (cached tokens included, `cachedContentTokenCount` of them read from the
cache) and `candidatesTokenCount` + `thoughtsTokenCount` (thinking is billed as output).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from .._core._messages import Block, OpaqueBlock, TextBlock, ThinkingBlock, ToolUseBlock
from ..errors import (
    ContentFiltered,
    ContextOverflow,
    ProviderError,
    ServerError,
    StreamInterrupted,
)
from ._base import (
    Dialect,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from ._gemini_batch import GeminiBatches
from ._gemini_body import GEMINI, build_gemini_body, estimate_request_tokens
from ._http import HTTPProvider
from ._parts import PartBuffer, json_object, whole_number
from ._pricing import context_window
from ._sse import ServerSentEvent
from ._stream_ends import ErrorEvent, Reading, Refused
from ._whole_body import WholeEvents

_USAGE_COUNTS = (
    "promptTokenCount",
    "toolUsePromptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
)
"""The counts of `usageMetadata` an answer's usage is made of (every chunk carries them)."""
DEFAULT_WINDOW = 1_048_576  # Gemini's usual context window, for models genai-prices lacks
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "LANGUAGE",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_ANOTHER_ATTEMPT = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "OTHER"}
)


@dataclass
class _Turn:
    """The answer's parts as they arrive, folded into nbagent blocks in their order."""

    blocks: list[Block] = field(default_factory=list)
    run_kind: str = ""  # "text" or "thought": the kind of the text run being collected
    run: list[str] = field(default_factory=list)
    run_signature: str | None = None
    calls: int = 0

    def close_run(self) -> None:
        text = "".join(self.run)
        if self.run_signature is not None:
            self.blocks.append(OpaqueBlock(GEMINI, {"thoughtSignature": self.run_signature}))
        if text:
            block: Block = ThinkingBlock(text) if self.run_kind == "thought" else TextBlock(text)
            self.blocks.append(block)
        self.run_kind, self.run, self.run_signature = "", [], None

    def add(self, part: dict[str, Any], call_id: str, buf: PartBuffer) -> None:
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(call, dict):
            self.close_run()
            name = str(call.get("name") or "")
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            cid = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else call_id
            if signature is not None:
                self.blocks.append(OpaqueBlock(GEMINI, {"thoughtSignature": signature}))
            self.blocks.append(ToolUseBlock(str(cid), name, dict(args or {})))
            buf.add(ToolCallPart(self.calls, str(cid), name, json.dumps(args or {})))
            self.calls += 1
        elif isinstance(text, str):
            kind = "thought" if part.get("thought") is True else "text"
            if kind != self.run_kind:
                self.close_run()
                self.run_kind = kind
            if text:
                self.run.append(text)
                buf.add(ThinkingPart(text) if kind == "thought" else TextPart(text))
            if signature is not None:
                if kind == "text" and text:
                    self.run_signature = signature  # back on the part of the run it ends
                    self.close_run()
                else:
                    self.close_run()  # an empty or a thought part: kept whole, as it came
                    self.blocks.append(OpaqueBlock(GEMINI, dict(part)))
        else:
            self.close_run()  # a part nbagent has no block for: kept whole, sent back as is
            self.blocks.append(OpaqueBlock(GEMINI, dict(part)))


@dataclass
class _State(Reading):
    """What one answer's chunks have said so far (there is no end marker: the finishReason
    ends it)."""

    turn: _Turn = field(default_factory=_Turn)
    finish_message: str = ""
    # what call ids derive from until the server names the response (`response_id`)
    local_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def read(self, event: ServerSentEvent) -> None:
        """One chunk of the answer: an error, or its usage so far, its parts, its finish reason."""
        if not event.data.strip():
            return
        es = self.es
        data = es.json(event)
        if data.get("error"):
            raise ErrorEvent(data)
        meta = data.get("usageMetadata")
        if isinstance(meta, dict):  # cumulative: the latest counts; thinking billed as output
            n = {k: whole_number(meta.get(k)) or 0 for k in _USAGE_COUNTS}
            self.input_tokens = n.get("promptTokenCount", 0) + n.get("toolUsePromptTokenCount", 0)
            self.output_tokens = n.get("candidatesTokenCount", 0) + n.get("thoughtsTokenCount", 0)
            self.cache_read = n.get("cachedContentTokenCount", 0)
        self.named(data.get("modelVersion"), data.get("responseId"))
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            reason = str(feedback.get("blockReason"))
            why = f"Gemini blocked the prompt (blockReason {reason})"
            if isinstance(feedback.get("blockReasonMessage"), str):
                why += f": {feedback['blockReasonMessage']}"
            raise Refused(ContentFiltered, why, code=reason)
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            return
        candidate = candidates[0]
        if not isinstance(candidate, dict):
            raise es.interrupted("bad server-sent event (a candidate is not an object)")
        parts = json_object(candidate, "content").get("parts")
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict):
                call_id = f"call_{self.response_id or self.local_id}_{self.turn.calls}"
                self.turn.add(part, call_id, self.buf)
        if isinstance(candidate.get("finishReason"), str):
            self.finish = candidate["finishReason"]
            self.finish_message = str(candidate.get("finishMessage") or "")

    async def end(self, batches: AsyncIterator[list[ServerSentEvent]]) -> None:
        if self.finish is None:
            raise self.es.interrupted("the stream ended before a finishReason")

    def result(self) -> tuple[list[Block], str, str]:
        turn, finish = self.turn, self.finish or ""
        turn.close_run()
        if finish in _FILTERED:
            why = f"Gemini stopped the answer (finishReason {finish})"
            raise Refused(ContentFiltered, why, code=finish)
        if finish in _ANOTHER_ATTEMPT:
            why = f"Gemini's answer was unusable (finishReason {finish})"
            if self.finish_message:
                why += f": {self.finish_message}"
            raise Refused(StreamInterrupted, why, code=finish)
        if finish == "MAX_TOKENS":
            return turn.blocks, "max_tokens", ""
        return turn.blocks, "tool_use" if turn.calls else "end_turn", ""


class GeminiProvider(HTTPProvider):
    """Streams Gemini models through the Generative Language API ("gemini:..." model strings).

    Attributes:
        default_base_url: https://generativelanguage.googleapis.com, when no `base_url` is
            given.
        default_name: "gemini", in model strings and the attempt log.
        output_dialect: The schema dialect of its structured outputs ("gemini":
            `responseJsonSchema`, its documented keyword set).
        stream_markers: What the events that end its answers hold (for a watcher).
    """

    default_base_url = "https://generativelanguage.googleapis.com"
    default_name = "gemini"
    output_dialect: Dialect = "gemini"  # structured outputs: responseJsonSchema (_output_wire)
    stream_markers = (b"finishReason", b"usageMetadata", b'"error"')
    _reading = _State
    _batch_class = GeminiBatches

    # the API under base_url, where the models and the batches are: its version's root
    # (/v1beta unless it names one)
    _versions = ("/v1beta", "/v1", "/v1alpha")

    @property
    def model_id(self) -> str:
        """The model's id in the API's paths (`model` without a `models/` prefix)."""
        return self.model.removeprefix("models/")

    @property
    def url(self) -> str:
        """The model's `streamGenerateContent` endpoint (SSE), under `base_url`'s API version."""
        return f"{self.api_base}/models/{self.model_id}:streamGenerateContent?alt=sse"

    auth_header, auth_prefix = "x-goog-api-key", ""

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this wire format sends for `request` (the Generative Language API).

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            The body, before encoding: `contents` and `generationConfig`, with
            `systemInstruction` and `tools` where the request has them (the model is named in
            the `url`, not the body).
        """
        return build_gemini_body(self.model, request)

    def window(self) -> int:
        """The model's context window, for compacting before an overflow.

        Returns:
            Tokens: genai-prices' figure for the model, else Gemini's usual 1,048,576.
        """
        return context_window(self.name, self.model) or DEFAULT_WINDOW

    def whole_events(self, response: dict[str, Any]) -> WholeEvents:
        """A `GenerateContentResponse`: each streamed chunk is one already, so it is its own.

        Args:
            response: The whole `GenerateContentResponse`.

        Returns:
            One event: `response` itself.
        """
        return [("", response)]

    def _server_error(self, err: ServerError, body: dict[str, Any]) -> ProviderError:
        """A 500 for a request larger than the model's window is the window, not the server."""
        if err.status_code != 500:
            return err
        tokens, window = estimate_request_tokens(body), self.window()
        if tokens <= window:
            return err
        return ContextOverflow(
            f"the request (about {tokens} tokens) is larger than the model's {window}-token "
            f"window; Gemini answered 500: {err.message}",
            tokens=tokens,
            limit=window,
            provider=self.name,
            status_code=500,
            code=err.code,
            request_id=err.request_id,
            headers=err.headers,
        )
