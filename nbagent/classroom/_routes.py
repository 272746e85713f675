"""The room's rows of the mock's route table: the students' model endpoints, the join, the
teacher's dashboard, its live stream and its controls.

A student's model request is checked (the join code as its key), counted, passed through the
room's shared capacity, and then answered by the mock's own model endpoint, whose fault plan
is the room's scenario (`RoomPlan`). How it was answered is counted by the mock's request hook
(`Classroom._answered`), so a dropped connection or a broken stream is counted too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any, Protocol

from ..mock import Fault, FaultPlan
from ..mock._call import Call, CallError, Endpoint
from ..mock._fault_answers import rate_limited
from ..mock._faults import OK
from ..mock._model_endpoint import serve_model
from ..mock._ratelimit import format_seconds
from ..mock._routes import MODEL_ENDPOINTS
from ..recording._format import KEY_HEADERS
from ._capacity import Capacity
from ._dashboard import PAGE
from ._names import NAME_HEADER, decode_name
from ._room import Arrival, Room, RoomFull, parse_policy
from ._scenarios import Scenario, check_scenario
from ._seat import AGENT_HEADER, JOIN_PATH, POLICY_HEADER

__all__ = ["RoomPlan", "room_routes"]

TEACHER_HEADER = "x-nbagent-teacher"
SMALL_BODY = 4096  # joins and controls are a few bytes; anything past this is refused
SSE_TICK_S = 0.2
SSE_HEARTBEAT_S = 5.0
SSE_WRITE_TIMEOUT_S = 10.0  # a viewer that stops reading is let go after this


class Classroom(Protocol):
    """What the routes ask of the room server (`nbagent.classroom.Classroom`)."""

    room: Room
    capacity: Capacity
    code: str

    def pending(self, call: Call, arrival: Arrival) -> None: ...
    def scenario(self, name: str) -> Scenario: ...
    def stop_scenario(self) -> Scenario | None: ...
    def set_capacity(self, rps: Any) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...


class RoomPlan(FaultPlan):
    """The mock's fault plan for a room: each model request gets the running scenario's
    fault (or none), on the room's clock."""

    def __init__(self, room: Room) -> None:
        super().__init__(())
        self._room = room

    def next(self, target: str | None = None) -> Fault:
        if target is not None:
            return OK
        run = self._room.active()
        fault = run.fault(self._room.now()) if run is not None else None
        return fault if fault is not None else OK


def _same(given: str, secret: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode())


def key_of(call: Call) -> str:
    """The key a client sent, wherever its SDK puts it."""
    for name in KEY_HEADERS:
        value = call.headers.get(name, "")
        if name == "authorization":  # a bearer token
            value = value[7:] if value[:7].lower() == "bearer " else ""
        if value.strip():
            return value.strip()
    return call.query.get("key", "").strip()


def _plain(call: Call, status: int, message: str, **fields: Any) -> None:
    body = {"error": {"message": message}, **fields} if status >= 400 else fields
    call.record(status)
    call.send(status, json.dumps(body).encode(), "application/json", {"cache-control": "no-store"})


def _small_json(call: Call) -> dict[str, Any]:
    try:
        body = call.json_body()
    except CallError:
        raise
    if not isinstance(body, dict):
        call.refuse(400, "The body must be a JSON object.")
    return body


# --- students ------------------------------------------------------------------------------------


def _student_model(room: Classroom, call: Call) -> None:
    if not _same(key_of(call), room.code):
        call.error(401, call.codec.status_error(401, "", call.request_id, "0"))
        return
    raw = call.read_body()
    if len(raw) < int(call.headers.get("content-length") or 0):
        call.hang_up()  # the client went away mid-body: nothing arrived
    name = decode_name(call.headers.get(NAME_HEADER, "")) or "anonymous"
    agent = decode_name(call.headers.get(AGENT_HEADER, ""))[:40] or "client"
    policy = parse_policy(call.headers.get(POLICY_HEADER))
    try:
        arrival = room.room.arrive(name, agent, hashlib.sha256(raw).hexdigest(), policy)
    except RoomFull as full:
        call.error(403, call.codec.error_body(400, str(full), call.request_id, None))
        return
    room.pending(call, arrival)
    run = room.room.active()
    tight = run.capacity(room.capacity.rps, room.room.now()) if run is not None else None
    decision = room.capacity.admit(tight)
    if not decision.allowed:
        if tight is not None or room.capacity.refusal == "429":
            rate_limited(call, decision, "demo", fault="room_capacity")
            return
        codec, retry = call.codec, format_seconds(decision.retry_after_s)
        body = codec.status_error(529, "demo", call.request_id, retry)
        call.error(codec.http_status(529), body, fault="room_capacity")
        return
    serve_model(call)


def _join(room: Classroom, call: Call) -> None:
    if not _same(key_of(call), room.code):
        _plain(call, 401, "That is not this room's join code; check the one the teacher showed.")
        return
    body = _small_json(call)
    name = body.get("name")
    if not isinstance(name, str):
        _plain(call, 400, 'A join names the student: {"name": "ana"}.')
        return
    try:
        lane = room.room.join(name)
    except RoomFull as full:
        _plain(call, 409, str(full))
        return
    except ValueError as bad:
        _plain(call, 400, str(bad))
        return
    _plain(call, 200, "", name=lane.name, seat=lane.seat, model="demo")


# --- the teacher ----------------------------------------------------------------------------------


def _teacher(room: Classroom, call: Call) -> bool:
    """Whether the call carries the teacher token; answers 401 or 403 when it does not."""
    given = call.headers.get(TEACHER_HEADER, "") or call.query.get("token", "") or key_of(call)
    if given and _same(given, room.room.token):
        return True
    if given and _same(given, room.code):
        _plain(call, 403, "That is the students' join code; the dashboard needs the teacher token.")
    else:
        _plain(call, 401, "The dashboard needs the teacher token (the URL the room printed).")
    return False


def _page(room: Classroom, call: Call) -> None:
    if not _teacher(room, call):
        return
    call.record(200)
    headers = {
        "cache-control": "no-store",
        "content-security-policy": "default-src 'self'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src 'self' data:",
        "referrer-policy": "no-referrer",
    }
    call.send(200, PAGE.encode(), "text/html; charset=utf-8", headers)


def _state(room: Classroom, call: Call) -> None:
    if _teacher(room, call):
        _plain(call, 200, "", **room.snapshot())


def _events(room: Classroom, call: Call) -> None:
    if not _teacher(room, call):
        return
    call.record(200)
    call.head(200, "text/event-stream; charset=utf-8", {"cache-control": "no-store"})
    call.handler.connection.settimeout(SSE_WRITE_TIMEOUT_S)
    mock, sent, quiet = call.mock, -1, 0.0
    while True:
        version = room.room.version
        if version != sent or quiet >= SSE_HEARTBEAT_S:
            data = json.dumps(room.snapshot(), ensure_ascii=False).encode()
            call.chunk(b"data: " + data + b"\n\n")
            call.flush()
            sent, quiet = version, 0.0
        if mock.wait(SSE_TICK_S):
            break
        quiet += SSE_TICK_S
    call.end()


def _control(action: Callable[[Classroom, dict[str, Any]], dict[str, Any]]) -> Callable[..., None]:
    def serve(room: Classroom, call: Call) -> None:
        if not _teacher(room, call):
            return
        body = _small_json(call)
        try:
            result = action(room, body)
        except ValueError as bad:
            _plain(call, 400, str(bad))
            return
        _plain(call, 200, "", **result)

    return serve


def _start(room: Classroom, body: dict[str, Any]) -> dict[str, Any]:
    run = room.scenario(check_scenario(body.get("name")))
    return {"scenario": run.name, "duration_s": run.duration_s}


def _stop(room: Classroom, body: dict[str, Any]) -> dict[str, Any]:
    run = room.stop_scenario()
    return {"stopped": None if run is None else run.name}


def _capacity(room: Classroom, body: dict[str, Any]) -> dict[str, Any]:
    room.set_capacity(body.get("rps"))
    return {"capacity_rps": room.capacity.rps}


def room_routes(room: Classroom) -> list[Endpoint]:
    """The rows a room adds in front of the mock's own."""

    def bound(serve: Callable[[Classroom, Call], None]) -> Callable[[Call], None]:
        return lambda call: serve(room, call)

    rows = [dataclasses.replace(e, serve=bound(_student_model)) for e in MODEL_ENDPOINTS]
    small: dict[str, Any] = {"max_body": SMALL_BODY}
    return [
        *rows,
        Endpoint("POST", JOIN_PATH + "/?", bound(_join), **small),
        Endpoint("GET", "/classroom/?", bound(_page)),
        Endpoint("GET", "/classroom/state/?", bound(_state)),
        Endpoint("GET", "/classroom/events/?", bound(_events)),
        Endpoint("POST", "/classroom/scenario/?", bound(_control(_start)), **small),
        Endpoint("POST", "/classroom/stop/?", bound(_control(_stop)), **small),
        Endpoint("POST", "/classroom/capacity/?", bound(_control(_capacity)), **small),
    ]
