"""The wire path: spans of a real run, over real HTTP, through the OTLP/HTTP exporter.

A small OTLP receiver of our own listens on 127.0.0.1 (a free port), decodes each
`ExportTraceServiceRequest` (protobuf) and keeps it. The agent talks to the loopback mock server
with a real key; the key must appear nowhere in what was exported.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import nbagent
from nbagent import Agent, RetryPolicy
from nbagent.mock import MockServer
from nbagent.providers import AnthropicProvider

SECRET = "sk-ant-api03-NEVER-IN-A-SPAN-0123456789abcdef"


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf in, an empty response out."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.raw: list[bytes] = []
        self.content_types: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.raw.append(body)
        self.server.requests.append(request)
        self.server.content_types.append(self.headers.get("Content-Type", ""))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


@pytest.fixture
def mock() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


def test_spans_of_a_faulty_run_arrive_over_otlp_http_decoded_and_without_the_key(
    mock: MockServer,
) -> None:
    mock.set_faults(["503", "429:retry_after=0.05"])
    with Receiver() as receiver:
        provider = TracerProvider(resource=Resource.create({"service.name": "nbagent-test"}))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint, timeout=10))
        )
        agent = Agent(
            AnthropicProvider("demo", api_key=SECRET, base_url=mock.url),
            retry=RetryPolicy(initial_delay=0.01, max_delay=0.05, seed=1),
            limiter=False,
        )

        async def main() -> Any:
            async with agent:
                return await agent.run("Tell me about backoff.", show=False)

        with nbagent.instrument(provider):
            result = asyncio.run(main())
        provider.force_flush(10_000)
        provider.shutdown()

    assert receiver.requests, "nothing reached the receiver"
    assert set(receiver.content_types) == {"application/x-protobuf"}
    assert all(SECRET.encode() not in raw for raw in receiver.raw)
    spans: list[tuple[Any, Any, dict[str, Any]]] = []
    for req in receiver.requests:
        for rs in req.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            assert resource["service.name"] == "nbagent-test"
            for ss in rs.scope_spans:
                assert ss.scope.name == "nbagent"
                assert ss.schema_url == "https://opentelemetry.io/schemas/1.41.0"
                for s in ss.spans:
                    spans.append((s, ss.scope, {a.key: value(a.value) for a in s.attributes}))
    (root,) = [s for s, _, a in spans if a.get("nbagent.run_id") == result.run_id]
    chats = sorted(
        ((s, a) for s, _, a in spans if s.parent_span_id == root.span_id),
        key=lambda sa: sa[0].start_time_unix_nano,
    )
    assert root.name == "invoke_agent" and not root.parent_span_id
    assert [s.name for s, _ in chats] == ["chat demo"] * 3
    assert [a.get("error.type") for _, a in chats] == ["ServerError", "RateLimited", None]
    assert [a.get("http.response.status_code") for _, a in chats] == [503, 429, 200]
    assert all(s.trace_id == root.trace_id for s, _ in chats)
    (wait,) = chats[1][0].events
    wait_attrs = {a.key: value(a.value) for a in wait.attributes}
    assert wait.name == "nbagent.retry_scheduled" and wait_attrs["nbagent.retry_after_s"] == 0.05
    ok = chats[2][1]
    assert ok["gen_ai.provider.name"] == "anthropic" and ok["gen_ai.request.model"] == "demo"
    assert ok["gen_ai.usage.output_tokens"] > 0 and ok["gen_ai.response.finish_reasons"]
    # a failed attempt is known by the request id the mock sent back; the reply by its own id
    ids = [a.get("gen_ai.response.id") for _, a in chats]
    assert ids[:2] == [r.request_id for r in mock.requests][:2]
    assert ids[2].startswith("msg_") and ids[2] != mock.requests[2].request_id
