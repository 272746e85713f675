"""The room's model, on a hand-moved clock: names, seats, counting, scenarios, capacity."""

from __future__ import annotations

import pytest

from nbagent.classroom import RoomFull
from nbagent.classroom._capacity import Capacity
from nbagent.classroom._frames import arrivals_frame, figure, snapshot, students_frame
from nbagent.classroom._names import MAX_NAME, clean_name, decode_name, encode_name, join_code
from nbagent.classroom._room import Room, parse_policy, peak_to_mean
from nbagent.classroom._scenarios import Scenario


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_names_lose_control_characters_fold_spaces_and_stop_at_40() -> None:
    assert clean_name("ana\x1b[31m\x00  \t lee\u200b") == "ana[31m lee"
    assert len(clean_name("x" * 100)) == MAX_NAME
    assert clean_name("\x07\x08 ") == ""
    assert decode_name(encode_name("Zoë <b>&")) == "Zoë <b>&"
    assert encode_name("Zoë\n").isascii()


def test_a_second_student_with_the_same_name_gets_a_suffix_within_40() -> None:
    room = Room()
    assert [room.join("ana").name, room.join("ana").name, room.join(" ana ").name] == [
        "ana",
        "ana (2)",
        "ana (3)",
    ]
    long = "y" * 40
    assert room.join(long).name == long
    second = room.join(long).name
    assert second.endswith(" (2)") and len(second) == 40


def test_an_empty_name_and_a_full_room_are_sentences() -> None:
    room = Room(max_students=2)
    with pytest.raises(ValueError, match="visible character"):
        room.join("\x00\x01")
    room.join("a")
    room.join("b")
    with pytest.raises(RoomFull, match="The room is full: it has 2 students"):
        room.join("c")
    with pytest.raises(RoomFull):
        room.arrive("someone new", "agent-1", "d", {})
    with pytest.raises(ValueError, match="max_students"):
        Room(max_students=0)


def test_join_codes_are_read_aloud_friendly_and_differ() -> None:
    codes = {join_code() for _ in range(50)}
    assert len(codes) == 50
    for code in codes:
        assert len(code) == 9 and code[4] == "-"
        assert not set(code) & set("01OI")


def test_a_repeat_of_the_same_body_is_a_retry_and_its_wait_is_counted() -> None:
    clock = Clock()
    room = Room(clock=clock)
    first = room.arrive("ana", "agent-1", "body-a", parse_policy("attempts=4; jitter=none"))
    room.answer(first, 429)
    clock.t += 1.5
    again = room.arrive("ana", "agent-1", "body-a", {})
    room.answer(again, 200)
    other = room.arrive("ana", "agent-2", "body-a", {})  # another agent: not a retry
    room.answer(other, 200, broken=True)
    clock.t += 0.2
    nxt = room.arrive("ana", "agent-1", "body-b", {})  # the conversation moved on
    room.answer(nxt, 200)
    lane = students_frame(room).iloc[0]
    assert (lane["requests"], lane["retries"], lane["failures"], lane["agents"]) == (4, 1, 2, 2)
    assert lane["wait_s"] == pytest.approx(1.5)
    assert (lane["attempts"], lane["jitter"]) == ("4", "none")
    frame = arrivals_frame(room)
    assert frame["requests"].tolist() == [1, 3]
    assert frame["status_429"].tolist() == [1, 0]
    assert frame["status_200"].tolist() == [0, 2]
    assert frame["broken"].tolist() == [0, 1]
    # the teacher's figure shows itself in a notebook (as PNG), pyplot or not
    assert figure(room, 10)._repr_png_().startswith(b"\x89PNG")  # type: ignore[attr-defined]


def test_quiet_seconds_are_rows_of_zero() -> None:
    clock = Clock()
    room = Room(clock=clock)
    room.answer(room.arrive("a", "x", "1", {}), 200)
    clock.t += 3.2
    room.answer(room.arrive("a", "x", "2", {}), 200)
    assert arrivals_frame(room)["requests"].tolist() == [1, 0, 0, 1]


def test_peak_to_mean() -> None:
    assert peak_to_mean([]) is None
    assert peak_to_mean([0, 0]) is None
    assert peak_to_mean([2, 2, 2]) == 1.0
    assert peak_to_mean([9, 0, 0]) == 3.0


def test_peaks_before_and_since_a_scenario() -> None:
    clock = Clock()
    room = Room(clock=clock)
    for _ in range(4):  # an even 2 per second before
        for _ in range(2):
            room.answer(room.arrive("a", "x", str(clock.t), {}), 200)
        clock.t += 1
    room.start_scenario("herd")
    for burst in (8, 0, 0, 0):
        for i in range(burst):
            room.answer(room.arrive("a", "x", f"{clock.t}-{i}", {}), 529)
        clock.t += 1
    peaks = snapshot(room, 10, "429")["peaks"]
    assert peaks["scenario"] == "herd"
    assert peaks["before"] == 1.0
    assert peaks["after"] == pytest.approx(5.0)  # 8 in the first of 5 seconds


def test_herd_is_an_outage_then_an_aftermath_and_ends_by_itself() -> None:
    run = Scenario("herd", started_s=10.0)
    assert run.fault(10.5) is not None and run.fault(10.5).kind == "529"  # type: ignore[union-attr]
    assert run.fault(13.5) is None and run.running(13.5)
    assert not run.running(31.0) and run.stopped_s == 30.0


def test_storm_is_seeded() -> None:
    def draws(seed: int) -> list[str]:
        run = Scenario("storm", started_s=0.0, seed=seed)
        return [str(run.fault(1.0)) for _ in range(40)]

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)
    kinds = set(draws(3))
    assert {"529", "drop_after_tokens=2", "None"} <= kinds


def test_wall_tightens_the_capacity_and_unknown_scenarios_are_named() -> None:
    run = Scenario("wall", started_s=0.0)
    assert run.capacity(10.0, 1.0) == 2.0
    assert run.capacity(10.0, 25.0) is None
    with pytest.raises(ValueError, match="the scenarios are herd, wall, storm"):
        Room().start_scenario("flood")


def test_capacity_refuses_past_its_rate_and_takes_a_new_one() -> None:
    clock = Clock()
    cap = Capacity(2, now=clock)
    assert [cap.admit().allowed for _ in range(3)] == [True, True, False]
    refused = cap.admit()
    assert refused.retry_after_s == pytest.approx(0.5)
    clock.t += 0.5
    assert cap.admit().allowed
    cap.set(5)
    assert sum(cap.admit().allowed for _ in range(6)) == 5
    assert sum(cap.admit(1.0).allowed for _ in range(3)) == 1  # a wall's tighter rate
    for bad in (0, -1, float("nan"), "ten", True):
        with pytest.raises(ValueError, match="capacity must be"):
            cap.set(bad)  # type: ignore[arg-type]
