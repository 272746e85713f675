"""The mock's route table from outside: added routes, the call object, the request hook."""

from __future__ import annotations

import httpx
import pytest

from nbagent.mock import Call, MockServer

pytestmark = pytest.mark.e2e


def test_added_routes_see_the_request_and_come_before_the_builtin_ones() -> None:
    seen: list[tuple[str, dict[str, str], dict[str, str], str]] = []

    def room(call: Call) -> None:
        seen.append((call.method, call.params, call.query, call.header("x-student")))
        call.record(200)
        call.send_json(200, {"room": call.params["name"]})

    def health(call: Call) -> None:
        call.record(200)
        call.send(200, b"busy", "text/plain", {})

    with MockServer(routes=[("GET", "/rooms/(?P<name>[a-z]+)", room)]) as server:
        server.add_route("GET", "/health", health)
        with httpx.Client(base_url=server.url) as client:
            got = client.get("/rooms/kitchen?view=full", headers={"x-student": "ada"})
            assert got.json() == {"room": "kitchen"}
            assert client.get("/health").text == "busy"
            assert client.get("/rooms/Kitchen").status_code == 404  # the pattern decides
            assert client.post("/v1/chat/completions", json=_chat()).status_code == 200
        paths = [r.path for r in server.requests]
    assert seen == [("GET", {"name": "kitchen"}, {"view": "full"}, "ada")]
    assert paths == [
        "/rooms/kitchen?view=full",
        "/health",
        "/rooms/Kitchen",
        "/v1/chat/completions",
    ]


def test_on_request_counts_each_request_by_status_and_client() -> None:
    arrivals: list[tuple[str, int, str]] = []

    def hook(call: Call, status: int) -> None:
        arrivals.append((call.bare, status, call.identity.get("authorization", "")))

    key = {"authorization": "Bearer ada"}
    with (
        MockServer(["500", "ok", "close"], on_request=hook) as server,
        httpx.Client(base_url=server.url, headers=key) as c,
    ):
        assert c.post("/v1/chat/completions", json=_chat()).status_code == 500
        assert c.post("/v1/chat/completions", json=_chat()).status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            c.post("/v1/chat/completions", json=_chat())
        assert c.get("/nowhere").status_code == 404
    completions = "/v1/chat/completions"
    # the hook runs once the answer is out, so a client's next request may be counted first:
    # what holds is one count per request, with its status
    assert sorted(arrivals) == sorted(
        [
            (completions, 500, "Bearer ada"),
            (completions, 200, "Bearer ada"),
            (completions, 0, "Bearer ada"),
            ("/nowhere", 404, "Bearer ada"),
        ]
    )


def _chat() -> dict[str, object]:
    return {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
