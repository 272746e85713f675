"""Watching the SDK clients people already use: their hidden retries as nbagent's events.

`watch(client)` returns a copy of an anthropic, openai, google-genai or httpx client whose every
HTTP attempt passes a transport that reads it (`_transport`), groups it with the other attempts
of the same call and emits the agent's typed events (`_calls`), read with nbagent's own error
readers (`_reading`) and held against the SDK's documented retry rule (`_sdk`). An outer
layer's retries of a call are grouped with it (`_amplification`). `guard(client)` is a watched
copy whose transport decides and retries instead of the SDK (`_guard`, `_guarded`).
"""

from ._amplification import RetryAmplification
from ._guard import guard
from ._watcher import Watcher, watch, watching

__all__ = ["RetryAmplification", "Watcher", "guard", "watch", "watching"]
