"""Helpers for the provider tests: recorded fixtures, MockTransport servers, a sentinel key."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml  # type: ignore[import-untyped]

from nbagent._core._messages import Message
from nbagent.providers import Completed, ModelRequest, StreamPart
from nbagent.providers._http import HTTPProvider
from nbagent.providers._openai_responses import ResponsesProvider
from nbagent.providers._whole_body import replay, whole_body


async def read_whole(provider: Any, body: Any) -> Any:
    """A whole answer read as a batch client reads it: its `Completed`, or its error."""
    return replay(provider, whole_body(provider, body))


def build_responses_body(
    model: str, request: ModelRequest, *, provider: str = "openai-responses"
) -> dict[str, Any]:
    """The body `ResponsesProvider` (named `provider`) sends for `request`."""
    return ResponsesProvider(model, api_key=None, name=provider).build_body(request)


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"
SENTINEL_KEY = "sk-SENTINEL-7f3a9c1e5b2d4680"
# Every variable a provider reads its key from: tests that set one clear the others.
KEY_ENVS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY",
)
SSE = {"content-type": "text/event-stream"}


def fixture_text(name: str) -> str:
    """A fixture file without its `# source:` first line."""
    raw = (FIXTURES / name).read_text(encoding="utf-8")
    first, _, rest = raw.partition("\n")
    assert first.startswith("# source:"), name
    return rest


def txtar_section(name: str, section: str) -> str:
    """The named `-- section --` of a txtar fixture."""
    out: list[str] = []
    inside = False
    for line in fixture_text(name).splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("-- ") and stripped.endswith(" --"):
            inside = stripped[3:-3] == section
            continue
        if inside:
            out.append(line)
    assert out, f"no section {section!r} in {name}"
    return "".join(out)


def raw_http(text: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a raw HTTP response as recorded in a txtar section."""
    head, _, body = text.lstrip().partition("\n\n")
    lines = head.splitlines()
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.lower() != "content-length":
            headers[k.strip()] = v.strip()
    return status, headers, body.strip().encode()


def vcr(name: str) -> dict[str, Any]:
    """The first interaction of a VCR cassette."""
    doc = yaml.safe_load(fixture_text(name))
    interaction: dict[str, Any] = doc["interactions"][0]
    return interaction


def vcr_body_string(name: str) -> str:
    body: str = vcr(name)["response"]["body"]["string"]
    return body


@dataclass
class Served:
    """What a MockTransport-backed exchange saw and produced."""

    requests: list[httpx.Request] = field(default_factory=list)
    parts: list[StreamPart] = field(default_factory=list)
    error: BaseException | None = None

    @property
    def completed(self) -> Completed:
        last = self.parts[-1]
        assert isinstance(last, Completed), self.error
        return last

    @property
    def body(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.requests[0].content)
        return data


Handler = Callable[[httpx.Request], httpx.Response]
P = TypeVar("P", bound=HTTPProvider)


def idle_timeout_on_first_answer(provider: P, seconds: float) -> P:
    """`provider`, with an idle timeout of `seconds` on its first answer only: every later
    answer keeps the timeout the provider was made with (60 s by default).

    For a test whose fault script stalls the first answer: only that answer can time out, so a
    busy machine, or a gateway in front of the server, passing on a later answer's chunks slowly
    cannot make the retried attempt time out too. What the test asserts then follows from the
    script, not from the machine's speed.
    """
    patient = provider.limits
    tight = dataclasses.replace(patient, idle_timeout=seconds)
    stream = provider.stream
    answers = 0

    async def first_one_tight(request: ModelRequest) -> AsyncIterator[StreamPart]:
        nonlocal answers
        answers += 1
        provider.limits = tight if answers == 1 else patient  # read when the request is sent
        async for part in stream(request):
            yield part

    provider.stream = first_one_tight  # type: ignore[method-assign]
    return provider


def respond(
    content: bytes | str = b"",
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    stream: httpx.AsyncByteStream | None = None,
) -> Handler:
    data = content.encode() if isinstance(content, str) else content

    def handler(request: httpx.Request) -> httpx.Response:
        h = dict(SSE if headers is None else headers)
        if stream is not None:
            return httpx.Response(status, headers=h, stream=stream)
        return httpx.Response(status, headers=h, content=data)

    return handler


def request(*messages: Message, **kw: Any) -> ModelRequest:
    return ModelRequest(messages or (Message.user("hi"),), **kw)


def run(
    make: Callable[[httpx.AsyncClient], HTTPProvider],
    handler: Handler,
    req: ModelRequest | None = None,
) -> Served:
    """Stream one request through `make(client)` against `handler`; errors land in `.error`."""
    served = Served()

    def record(r: httpx.Request) -> httpx.Response:
        served.requests.append(r)
        return handler(r)

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as client:
            provider = make(client)
            try:
                async for part in provider.stream(req or request()):
                    served.parts.append(part)
            except Exception as exc:
                served.error = exc
            finally:
                await provider.aclose()

    asyncio.run(main())
    return served


class Chunks(httpx.AsyncByteStream):
    """A response body sent chunk by chunk; an exception instance in the list is raised, a
    float is a pause in seconds."""

    def __init__(self, items: Iterable[bytes | float | BaseException]) -> None:
        self.items = list(items)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.items:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, float):
                await asyncio.sleep(item)
                continue
            yield item

    async def aclose(self) -> None:
        return None


def sse_event(data: dict[str, Any] | str, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def vcr_interaction(name: str, index: int = 0) -> dict[str, Any]:
    """One interaction of a VCR or go-vcr cassette."""
    doc = yaml.safe_load(fixture_text(name))
    interaction: dict[str, Any] = doc["interactions"][index]
    return interaction


def govcr_body(name: str, index: int = 0) -> str:
    """The response body of a go-vcr (version 2) interaction."""
    body: str = vcr_interaction(name, index)["response"]["body"]
    return body


def govcr_request(name: str, index: int = 0) -> dict[str, Any]:
    """The parsed JSON request body of a go-vcr interaction."""
    data: dict[str, Any] = json.loads(vcr_interaction(name, index)["request"]["body"])
    return data


def vcr_parsed_body(name: str) -> dict[str, Any]:
    """The `parsed_body` of a pydantic-ai cassette's first response."""
    body: dict[str, Any] = vcr(name)["response"]["parsed_body"]
    return body


def run_log_error(name: str) -> tuple[int, str]:
    """(status, body) of an error quoted in a Markdown run log: `**Error:** API error N: {...}`."""
    text = fixture_text(name)
    head, _, body = text.partition("**Error:** API error ")
    assert body, name
    status, _, rest = body.partition(": ")
    return int(status), rest.strip()


def json_lines_sse(name: str) -> str:
    """A fixture of one JSON event per line, framed as SSE (`event:` named by its type)."""
    out = []
    for line in fixture_text(name).splitlines():
        if line.strip():
            kind = json.loads(line)["type"]
            out.append(f"event: {kind}\ndata: {line}\n\n")
    return "".join(out)
