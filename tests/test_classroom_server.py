"""A real room on 127.0.0.1: who may do what, bad input, counting, the live stream, SDK clients."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

import nbagent.classroom
from nbagent import RetryPolicy
from nbagent.classroom import Classroom, RoomFull, join
from nbagent.errors import AuthFailed, ConfigError

pytestmark = pytest.mark.e2e


@pytest.fixture
def room() -> Iterator[Classroom]:
    with Classroom(capacity_rps=1000, max_students=5, seed=1) as opened:
        yield opened


def requests_sent(agent: nbagent.Agent) -> int:
    frame = agent.attempts  # one row per HTTP request (a pacing wait is a row with no attempt)
    return int(((frame["phase"] == "request") & frame["attempt"].notna()).sum())


def test_join_seats_a_student_and_their_agent_answers(room: Classroom) -> None:
    seat = join(room.url, code=room.code, name="ana")
    assert (seat.name, seat.api_key, seat.base_url) == ("ana", room.code, room.url)
    agent = seat.agent(retry=RetryPolicy(jitter=None, max_attempts=3))
    result = agent.run_sync("What is 2 + 2?")
    assert "4" in result.final_text
    assert room.settle()  # the client had its answer a moment before the room counted it
    row = room.students.iloc[0]
    assert (row["name"], row["requests"], row["attempts"], row["jitter"]) == (
        "ana",
        requests_sent(agent),
        "3",
        "none",
    )
    assert room.arrivals["requests"].sum() == requests_sent(agent)


def test_a_wrong_or_missing_code_is_401_and_join_says_so(room: Classroom) -> None:
    with pytest.raises(AuthFailed, match="did not accept the join code 'NOPE-NOPE'"):
        join(room.url, code="NOPE-NOPE", name="bob")
    with pytest.raises(AuthFailed, match="join code missing"):
        join(room.url, code="", name="bob")
    body = {"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    for headers in ({}, {"x-api-key": "NOPE-NOPE"}, {"authorization": "Bearer NOPE"}):
        reply = httpx.post(room.url + "/v1/messages", json=body, headers=headers)
        assert reply.status_code == 401
    assert room.arrivals.empty and room.students.empty  # a stranger is nobody's request


def test_the_teacher_token_opens_the_dashboard_and_a_students_code_gets_403(
    room: Classroom,
) -> None:
    token = room.room.token
    for path in ("/classroom", "/classroom/state", "/classroom/events"):
        assert httpx.get(room.url + path).status_code == 401
        student = httpx.get(room.url + path, headers={"x-api-key": room.code})
        assert student.status_code == 403
        assert "join code" in student.json()["error"]["message"]
    for path in ("/classroom/scenario", "/classroom/stop", "/classroom/capacity"):
        reply = httpx.post(room.url + path, json={}, params={"token": room.code})
        assert reply.status_code == 403
    assert room.room.scenario is None
    page = httpx.get(room.teacher_url)
    assert page.status_code == 200 and "<title>Classroom" in page.text
    assert token not in page.text  # the page reads it from its own address
    state = httpx.get(room.url + "/classroom/state", headers={"x-nbagent-teacher": token})
    assert state.json()["capacity_rps"] == 1000


def test_the_controls_start_and_stop_scenarios_and_set_capacity(room: Classroom) -> None:
    teacher = {"x-nbagent-teacher": room.room.token}
    url = room.url + "/classroom"
    started = httpx.post(url + "/scenario", json={"name": "wall"}, headers=teacher)
    assert started.json() == {"scenario": "wall", "duration_s": 20.0}
    assert room.room.active() is not None
    unknown = httpx.post(url + "/scenario", json={"name": "flood"}, headers=teacher)
    assert unknown.status_code == 400 and "herd, wall, storm" in unknown.json()["error"]["message"]
    assert httpx.post(url + "/stop", headers=teacher).json() == {"stopped": "wall"}
    assert httpx.post(url + "/stop", headers=teacher).json() == {"stopped": None}
    assert httpx.post(url + "/capacity", json={"rps": 3}, headers=teacher).json() == {
        "capacity_rps": 3.0
    }
    for bad in (0, -2, "ten", None):
        reply = httpx.post(url + "/capacity", json={"rps": bad}, headers=teacher)
        assert reply.status_code == 400 and "capacity must be" in reply.json()["error"]["message"]
    assert room.capacity.rps == 3.0


def test_names_are_cleaned_made_unique_and_the_room_has_a_size(room: Classroom) -> None:
    first = join(room.url, code=room.code, name="ana\x1b\x00 \n lee")
    second = join(room.url, code=room.code, name="ana lee")
    assert (first.name, second.name) == ("ana lee", "ana lee (2)")
    with pytest.raises(ConfigError, match="visible character"):
        join(room.url, code=room.code, name="\x00\x07")
    for i in range(3):
        join(room.url, code=room.code, name=f"s{i}")
    with pytest.raises(RoomFull, match="The room is full: it has 5 students"):
        join(room.url, code=room.code, name="late")


def test_bad_bodies_get_sentences_and_the_room_goes_on(room: Classroom) -> None:
    key = {"x-api-key": room.code}
    join_url = room.url + "/classroom/join"
    assert httpx.post(join_url, content=b"{not json", headers=key).status_code == 400
    assert httpx.post(join_url, json=["ana"], headers=key).status_code == 400
    assert httpx.post(join_url, json={"name": 7}, headers=key).status_code == 400
    huge = httpx.post(join_url, content=b"x" * 200_000, headers=key)
    assert huge.status_code == 413
    model = httpx.post(room.url + "/v1/messages", content=b"\xff{", headers=key)
    assert model.status_code == 400
    assert room.settle()
    assert room.arrivals["other"].sum() == 1  # counted: a student sent it
    seat = join(room.url, code=room.code, name="after")
    assert "4" in seat.agent().run_sync("What is 2 + 2?").final_text


def test_a_dropped_connection_and_a_silent_client_do_not_stop_the_room(room: Classroom) -> None:
    host, port = "127.0.0.1", room.mock.port
    silent = socket.create_connection((host, port))  # sends half a request, then nothing
    silent.sendall(b"POST /classroom/join HTTP/1.1\r\nHost: x\r\ncontent-length: 50\r\n\r\n{")
    dropped = socket.create_connection((host, port))
    dropped.sendall(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
        + room.code.encode()
        + b"\r\ncontent-length: 10\r\n\r\n"
    )
    dropped.close()
    viewer = socket.create_connection((host, port))  # opens the live stream, never reads
    viewer.sendall(f"GET /classroom/events?token={room.room.token} HTTP/1.1\r\n\r\n".encode())
    try:
        seat = join(room.url, code=room.code, name="still here")
        assert "4" in seat.agent().run_sync("What is 2 + 2?").final_text
        state = httpx.get(room.url + "/classroom/state", params={"token": room.room.token})
        assert [s["name"] for s in state.json()["students"]] == ["still here"]
    finally:
        silent.close()
        viewer.close()


def test_the_live_stream_sends_the_counts_as_they_change(room: Classroom) -> None:
    seen: list[dict[str, object]] = []
    done, first = threading.Event(), threading.Event()

    def watch() -> None:
        params = {"token": room.room.token}
        with httpx.stream("GET", room.url + "/classroom/events", params=params) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    first.set()
                    if seen[-1]["total"] == 2 or done.is_set():
                        return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert first.wait(30)
    seat = join(room.url, code=room.code, name="ana")
    agent = seat.agent()
    agent.run_sync("What is 2 + 2?")
    agent.run_sync("And 3 + 3?")
    watcher.join(30)
    done.set()
    assert seen and seen[0]["total"] == 0
    assert seen[-1]["total"] == requests_sent(agent) == 2
    assert seen[-1]["students"][0]["name"] == "ana"  # type: ignore[index]


def test_a_herd_is_answered_with_529s_that_the_agents_retry(room: Classroom) -> None:
    seat = join(room.url, code=room.code, name="herd")
    room.scenario("herd")

    async def four() -> list[nbagent.Agent]:
        agents = [
            seat.agent(retry=RetryPolicy(jitter=None, initial_delay=1.0, max_attempts=6))
            for _ in range(4)
        ]
        await asyncio.gather(*(a.run("What is 2 + 2?") for a in agents))
        return agents

    agents = asyncio.run(four())
    sent = sum(requests_sent(a) for a in agents)
    assert room.settle()
    frame = room.arrivals
    lane = room.students.iloc[0]
    assert frame["requests"].sum() == sent == lane["requests"]
    assert frame["status_529"].sum() == lane["retries"] == sent - 4
    assert frame["status_200"].sum() == 4
    assert lane["agents"] == 4


def test_official_sdk_clients_use_the_seat(room: Classroom) -> None:
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    seat = join(room.url, code=room.code, name="sdk user")
    with anthropic.Anthropic(
        base_url=seat.base_url, api_key=seat.api_key, default_headers=seat.headers
    ) as a:
        message = a.messages.create(
            model="demo", max_tokens=50, messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )
    assert "4" in message.content[0].text
    with openai.OpenAI(
        base_url=seat.openai_base_url, api_key=seat.api_key, default_headers=seat.headers
    ) as o:
        chat = o.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )
    assert "4" in (chat.choices[0].message.content or "")
    assert room.settle()
    lane = room.students.iloc[0]
    assert (lane["name"], lane["requests"], lane["agents"]) == ("sdk user", 2, 1)


def test_the_room_says_where_it_listens() -> None:
    with Classroom() as local:
        assert local.local_only and local.url.startswith("http://127.0.0.1:")
        assert local.join_line == (
            f'nbagent.classroom.join("{local.url}", code="{local.code}", name="your name")'
        )
        assert local.teacher_url == f"{local.url}/classroom?token={local.room.token}"
