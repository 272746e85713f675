"""OpenTelemetry tracing for every agent in the process: `nbagent.instrument()`.

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # Phoenix, Jaeger, ...
    tracing = nbagent.instrument(provider)
    ...
    tracing.uninstrument()

Spans follow the OpenTelemetry GenAI semantic conventions (v1.41.0; see `_semconv.py`): one
`invoke_agent` span per run, one `chat {model}` span per request attempt (retries are siblings,
so a trace viewer shows the same backoff timeline as the widget), one `execute_tool {name}` span
per tool call. The tracer is fed by `nbagent.events.subscribe_everywhere`: an agent knows nothing
about tracing, and nothing changes for a program that never calls `instrument()`. The
OpenTelemetry API is imported only here, on the first call, and is an optional extra
(`pip install nbagent-loop[otel]`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core._distribution import installed_version
from ..errors import ConfigError
from ..events import subscribe_everywhere

if TYPE_CHECKING:
    from ._spans import SpanRecorder

__all__ = ["Instrumentation", "instrument"]

_INSTALL = (
    "tracing needs the OpenTelemetry API, which is not installed: "
    "pip install 'nbagent-loop[otel]' (plus an SDK and exporter, e.g. opentelemetry-sdk)"
)

_lock = threading.Lock()
_active: Instrumentation | None = None


class Instrumentation:
    """What `instrument()` returns: tracing is on until `uninstrument()` (or the `with` ends).

    Args:
        recorder: What turns events into spans.
        unsubscribe: Stops the recorder's delivery of events.
    """

    def __init__(self, recorder: SpanRecorder, unsubscribe: Callable[[], None]) -> None:
        self._recorder = recorder
        self._unsubscribe: Callable[[], None] | None = unsubscribe

    @property
    def active(self) -> bool:
        """Whether tracing is on."""
        return self._unsubscribe is not None

    @property
    def capture_content(self) -> bool:
        """Whether message content goes into the spans."""
        return self._recorder.capture_content

    def uninstrument(self) -> None:
        """Stop tracing; spans of runs still going are ended now. Calling it twice is harmless."""
        global _active
        with _lock:
            if self._unsubscribe is None:
                return
            self._unsubscribe()
            self._unsubscribe = None
            if _active is self:
                _active = None
        self._recorder.close()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstrument()

    def __repr__(self) -> str:
        state = "on" if self.active else "off"
        content = ", with content" if self.capture_content else ""
        return f"<nbagent tracing {state}{content}>"


def instrument(tracer_provider: Any = None, *, capture_content: bool = False) -> Instrumentation:
    """Trace every agent in this process to `tracer_provider` (None: OpenTelemetry's global one).

    Message content (the prompt, the model's text, tool arguments and results) is recorded only
    with `capture_content=True`. Calling `instrument()` again replaces the earlier tracing (a
    notebook cell run twice does not trace every run twice). Returns the handle that turns it
    off: `.uninstrument()`, or use it as a context manager.

    Spans follow OpenTelemetry's GenAI semantic conventions: a span per run, per request
    attempt (with the retry waits as events) and per tool call.

    Args:
        tracer_provider: An OpenTelemetry `TracerProvider`; None for the global one.
        capture_content: Whether to record message content in the spans.

    Returns:
        The handle that turns tracing off.

    Raises:
        ConfigError: OpenTelemetry is not installed (`pip install nbagent-loop[otel]`), or the
            arguments are of the wrong kind.
    """
    global _active
    if not isinstance(capture_content, bool):
        raise ConfigError(f"capture_content= takes True or False, not {capture_content!r}")
    try:
        from opentelemetry import trace

        from ._semconv import SCHEMA_URL
        from ._spans import SpanRecorder
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "opentelemetry":
            raise
        raise ConfigError(_INSTALL) from exc
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise ConfigError(
            "instrument() takes an OpenTelemetry TracerProvider (or None for the global one), "
            f"not {type(tracer_provider).__name__}"
        )
    # the version is None in a source tree that was never installed
    tracer = trace.get_tracer(
        "nbagent", installed_version(), tracer_provider=tracer_provider, schema_url=SCHEMA_URL
    )
    recorder = SpanRecorder(tracer, capture_content=capture_content)
    with _lock:
        previous = _active
    if previous is not None:
        previous.uninstrument()
    handle = Instrumentation(recorder, subscribe_everywhere(recorder))
    with _lock:
        _active = handle
    return handle
