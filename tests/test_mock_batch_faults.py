"""Faults aimed at the mock's batch endpoints (``create:429``, ``create:lost``, ``results:cut``,
``retrieve:503``, ...): their grammar, their place in the plan, and what a client meets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mock_support import BatchClock
from test_mock_batches import anthropic_requests, gemini_body, jsonl, openai_batch, upload

from nbagent.mock import Fault, FaultPlan, MockServer, parse_fault, parse_faults
from nbagent.mock._cli import build_parser, main, split_faults

pytestmark = pytest.mark.e2e


@pytest.fixture
def clock() -> BatchClock:
    return BatchClock()


@pytest.fixture
def server(clock: BatchClock) -> Iterator[MockServer]:
    with MockServer(batch_duration_s=1.0, batch_clock=clock) as mock:
        yield mock


@pytest.fixture
def client(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def create_anthropic(client: httpx.Client, n: int = 3) -> httpx.Response:
    return client.post("/v1/messages/batches", json={"requests": anthropic_requests(n)})


# --- grammar and plan ---------------------------------------------------------------------------


def test_a_target_prefix_aims_a_fault_at_an_endpoint() -> None:
    faults = parse_faults(
        ["create:429:retry_after=2", "create:lost", "results:cut", "retrieve:stall=0.5",
         "cancel:503:should_retry=false", "create:failed", "invalid", "overloaded"]
    )  # fmt: skip
    assert faults[0] == Fault("429", retry_after_s=2.0, target="create")
    assert faults[1] == Fault("lost", target="create")
    assert faults[3] == Fault("stall", seconds=0.5, target="retrieve")
    assert faults[4].status == 503 and faults[4].should_retry is False
    assert faults[6] == Fault("400") and faults[7] == Fault("529")  # the aliases
    assert [str(f) for f in faults[:5]] == [
        "create:429:retry_after=2", "create:lost", "results:cut", "retrieve:stall=0.5",
        "cancel:503:should_retry=false",
    ]  # fmt: skip
    assert parse_fault(str(faults[5])) == faults[5]


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("cut", "aim it at one, as in results:cut"),
        ("lost", "as in create:lost"),
        ("create:cut", "for results or retrieve, not create"),
        ("results:drop_after_tokens=3", "cannot be aimed at the results endpoint"),
        ("retrieve:overflow", "cannot be aimed at the retrieve endpoint"),
        ("cancel:failed", "so it is for create"),
        ("create:teapot", "cannot be aimed at the create endpoint"),
        ("create:lost=2", "takes no '=value'"),
    ],
)
def test_endpoint_faults_refused_in_one_sentence(entry: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fault(entry)
    message = str(info.value)
    assert repr(entry) in message and fragment in message
    assert message.count(". ") == 0 and message.endswith(".")


def test_targeted_entries_wait_for_their_endpoint() -> None:
    plan = FaultPlan(["create:429", "500", "results:cut", "ok", "create:lost"])
    assert str(plan.next()) == "500"
    assert str(plan.next("retrieve")) == "ok"  # nothing aimed at retrieve
    assert str(plan.next("create")) == "create:429:retry_after=1"
    assert str(plan.next()) == "ok" and plan.remaining == 2
    assert str(plan.next("create")) == "create:lost"
    assert str(plan.next("results")) == "results:cut" and plan.remaining == 0
    assert str(plan.next()) == "ok"


def test_fault_rates_are_per_target() -> None:
    plan = FaultPlan(fault_rates={"retrieve:500": 1.0, "503": 1.0}, seed=1)
    assert str(plan.next("retrieve")) == "retrieve:500" and str(plan.next()) == "503"
    assert str(plan.next("create")) == "ok"
    with pytest.raises(ValueError, match="aimed at retrieve add up to 1.5"):
        FaultPlan(fault_rates={"retrieve:500": 1.0, "retrieve:429": 0.5})


def test_cli_script_and_batch_flags() -> None:
    assert split_faults(["create:429:retry_after=2,should_retry=false results:cut"]) == [
        "create:429:retry_after=2,should_retry=false",
        "results:cut",
    ]
    args = build_parser().parse_args(["--batch-duration", "0.5", "--expire-after", "3"])
    assert args.batch_duration == 0.5 and args.expire_after == 3.0


def test_cli_refuses_a_negative_batch_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--batch-duration", "-1"]) == 2
    err = capsys.readouterr().err
    assert "batch_duration_s must be a number of seconds" in err and "Traceback" not in err


# --- over HTTP ----------------------------------------------------------------------------------


def test_create_429_refuses_and_makes_nothing(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["create:429:retry_after=3", "create:429", "create:429"])
    r = create_anthropic(client)
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    assert r.json()["error"]["type"] == "rate_limit_error"
    file = upload(client, b'{"custom_id":"a","method":"POST","url":"/v1/chat/completions",'
                  b'"body":{"model":"demo","messages":[{"role":"user","content":"x"}]}}\n')  # fmt: skip
    o = client.post(
        "/v1/batches",
        json={"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
              "completion_window": "24h"},
    )  # fmt: skip
    assert o.status_code == 429 and o.json()["error"]["code"] == "rate_limit_exceeded"
    g = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(1))
    assert g.status_code == 429 and g.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    details = {d["@type"].rsplit(".", 1)[1] for d in g.json()["error"]["details"]}
    assert "RetryInfo" in details  # Gemini says its wait in the body
    counts = server.batch_counts
    assert counts.create_requests == {"anthropic": 1, "openai": 1, "gemini": 1}
    assert counts.batches_created == {} and server.plan.remaining == 0
    assert create_anthropic(client).status_code == 200


def test_a_lost_create_made_the_batch_its_caller_never_heard_of(
    server: MockServer, client: httpx.Client
) -> None:
    server.set_faults(["create:lost"])
    with pytest.raises(httpx.TransportError):
        create_anthropic(client)
    assert server.batch_counts.batches_created == {"anthropic": 1}
    listed = client.get("/v1/messages/batches").json()["data"]
    assert [b["id"] for b in listed] == [server.batches[0].id]  # found by listing: adoptable
    assert server.requests[-2].status == 0  # recorded as answered with nothing


def test_a_lost_upload_and_a_lost_cancel_still_happened(
    server: MockServer, client: httpx.Client
) -> None:
    server.set_faults(["upload:lost", "cancel:lost"])
    with pytest.raises(httpx.TransportError):
        client.post("/v1/files", files={"file": ("in.jsonl", b"{}")}, data={"purpose": "batch"})
    assert len(client.get("/v1/files").json()["data"]) == 1
    batch = create_anthropic(client).json()
    with pytest.raises(httpx.TransportError):
        client.post(f"/v1/messages/batches/{batch['id']}/cancel")
    now = client.get(f"/v1/messages/batches/{batch['id']}").json()
    assert now["processing_status"] == "canceling"


def test_close_on_create_makes_nothing(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["create:close"])
    with pytest.raises(httpx.TransportError):
        create_anthropic(client)
    assert server.batch_counts.batches_created == {}
    assert server.batch_counts.create_requests == {"anthropic": 1}


def test_a_results_download_cut_half_way(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["results:cut"])
    batch = create_anthropic(client, 10).json()
    clock.advance(1.0)
    got = b""
    path = f"/v1/messages/batches/{batch['id']}/results"
    with pytest.raises(httpx.RemoteProtocolError), client.stream("GET", path) as r:
        assert r.status_code == 200
        for chunk in r.iter_bytes():
            got += chunk
    whole = client.get(f"/v1/messages/batches/{batch['id']}/results").content
    assert len(jsonl(whole)) == 10
    assert got and whole.startswith(got) and not got.endswith(b"\n")  # cut inside a line


def test_an_openai_content_download_cut(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    batch = openai_batch(client, 6)
    clock.advance(1.0)
    output = client.get(f"/v1/batches/{batch['id']}").json()["output_file_id"]
    server.set_faults(["results:cut"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(f"/v1/files/{output}/content")
    assert len(jsonl(client.get(f"/v1/files/{output}/content").content)) == 6


def test_retrieve_faults_then_the_next_retrieve_answers(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    batch = create_anthropic(client).json()
    server.set_faults(["retrieve:503", "retrieve:malformed", "retrieve:slow=0.05"])
    path = f"/v1/messages/batches/{batch['id']}"
    first = client.get(path)
    assert first.status_code == 503 and first.json()["error"]["type"] == "api_error"
    broken = client.get(path)
    assert broken.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        broken.json()
    assert client.get(path).json()["id"] == batch["id"]
    assert client.get(path).json()["id"] == batch["id"]
    assert [r.fault for r in server.requests[-4:]] == [
        "retrieve:503", "retrieve:malformed", "retrieve:slow=0.05", "ok"
    ]  # fmt: skip


def test_a_gemini_retrieve_cut_in_its_inline_responses(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    op = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(6)).json()
    clock.advance(1.0)
    server.set_faults(["retrieve:cut", "retrieve:stall=0.01"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(f"/v1beta/{op['name']}")
    stalled = client.get(f"/v1beta/{op['name']}").json()
    assert len(stalled["response"]["inlinedResponses"]["inlinedResponses"]) == 6


def test_list_and_cancel_and_delete_faults(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    batch = create_anthropic(client).json()
    server.set_faults(["list:500", "cancel:429", "delete:404"])
    assert client.get("/v1/messages/batches").status_code == 500
    assert client.post(f"/v1/messages/batches/{batch['id']}/cancel").status_code == 429
    assert client.get(f"/v1/messages/batches/{batch['id']}").json()["cancel_initiated_at"] is None
    clock.advance(1.0)
    assert client.delete(f"/v1/messages/batches/{batch['id']}").status_code == 404
    assert not server.batch(batch["id"]).deleted


def test_should_retry_header_on_an_endpoint_fault(server: MockServer, client: httpx.Client) -> None:
    server.set_faults(["create:503:should_retry=false"])
    r = create_anthropic(client)
    assert r.status_code == 503 and r.headers["x-should-retry"] == "false"


def test_item_faults_and_endpoint_faults_in_one_script(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    script: list[Any] = ["create:429", "500", "ok", "results:cut"]
    server.set_faults(script)
    assert create_anthropic(client, 2).status_code == 429
    batch = create_anthropic(client, 2).json()
    clock.advance(1.0)
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(f"/v1/messages/batches/{batch['id']}/results")
    results = jsonl(client.get(f"/v1/messages/batches/{batch['id']}/results").content)
    kinds = {x["custom_id"]: x["result"]["type"] for x in results}
    assert kinds == {"r0": "errored", "r1": "succeeded"}
