"""The names nbagent's spans use: OpenTelemetry GenAI semantic conventions, v1.41.0.

v1.41.0 is the last release of the GenAI conventions published in
open-telemetry/semantic-conventions (docs/gen-ai/gen-ai-spans.md for the `chat` and
`execute_tool` spans, docs/gen-ai/gen-ai-agent-spans.md for the in-process `invoke_agent`
span). The conventions are still marked Development; the names are kept here, in one place,
so a move to a later release is one edit. Everything nbagent adds that the conventions have
no name for (attempt numbers, backoff waits, compaction) is under the `nbagent.` prefix.
"""

from __future__ import annotations

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# -- gen_ai.* and error.* (as published) ---------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
# opt-in content (capture_content=True only)
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"

# -- gen_ai.operation.name values ----------------------------------------------------------------
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# -- nbagent's own ---------------------------------------------------------------------------------
RUN_ID = "nbagent.run_id"
TURN = "nbagent.turn"
REASK = "nbagent.reask"  # a request's: 0 the first answer, 1, 2, ... the reasks (attempt log's)
TURNS = "nbagent.turns"
PHASE = "nbagent.phase"
ATTEMPT = "nbagent.attempt"
MAX_ATTEMPTS = "nbagent.max_attempts"
NEXT_ATTEMPT = "nbagent.next_attempt"
ACTION = "nbagent.action"
DELAY = "nbagent.delay_s"
POLICY_DELAY = "nbagent.policy_delay_s"
RETRY_AFTER = "nbagent.retry_after_s"
TTFT = "nbagent.ttft_s"
COST = "nbagent.cost_usd"
DISCARDED = "nbagent.discarded_chars"
END_REASON = "nbagent.end_reason"
TOOL_SOURCE = "nbagent.tool.source"
REASON = "nbagent.reason"
STRATEGY = "nbagent.compaction.strategy"
TOKENS_BEFORE = "nbagent.compaction.tokens_before"
TOKENS_AFTER = "nbagent.compaction.tokens_after"
REMOVED = "nbagent.compaction.removed_messages"
OK = "nbagent.ok"
FROM_MODEL = "nbagent.fallback.from_model"
TO_MODEL = "nbagent.fallback.to_model"
BUDGET_LIMIT = "nbagent.budget.limit"
BUDGET_ACTUAL = "nbagent.budget.actual"
BUDGET_LIMIT_VALUE = "nbagent.budget.limit_value"
MESSAGE = "nbagent.message"
OUTPUT_ERRORS = "nbagent.output.errors"  # what was wrong with a structured answer (a reask)

# span event names
EV_RETRY = "nbagent.retry_scheduled"
EV_PACED = "nbagent.paced_wait"
EV_COMPACTION_STARTED = "nbagent.compaction.started"
EV_COMPACTION_FINISHED = "nbagent.compaction.finished"
EV_FALLBACK = "nbagent.fallback"
EV_BUDGET = "nbagent.budget_warning"
EV_TOOLS_UNAVAILABLE = "nbagent.tool_source_unavailable"

# The model-string prefixes whose provider has a well-known `gen_ai.provider.name` value; any
# other prefix is used as it is (the conventions allow a custom value when none applies).
_WELL_KNOWN: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure": "azure.ai.openai",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
}


def provider_and_model(model: str) -> tuple[str, str]:
    """`gen_ai.provider.name` and `gen_ai.request.model` of an nbagent model string.

    "anthropic:claude-sonnet-4-0" -> ("anthropic", "claude-sonnet-4-0"); a model string with
    no prefix ("demo", the loopback demo model) is nbagent's own: ("nbagent", "demo").
    """
    prefix, sep, name = model.partition(":")
    if not sep:
        return "nbagent", model
    return _WELL_KNOWN.get(prefix, prefix), name
