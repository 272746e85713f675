"""A scripted run, as events, for the timeline widget's tests and screenshot.

One run on the agent's clock (starting at 100 s): a 503 with a partly streamed reply that is
discarded and retried after a 2.4 s backoff, two parallel tool calls (one fails), a context
overflow that is compacted, a 429 whose Retry-After is honoured, and a final answer.
`live_events()` stops during the Retry-After wait, `run_events()` goes to the end.
"""

from __future__ import annotations

from nbagent._core._budget import Usage
from nbagent._core._messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    CompactionFinished,
    CompactionStarted,
    Event,
    MessageCommitted,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

RUN = "run-1"
PROMPT = "Summarise notes.txt and list what else is in the folder."
TOOL_ERROR = "Tool execution failed for `read_file`: FileNotFoundError: notes.txt"
FINAL = "There is no notes.txt here; the folder holds README.md and data.csv."
# what the widget's live region says over run_events(), once each
ANNOUNCED = [
    "provider unavailable: waiting 2.4 s (backoff) before attempt 2 of 4",
    "tool `read_file` returned an error",
    "compacted 48,210 → 12,400 tokens",
    "rate limit: waiting for the server's Retry-After of 2 s",
    "finished",
]


def _deltas(text: str, start: float, step: float, *, turn: int, attempt: int) -> list[Event]:
    words = text.split(" ")
    return [
        TextDelta(
            run_id=RUN,
            time=start + i * step,
            turn=turn,
            attempt=attempt,
            text=w if i == 0 else " " + w,
        )
        for i, w in enumerate(words)
    ]


def live_events() -> list[Event]:
    m = "demo"
    assistant = Message(
        "assistant",
        (
            TextBlock("I'll read the file and list the folder."),
            ToolUseBlock("c1", "read_file", {"path": "notes.txt"}),
            ToolUseBlock("c2", "list_dir", {"path": "."}),
        ),
    )
    results = Message(
        "user",
        (
            ToolResultBlock("c1", (TextBlock(TOOL_ERROR),), is_error=True),
            ToolResultBlock("c2", (TextBlock("README.md\ndata.csv"),)),
        ),
    )
    return [
        RunStarted(run_id=RUN, time=100.0, prompt=PROMPT, model=m),
        MessageCommitted(run_id=RUN, time=100.0, message=Message.user(PROMPT), index=0),
        AttemptStarted(
            phase="request", run_id=RUN, time=100.0, turn=1, attempt=1, max_attempts=4, model=m
        ),
        TextDelta(attempt=1, run_id=RUN, time=100.3, turn=1, text="Hel"),
        AttemptFailed(
            phase="request",
            run_id=RUN,
            time=100.5,
            turn=1,
            attempt=1,
            max_attempts=4,
            model=m,
            action="retry",
            error="ServerError",
            status_code=503,
            message="Service Unavailable",
            discarded_text="Hel",
        ),
        RetryScheduled(
            phase="request",
            message="",
            run_id=RUN,
            time=100.5,
            turn=1,
            attempt=1,
            next_attempt=2,
            max_attempts=4,
            delay_s=2.4,
            policy_delay_s=2.4,
            error="ServerError",
            status_code=503,
            discarded_text="Hel",
            model=m,
        ),
        AttemptStarted(
            phase="request", run_id=RUN, time=102.9, turn=1, attempt=2, max_attempts=4, model=m
        ),
        *_deltas("I'll read the file and list the folder.", 103.1, 0.05, turn=1, attempt=2),
        AttemptSucceeded(
            phase="request",
            run_id=RUN,
            time=103.6,
            turn=1,
            attempt=2,
            max_attempts=4,
            model=m,
            input_tokens=1_200,
            output_tokens=45,
            cost_usd=0.0,
            stop_reason="tool_use",
        ),
        MessageCommitted(run_id=RUN, time=103.6, turn=1, message=assistant, index=1),
        ToolCallStarted(
            run_id=RUN,
            time=103.6,
            turn=1,
            call_id="c1",
            name="read_file",
            arguments={"path": "notes.txt"},
        ),
        ToolCallStarted(
            run_id=RUN, time=103.6, turn=1, call_id="c2", name="list_dir", arguments={"path": "."}
        ),
        ToolCallFinished(
            is_error=False,
            run_id=RUN,
            time=104.0,
            turn=1,
            call_id="c2",
            name="list_dir",
            content="README.md\ndata.csv",
            duration_s=0.4,
        ),
        ToolCallFinished(
            run_id=RUN,
            time=104.4,
            turn=1,
            call_id="c1",
            name="read_file",
            is_error=True,
            content=TOOL_ERROR,
            error="raised",
            duration_s=0.8,
        ),
        MessageCommitted(run_id=RUN, time=104.4, turn=1, message=results, index=2),
        AttemptStarted(
            phase="request", run_id=RUN, time=104.4, turn=2, attempt=1, max_attempts=4, model=m
        ),
        AttemptFailed(
            phase="request",
            run_id=RUN,
            time=104.7,
            turn=2,
            attempt=1,
            max_attempts=4,
            model=m,
            action="compact",
            error="ContextOverflow",
            status_code=400,
            message="prompt is too long: 48210 tokens > 32000 maximum",
        ),
        CompactionStarted(
            reason="overflow",
            run_id=RUN,
            time=104.7,
            turn=2,
            tokens_before=48_210,
            strategy="summarise",
        ),
        AttemptStarted(
            run_id=RUN, time=104.7, turn=2, phase="compaction", attempt=1, max_attempts=2, model=m
        ),
        AttemptSucceeded(
            run_id=RUN,
            time=106.0,
            turn=2,
            phase="compaction",
            attempt=1,
            max_attempts=2,
            model=m,
            input_tokens=30_000,
            output_tokens=800,
        ),
        CompactionFinished(
            ok=True,
            run_id=RUN,
            time=106.1,
            turn=2,
            tokens_before=48_210,
            tokens_after=12_400,
            strategy="summarise",
            removed=6,
        ),
        AttemptStarted(
            phase="request", run_id=RUN, time=106.1, turn=2, attempt=1, max_attempts=4, model=m
        ),
        AttemptFailed(
            phase="request",
            run_id=RUN,
            time=106.4,
            turn=2,
            attempt=1,
            max_attempts=4,
            model=m,
            action="retry",
            error="RateLimited",
            status_code=429,
            retry_after_s=2.0,
            message="rate_limit_error: 50 requests per minute",
        ),
        RetryScheduled(
            phase="request",
            message="",
            run_id=RUN,
            time=106.4,
            turn=2,
            attempt=1,
            next_attempt=2,
            max_attempts=4,
            delay_s=2.0,
            policy_delay_s=0.5,
            retry_after_s=2.0,
            error="RateLimited",
            status_code=429,
            model=m,
        ),
    ]


def run_events() -> list[Event]:
    m = "demo"
    return [
        *live_events(),
        AttemptStarted(
            phase="request", run_id=RUN, time=108.4, turn=2, attempt=2, max_attempts=4, model=m
        ),
        *_deltas(FINAL, 108.7, 0.06, turn=2, attempt=2),
        AttemptSucceeded(
            phase="request",
            run_id=RUN,
            time=109.6,
            turn=2,
            attempt=2,
            max_attempts=4,
            model=m,
            input_tokens=12_900,
            output_tokens=38,
            cost_usd=0.0,
            stop_reason="end_turn",
        ),
        MessageCommitted(run_id=RUN, time=109.6, turn=2, message=Message.assistant(FINAL), index=3),
        RunFinished(
            run_id=RUN,
            time=109.6,
            turn=2,
            end_reason="end_turn",
            usage=Usage(14_100, 83, cost_usd=0.0, requests=4),
            final_text=FINAL,
            model=m,
        ),
    ]
