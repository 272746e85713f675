"""The mock's provider batch APIs over real HTTP, read by a plain client: the three wire shapes
(checked against the fixtures in tests/fixtures/batches), the timeline on an injected batch
clock, partial failures, expiry, cancel, every-line-failed, and the counters a test asserts on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from mock_support import BatchClock, assert_shape, batch_fixture

from nbagent.mock import MockServer

pytestmark = pytest.mark.e2e

DURATION = 10.0  # of the batch clock; tests move it by hand


@pytest.fixture
def clock() -> BatchClock:
    return BatchClock()


@pytest.fixture
def server(clock: BatchClock) -> Iterator[MockServer]:
    with MockServer(batch_duration_s=DURATION, batch_clock=clock) as mock:
        yield mock


@pytest.fixture
def client(server: MockServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def anthropic_requests(n: int, prefix: str = "r") -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"{prefix}{i}",
            "params": {
                "model": "demo",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": f"Describe item {i}."}],
            },
        }
        for i in range(n)
    ]


def openai_lines(n: int, endpoint: str = "/v1/chat/completions", model: str = "demo") -> bytes:
    def body(i: int) -> dict[str, Any]:
        if endpoint.endswith("/responses"):
            return {"model": model, "input": f"Describe item {i}."}
        return {"model": model, "messages": [{"role": "user", "content": f"Describe item {i}."}]}

    lines = [
        {"custom_id": f"o{i}", "method": "POST", "url": endpoint, "body": body(i)} for i in range(n)
    ]
    return "\n".join(json.dumps(line) for line in lines).encode() + b"\n"


def upload(client: httpx.Client, data: bytes, prefix: str = "/v1") -> dict[str, Any]:
    r = client.post(
        f"{prefix}/files", files={"file": ("input.jsonl", data)}, data={"purpose": "batch"}
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def openai_batch(
    client: httpx.Client, n: int, *, prefix: str = "/v1", **extra: Any
) -> dict[str, Any]:
    endpoint = extra.pop("endpoint", "/v1/chat/completions")
    file = upload(client, openai_lines(n, endpoint), prefix)
    body = {"input_file_id": file["id"], "endpoint": endpoint, "completion_window": "24h"}
    r = client.post(f"{prefix}/batches", json={**body, **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def gemini_body(n: int, display: str = "nbagent-test") -> dict[str, Any]:
    requests = [
        {
            "request": {"contents": [{"role": "user", "parts": [{"text": f"Describe item {i}."}]}]},
            "metadata": {"key": f"k{i}"},
        }
        for i in range(n)
    ]
    return {"batch": {"displayName": display, "inputConfig": {"requests": {"requests": requests}}}}


def seconds(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def jsonl(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


# --- Anthropic ----------------------------------------------------------------------------------


def test_anthropic_batch_keeps_every_item_processing_until_it_ends(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    r = client.post("/v1/messages/batches", json={"requests": anthropic_requests(4)})
    assert r.status_code == 200 and r.headers["request-id"].startswith("req_")
    batch = r.json()
    (fixture,) = batch_fixture("anthropic-message-batch.json")
    assert_shape(fixture, batch)
    assert batch["id"].startswith("msgbatch_") and batch["processing_status"] == "in_progress"
    assert batch["request_counts"] == {
        "processing": 4, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0
    }  # fmt: skip

    clock.advance(0.6 * DURATION)  # most items have ended, but the reference says "processing"
    mid = client.get(f"/v1/messages/batches/{batch['id']}").json()
    assert mid["processing_status"] == "in_progress" and mid["request_counts"]["processing"] == 4

    clock.advance(0.4 * DURATION)
    done = client.get(f"/v1/messages/batches/{batch['id']}").json()
    assert_shape(fixture, done, nullable=frozenset({"ended_at", "results_url"}))
    assert done["processing_status"] == "ended"
    assert done["request_counts"]["succeeded"] == 4 and done["request_counts"]["processing"] == 0
    assert done["results_url"] == f"{server.url}/v1/messages/batches/{batch['id']}/results"
    assert done["created_at"].endswith("Z") and done["ended_at"] > done["created_at"]


def test_anthropic_results_carry_each_items_fault_out_of_request_order(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["ok", "500", "invalid", "ok", "overloaded", "quota"])
    batch = client.post("/v1/messages/batches", json={"requests": anthropic_requests(6)}).json()
    assert client.get(f"/v1/messages/batches/{batch['id']}/results").status_code == 400
    clock.advance(DURATION)
    r = client.get(f"/v1/messages/batches/{batch['id']}/results")
    assert r.status_code == 200
    lines = jsonl(r.content)
    ids = [line["custom_id"] for line in lines]
    assert sorted(ids) == [f"r{i}" for i in range(6)] and ids != sorted(ids)
    by_id = {line["custom_id"]: line["result"] for line in lines}
    fixtures = {
        line["result"]["type"]: line for line in batch_fixture("anthropic-batch-results.jsonl")
    }
    for line in lines:
        assert_shape(fixtures[line["result"]["type"]], line, depth=3)
    assert by_id["r0"]["type"] == by_id["r3"]["type"] == "succeeded"
    message = by_id["r0"]["message"]
    assert message["type"] == "message" and message["content"][0]["text"]
    assert message["usage"]["output_tokens"] > 0
    errors = {k: v["error"]["error"] for k, v in by_id.items() if v["type"] == "errored"}
    assert errors["r1"]["type"] == "api_error"
    assert errors["r2"]["type"] == "invalid_request_error"
    assert errors["r4"]["type"] == "overloaded_error"
    assert errors["r5"]["type"] == "invalid_request_error"
    assert "credit balance is too low" in errors["r5"]["message"]
    counts = client.get(f"/v1/messages/batches/{batch['id']}").json()["request_counts"]
    assert counts["succeeded"] == 2 and counts["errored"] == 4
    again = jsonl(client.get(f"/v1/messages/batches/{batch['id']}/results").content)
    assert again == lines  # a second download says the same, ids included


def test_anthropic_item_the_wire_format_refuses_is_errored_not_the_batch(
    client: httpx.Client, clock: BatchClock
) -> None:
    requests = anthropic_requests(2)
    requests[1]["params"]["messages"] = "not a list"
    batch = client.post("/v1/messages/batches", json={"requests": requests}).json()
    clock.advance(DURATION)
    results = {x["custom_id"]: x["result"] for x in jsonl(
        client.get(f"/v1/messages/batches/{batch['id']}/results").content
    )}  # fmt: skip
    assert results["r0"]["type"] == "succeeded"
    assert results["r1"]["type"] == "errored"
    assert results["r1"]["error"]["error"]["type"] == "invalid_request_error"
    assert "messages" in results["r1"]["error"]["error"]["message"]


def test_anthropic_expiry_keeps_what_had_ended(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.expire_after_s = 0.5 * DURATION
    batch = client.post("/v1/messages/batches", json={"requests": anthropic_requests(10)}).json()
    assert seconds(batch["expires_at"]) - seconds(batch["created_at"]) == 0.5 * DURATION
    clock.advance(0.45 * DURATION)
    assert client.get(f"/v1/messages/batches/{batch['id']}").json()["processing_status"] == (
        "in_progress"
    )
    clock.advance(0.1 * DURATION)
    ended = client.get(f"/v1/messages/batches/{batch['id']}").json()
    counts = ended["request_counts"]
    assert ended["processing_status"] == "ended" and ended["ended_at"] == ended["expires_at"]
    assert 0 < counts["succeeded"] < 10 and counts["succeeded"] + counts["expired"] == 10
    results = jsonl(client.get(f"/v1/messages/batches/{batch['id']}/results").content)
    kinds = [line["result"]["type"] for line in results]
    assert kinds.count("expired") == counts["expired"] and len(results) == 10


def test_a_seeded_server_expires_the_same_items_every_run() -> None:
    # a notebook's story ("these items finished, those expired") holds on every run: which
    # items end before the expiry follows from the seed, not from the batch's random id
    def expired(seed: int | None) -> set[str]:
        clock = BatchClock()
        with (
            MockServer(batch_duration_s=DURATION, batch_clock=clock, seed=seed) as mock,
            httpx.Client(base_url=mock.url, timeout=10) as client,
        ):
            mock.expire_after_s = 0.5 * DURATION
            batch = client.post(
                "/v1/messages/batches", json={"requests": anthropic_requests(40)}
            ).json()
            clock.advance(DURATION)
            results = jsonl(client.get(f"/v1/messages/batches/{batch['id']}/results").content)
        return {r["custom_id"] for r in results if r["result"]["type"] == "expired"}

    first = expired(seed=13)
    assert 0 < len(first) < 40
    assert expired(seed=13) == first
    assert expired(seed=14) != first  # another seed, another order


def test_anthropic_cancel_settles_and_keeps_finished_items(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    batch = client.post("/v1/messages/batches", json={"requests": anthropic_requests(10)}).json()
    clock.advance(0.5 * DURATION)
    canceling = client.post(f"/v1/messages/batches/{batch['id']}/cancel").json()
    assert canceling["processing_status"] == "canceling"  # one l, as Anthropic spells it
    assert canceling["cancel_initiated_at"] is not None and canceling["results_url"] is None
    clock.advance(0.1 * DURATION)
    ended = client.get(f"/v1/messages/batches/{batch['id']}").json()
    counts = ended["request_counts"]
    assert ended["processing_status"] == "ended"
    assert counts["canceled"] > 0 and counts["succeeded"] > 0
    assert counts["canceled"] + counts["succeeded"] == 10
    kinds = [x["result"]["type"] for x in jsonl(client.get(ended["results_url"]).content)]
    assert kinds.count("canceled") == counts["canceled"]
    assert server.batch(batch["id"]).cancel_requested
    again = client.post(f"/v1/messages/batches/{batch['id']}/cancel").json()
    assert again["processing_status"] == "ended"  # an ended batch stays as it ended


def test_anthropic_list_pages_newest_first(client: httpx.Client) -> None:
    made = [
        client.post("/v1/messages/batches", json={"requests": anthropic_requests(1)}).json()["id"]
        for _ in range(5)
    ]
    first = client.get("/v1/messages/batches", params={"limit": 2}).json()
    assert [b["id"] for b in first["data"]] == made[::-1][:2] and first["has_more"]
    assert first["first_id"] == made[4] and first["last_id"] == made[3]
    second = client.get(
        "/v1/messages/batches", params={"limit": 2, "after_id": first["last_id"]}
    ).json()
    assert [b["id"] for b in second["data"]] == [made[2], made[1]] and second["has_more"]
    last = client.get("/v1/messages/batches", params={"after_id": made[1]}).json()
    assert [b["id"] for b in last["data"]] == [made[0]] and not last["has_more"]
    back = client.get("/v1/messages/batches", params={"limit": 2, "before_id": made[1]}).json()
    assert [b["id"] for b in back["data"]] == [made[3], made[2]] and back["has_more"]
    r = client.get("/v1/messages/batches", params={"limit": 0})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_anthropic_delete_only_once_ended(client: httpx.Client, clock: BatchClock) -> None:
    batch = client.post("/v1/messages/batches", json={"requests": anthropic_requests(2)}).json()
    r = client.delete(f"/v1/messages/batches/{batch['id']}")
    assert r.status_code == 400 and "cancel" in r.json()["error"]["message"]
    clock.advance(DURATION)
    r = client.delete(f"/v1/messages/batches/{batch['id']}")
    assert r.json() == {"id": batch["id"], "type": "message_batch_deleted"}
    gone = client.get(f"/v1/messages/batches/{batch['id']}")
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "not_found_error"
    assert client.get("/v1/messages/batches").json()["data"] == []


@pytest.mark.parametrize(
    ("requests", "fragment"),
    [
        ([], "requests"),
        ([{"custom_id": "has space", "params": {}}], "custom_id"),
        ([{"custom_id": "a", "params": {}}, {"custom_id": "a", "params": {}}], "Duplicate"),
        ([{"custom_id": "a"}], "params"),
    ],
)
def test_anthropic_create_refuses_a_malformed_batch_and_draws_no_faults(
    server: MockServer, client: httpx.Client, requests: list[Any], fragment: str
) -> None:
    server.set_faults(["500"])
    r = client.post("/v1/messages/batches", json={"requests": requests})
    assert r.status_code == 400 and fragment in r.json()["error"]["message"]
    assert server.batch_counts.batches_created == {}
    assert server.plan.remaining == 1  # the refused batch took no item's fault


# --- OpenAI -------------------------------------------------------------------------------------


def test_openai_batch_moves_through_its_statuses_with_counts(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    data = openai_lines(10)
    file = upload(client, data)
    (file_fixture,) = batch_fixture("openai-file.json")
    assert_shape(file_fixture, file)
    assert file["bytes"] == len(data) and file["purpose"] == "batch"
    assert client.get(f"/v1/files/{file['id']}/content").content == data
    body = {
        "input_file_id": file["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"nbagent": "tag-1"},
    }
    batch = client.post("/v1/batches", json=body).json()
    (fixture,) = batch_fixture("openai-batch.json")
    times = {"in_progress_at", "finalizing_at", "completed_at", "output_file_id", "error_file_id"}
    free = frozenset({"metadata"})
    assert_shape(fixture, batch, nullable=frozenset({*times, "model", "usage"}), free=free)
    assert batch["status"] == "validating" and batch["request_counts"]["total"] == 0
    assert batch["metadata"] == {"nbagent": "tag-1"} and batch["model"] == "demo"

    seen = []
    for _ in range(10):
        clock.advance(0.1 * DURATION)
        now = client.get(f"/v1/batches/{batch['id']}").json()
        seen.append((now["status"], now["request_counts"]["completed"]))
    statuses = [status for status, _ in seen]
    assert statuses[0] == "in_progress" and "finalizing" in statuses and statuses[-1] == "completed"
    progress = [done for status, done in seen if status == "in_progress"]
    assert progress == sorted(progress) and 0 < progress[len(progress) // 2] < 10
    done = client.get(f"/v1/batches/{batch['id']}").json()
    nullable = frozenset({"error_file_id", "usage", "output_file_id"})
    assert_shape(fixture, done, nullable=nullable, free=free)
    assert done["request_counts"] == {"total": 10, "completed": 10, "failed": 0}
    assert done["error_file_id"] is None
    output = client.get(f"/v1/files/{done['output_file_id']}/content")
    lines = jsonl(output.content)
    answered = batch_fixture("openai-batch-lines.jsonl")[0]
    for line in lines:
        assert_shape(answered, line, depth=3)
        assert line["response"]["body"]["object"] == "chat.completion"
    ids = [line["custom_id"] for line in lines]
    assert sorted(ids) == sorted(f"o{i}" for i in range(10)) and ids != sorted(ids)
    meta = client.get(f"/v1/files/{done['output_file_id']}").json()
    assert meta["bytes"] == len(output.content) and meta["purpose"] == "batch_output"


def test_openai_every_line_failed_is_completed_without_an_output_file(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["500", "invalid", "429"])
    batch = openai_batch(client, 3)
    clock.advance(DURATION)
    done = client.get(f"/v1/batches/{batch['id']}").json()
    assert done["status"] == "completed" and done["output_file_id"] is None
    assert done["request_counts"] == {"total": 3, "completed": 0, "failed": 3}
    lines = jsonl(client.get(f"/v1/files/{done['error_file_id']}/content").content)
    refused = batch_fixture("openai-batch-lines.jsonl")[1]
    for line in lines:
        assert_shape(refused, line, depth=3, nullable=frozenset({"param", "code"}))
    by_id = {line["custom_id"]: line["response"] for line in lines}
    assert {k: v["status_code"] for k, v in by_id.items()} == {"o0": 500, "o1": 400, "o2": 429}
    assert by_id["o1"]["body"]["error"]["type"] == "invalid_request_error"
    assert by_id["o2"]["body"]["error"]["code"] == "rate_limit_exceeded"


def test_openai_expiry_leaves_finished_lines_billed_and_the_rest_batch_expired(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["ok", "500"])
    server.expire_after_s = 0.5 * DURATION
    batch = openai_batch(client, 10)
    assert batch["expires_at"] == batch["created_at"] + int(0.5 * DURATION)
    clock.advance(0.6 * DURATION)
    done = client.get(f"/v1/batches/{batch['id']}").json()
    assert done["status"] == "expired" and done["expired_at"] is not None
    output = jsonl(client.get(f"/v1/files/{done['output_file_id']}/content").content)
    errors = jsonl(client.get(f"/v1/files/{done['error_file_id']}/content").content)
    expired = [e for e in errors if e["error"] is not None]
    (fixture,) = [x for x in batch_fixture("openai-batch-lines.jsonl") if x["error"]]
    for line in expired:
        assert_shape(fixture, line)
    assert {line["error"]["code"] for line in expired} == {"batch_expired"}
    assert all(line["response"]["status_code"] == 200 for line in output)
    assert len(output) + len(errors) == 10 and output and expired
    counts = done["request_counts"]
    assert counts["completed"] == len(output) and counts["failed"] == len(errors)


def test_openai_cancel_two_ls_and_keeps_what_finished(
    client: httpx.Client, clock: BatchClock
) -> None:
    batch = openai_batch(client, 10)
    clock.advance(0.5 * DURATION)
    cancelling = client.post(f"/v1/batches/{batch['id']}/cancel").json()
    assert cancelling["status"] == "cancelling" and cancelling["cancelling_at"] is not None
    clock.advance(0.1 * DURATION)
    done = client.get(f"/v1/batches/{batch['id']}").json()
    assert done["status"] == "cancelled" and done["cancelled_at"] is not None
    output = jsonl(client.get(f"/v1/files/{done['output_file_id']}/content").content)
    assert 0 < len(output) < 10 == done["request_counts"]["total"]
    assert done["request_counts"]["completed"] == len(output)


def test_openai_bad_input_lines_fail_the_batch_after_it_was_accepted(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    good = json.loads(openai_lines(1).splitlines()[0])
    other_model = {**good, "custom_id": "b", "body": {**good["body"], "model": "other"}}
    wrong_url = {**good, "custom_id": "c", "url": "/v1/embeddings"}
    data = b"\n".join(
        [json.dumps(good).encode(), b"{not json", json.dumps(good).encode(),
         json.dumps(wrong_url).encode(), json.dumps(other_model).encode()]
    )  # fmt: skip
    file = upload(client, data)
    body = {"input_file_id": file["id"], "endpoint": "/v1/chat/completions"}
    r = client.post("/v1/batches", json={**body, "completion_window": "24h"})
    assert r.status_code == 200 and r.json()["status"] == "validating"
    clock.advance(DURATION)
    failed = client.get(f"/v1/batches/{r.json()['id']}").json()
    assert failed["status"] == "failed" and failed["failed_at"] is not None
    codes = {(e["code"], e["line"]) for e in failed["errors"]["data"]}
    assert codes == {
        ("invalid_json_line", 2), ("duplicate_custom_id", 3), ("url_mismatch", 4),
        ("model_mismatch", 5),
    }  # fmt: skip
    assert failed["output_file_id"] is None and failed["error_file_id"] is None


@pytest.mark.parametrize(
    ("lines", "codes"),
    [
        (
            [{"method": "POST", "url": "/v1/chat/completions", "body": {"model": "demo"}}],
            {("missing_required_parameter", 1)},
        ),
        (
            [{"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": []}],
            {("invalid_method", 1), ("invalid_body", 1)},
        ),
        ([], {("empty_file", 0)}),
    ],
)
def test_openai_lines_without_an_id_a_post_or_a_body_and_an_empty_file_fail_the_batch(
    client: httpx.Client, clock: BatchClock, lines: list[dict[str, Any]], codes: set[Any]
) -> None:
    file = upload(client, b"\n".join(json.dumps(line).encode() for line in lines) + b"\n")
    body = {"input_file_id": file["id"], "endpoint": "/v1/chat/completions"}
    batch = client.post("/v1/batches", json={**body, "completion_window": "24h"}).json()
    clock.advance(DURATION)
    failed = client.get(f"/v1/batches/{batch['id']}").json()
    assert failed["status"] == "failed"
    assert {(e["code"], e["line"]) for e in failed["errors"]["data"]} == codes


def test_openai_files_delete_and_their_refusals(client: httpx.Client) -> None:
    file = upload(client, openai_lines(1))
    gone = client.delete(f"/v1/files/{file['id']}")
    assert gone.json() == {"id": file["id"], "object": "file", "deleted": True}
    missing = client.get(f"/v1/files/{file['id']}")
    assert missing.status_code == 404 and file["id"] in missing.json()["error"]["message"]
    no_file = client.post("/v1/files", files={"purpose": (None, "batch")})
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"input_file_id": None}, "input_file_id"),
        ({"endpoint": None}, "endpoint"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"input_file_id": "file-nope"}, "input_file_id"),
        ({"endpoint": "/v1/embeddings"}, "endpoint"),
        ({"completion_window": "1h"}, "completion_window"),
        ({"metadata": {"k": 1}}, "metadata"),
    ],
)
def test_openai_create_refusals(client: httpx.Client, change: dict[str, Any], param: str) -> None:
    file = upload(client, openai_lines(1))
    body = {"input_file_id": file["id"], "endpoint": "/v1/chat/completions"}
    r = client.post("/v1/batches", json={**body, "completion_window": "24h", **change})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_openai_list_pages_with_after(client: httpx.Client) -> None:
    made = [openai_batch(client, 1)["id"] for _ in range(3)]
    page = client.get("/v1/batches", params={"limit": 2}).json()
    assert page["object"] == "list" and [b["id"] for b in page["data"]] == made[::-1][:2]
    assert page["has_more"]
    rest = client.get("/v1/batches", params={"after": page["last_id"]}).json()
    assert [b["id"] for b in rest["data"]] == [made[0]] and not rest["has_more"]


def test_openai_responses_batch_answers_response_objects(
    client: httpx.Client, clock: BatchClock
) -> None:
    batch = openai_batch(client, 2, endpoint="/v1/responses")
    clock.advance(DURATION)
    done = client.get(f"/v1/batches/{batch['id']}").json()
    lines = jsonl(client.get(f"/v1/files/{done['output_file_id']}/content").content)
    assert {line["response"]["body"]["object"] for line in lines} == {"response"}


def test_azure_paths_are_their_own_provider(server: MockServer, client: httpx.Client) -> None:
    query = "?api-version=2025-04-01-preview"
    file = upload(client, openai_lines(2), prefix="/openai")
    r = client.post(
        "/openai/batches" + query,
        json={"input_file_id": file["id"], "endpoint": "/chat/completions",
              "completion_window": "24h"},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert client.get(f"/openai/batches/{r.json()['id']}{query}").json()["status"] == "validating"
    assert client.get(f"/v1/batches/{r.json()['id']}").status_code == 404  # not OpenAI's
    assert server.batch_counts.batches_created == {"azure": 1}


# --- Gemini -------------------------------------------------------------------------------------


def test_gemini_operation_pending_running_succeeded(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["ok", "500", "quota"])
    r = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(4))
    assert r.status_code == 200, r.text
    op = r.json()
    (pending,) = batch_fixture("gemini-batch-operation-pending.json")
    assert_shape(pending, op)
    assert op["name"].startswith("batches/") and op["metadata"]["state"] == "BATCH_STATE_PENDING"
    assert op["metadata"]["batchStats"] == {"requestCount": "4", "pendingRequestCount": "4"}
    path = "/v1beta/" + op["name"]
    clock.advance(0.5 * DURATION)
    running = client.get(path).json()
    assert running["metadata"]["state"] == "BATCH_STATE_RUNNING" and "done" not in running
    clock.advance(0.5 * DURATION)
    done = client.get(path).json()
    (succeeded,) = batch_fixture("gemini-batch-operation-succeeded.json")
    assert_shape(succeeded, done, depth=3, free=frozenset({"batchStats"}))  # zero counts left out
    assert done["done"] is True and done["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    stats = done["metadata"]["batchStats"]
    assert stats == {"requestCount": "4", "successfulRequestCount": "2", "failedRequestCount": "2"}
    inline = done["metadata"]["output"]["inlinedResponses"]["inlinedResponses"]
    assert inline == done["response"]["inlinedResponses"]["inlinedResponses"]
    assert [x["metadata"]["key"] for x in inline] == ["k0", "k1", "k2", "k3"]  # input order
    assert inline[0]["response"]["candidates"][0]["content"]["parts"][0]["text"]
    assert inline[1]["error"] == {"code": 13, "message": inline[1]["error"]["message"]}
    assert inline[2]["error"]["code"] == 8  # RESOURCE_EXHAUSTED, google.rpc's code
    assert "quota" in inline[2]["error"]["message"]


def test_gemini_expired_or_cancelled_batch_has_no_responses(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.expire_after_s = 0.5 * DURATION
    expiring = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(4)).json()
    server.expire_after_s = None
    cancelled = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(4)).json()
    clock.advance(0.3 * DURATION)
    assert client.post(f"/v1beta/{cancelled['name']}:cancel").json() == {}
    clock.advance(0.3 * DURATION)
    for op, state in ((expiring, "BATCH_STATE_EXPIRED"), (cancelled, "BATCH_STATE_CANCELLED")):
        now = client.get(f"/v1beta/{op['name']}").json()
        assert now["metadata"]["state"] == state and now["done"] is True
        assert "output" not in now["metadata"] and "response" not in now
    assert server.batch(expiring["name"]).counts()["expired"] == 4


def test_gemini_list_delete_and_the_shared_v1_path(
    server: MockServer, client: httpx.Client
) -> None:
    names = [
        client.post("/v1/models/demo:batchGenerateContent", json=gemini_body(1)).json()["name"]
        for _ in range(3)
    ]
    page = client.get("/v1/batches", params={"pageSize": 2}).json()
    assert [op["name"] for op in page["operations"]] == names[::-1][:2]
    rest = client.get("/v1/batches", params={"pageToken": page["nextPageToken"]}).json()
    assert [op["name"] for op in rest["operations"]] == [names[0]] and "nextPageToken" not in rest
    keyed = client.get("/v1/batches", headers={"x-goog-api-key": "k"}).json()
    assert len(keyed["operations"]) == 3
    assert client.get("/v1/batches").json()["object"] == "list"  # no Gemini sign: OpenAI's
    batch_id = names[0].split("/")[1]
    assert client.get(f"/v1/batches/{batch_id}").json()["name"] == names[0]
    assert client.delete(f"/v1beta/batches/{batch_id}").json() == {}
    gone = client.get(f"/v1beta/batches/{batch_id}", headers={"x-goog-api-key": "k"})
    assert gone.status_code == 404 and gone.json()["error"]["status"] == "NOT_FOUND"


def test_gemini_create_refusals(client: httpx.Client) -> None:
    path = "/v1beta/models/demo:batchGenerateContent"
    from_file = {"batch": {"displayName": "x", "inputConfig": {"fileName": "files/abc"}}}
    r = client.post(path, json=from_file)
    assert r.status_code == 400 and "inline" in r.json()["error"]["message"]
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert client.post(path, json={"batch": {"displayName": "x"}}).status_code == 400


# --- across providers ---------------------------------------------------------------------------


def test_items_take_script_entries_in_order_and_live_requests_the_rest(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["500", "ok", "429"])
    client.post("/v1/messages/batches", json={"requests": anthropic_requests(2)})
    live = client.post(
        "/v1/messages",
        json={"model": "demo", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert live.status_code == 429
    statuses = server.batches[0].statuses()
    assert statuses == {"r0": "processing", "r1": "processing"}
    clock.advance(DURATION)
    assert server.batches[0].statuses() == {"r0": "errored", "r1": "succeeded"}


def test_context_window_overflow_is_an_errored_item(clock: BatchClock) -> None:
    with (
        MockServer(batch_clock=clock, context_window=8) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        requests = anthropic_requests(2)
        requests[1]["params"]["messages"][0]["content"] = "word " * 100
        batch = client.post("/v1/messages/batches", json={"requests": requests}).json()
        clock.advance(2.0)
        results = {x["custom_id"]: x["result"] for x in jsonl(
            client.get(f"/v1/messages/batches/{batch['id']}/results").content
        )}  # fmt: skip
    assert results["r0"]["type"] == "succeeded"
    assert "prompt is too long" in results["r1"]["error"]["error"]["message"]


def test_counters_views_and_submitted_ids(server: MockServer, client: httpx.Client) -> None:
    client.post("/v1/messages/batches", json={"requests": anthropic_requests(3)})
    client.post("/v1/messages/batches", json={"requests": anthropic_requests(2, prefix="s")})
    client.post("/v1/messages/batches", json={"requests": []})  # refused, still a create request
    openai_batch(client, 4)
    client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(2))
    counts = server.batch_counts
    assert counts.create_requests == {"anthropic": 3, "openai": 1, "gemini": 1}
    assert counts.batches_created == {"anthropic": 2, "openai": 1, "gemini": 1}
    assert counts.items_submitted == {"anthropic": 5, "openai": 4, "gemini": 2}
    seen = server.submitted_ids("anthropic")
    assert max(seen.values()) == 1 and set(seen) == {"r0", "r1", "r2", "s0", "s1"}
    assert set(server.submitted_ids()) >= {"o0", "k0"}
    views = server.batches
    assert [b.provider for b in views] == ["anthropic", "anthropic", "openai", "gemini"]
    assert views[3].metadata == {"displayName": "nbagent-test"} and len(views[2]) == 4
    assert views[0].phase == "validating" and views[0].counts()["processing"] == 3
    assert server.batch(views[3].id).custom_ids == ["k0", "k1"]
    with pytest.raises(KeyError, match="no batch"):
        server.batch("msgbatch_nope")
    server.clear_batches()
    assert server.batches == [] and server.batch_counts.create_requests == {}


def test_create_failed_is_a_batch_that_fails_after_it_was_accepted(
    server: MockServer, client: httpx.Client, clock: BatchClock
) -> None:
    server.set_faults(["create:failed", "create:failed", "create:failed", "500"])
    batch = openai_batch(client, 2)
    op = client.post("/v1beta/models/demo:batchGenerateContent", json=gemini_body(2)).json()
    anthropic = client.post("/v1/messages/batches", json={"requests": anthropic_requests(2)})
    clock.advance(DURATION)
    failed = client.get(f"/v1/batches/{batch['id']}").json()
    assert failed["status"] == "failed"
    assert failed["errors"]["data"][0]["code"] == "token_limit_exceeded"
    assert server.batch(batch["id"]).statuses() == {"o0": "errored", "o1": "errored"}
    gemini = client.get(f"/v1beta/{op['name']}").json()
    assert gemini["metadata"]["state"] == "BATCH_STATE_FAILED" and gemini["error"]["code"] == 8
    results = jsonl(client.get(f"/v1/messages/batches/{anthropic.json()['id']}/results").content)
    assert {x["result"]["type"] for x in results} == {"errored"}
    assert server.plan.remaining == 1  # items of a failed batch never ran, so took no fault


def test_batch_options_are_checked_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="batch_duration_s must be a number of seconds"):
        MockServer(batch_duration_s=-1)
    with pytest.raises(ValueError, match="expire_after_s must be a positive number"):
        MockServer(expire_after_s=0)
    server = MockServer()
    with pytest.raises(ValueError, match="advance_batches takes a number of seconds"):
        server.advance_batches(-2)
    server.batch_duration_s = 0.5
    assert server.batch_duration_s == 0.5 and server.expire_after_s is None


def test_advance_batches_moves_the_real_clock_forward() -> None:
    with MockServer(batch_duration_s=3600) as server, httpx.Client(base_url=server.url) as client:
        batch = client.post("/v1/messages/batches", json={"requests": anthropic_requests(2)})
        server.advance_batches(3600)
        now = client.get(f"/v1/messages/batches/{batch.json()['id']}").json()
    assert now["processing_status"] == "ended"


def test_the_providers_request_caps(
    monkeypatch: pytest.MonkeyPatch, client: httpx.Client, clock: BatchClock
) -> None:
    from nbagent.mock import _anthropic_batches, _openai_batches

    monkeypatch.setattr(_anthropic_batches, "MAX_REQUESTS", 3)  # 100,000 on the wire
    monkeypatch.setattr(_openai_batches, "MAX_REQUESTS", 3)  # 50,000
    r = client.post("/v1/messages/batches", json={"requests": anthropic_requests(4)})
    assert r.status_code == 400 and "at most 3" in r.json()["error"]["message"]
    batch = openai_batch(client, 4)  # OpenAI accepts it, then fails it
    clock.advance(DURATION)
    failed = client.get(f"/v1/batches/{batch['id']}").json()
    assert failed["status"] == "failed"
    assert [e["code"] for e in failed["errors"]["data"]] == ["too_many_tasks"]
