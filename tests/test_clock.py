from __future__ import annotations

import asyncio

from nbagent._core._clock import Clock, RealClock, VirtualClock


def test_virtual_clock_sleeps_without_waiting() -> None:
    clock = VirtualClock()

    async def main() -> None:
        await clock.sleep(3600)
        await clock.sleep(-5)  # negative sleeps are no sleep

    asyncio.run(main())
    assert clock.now() == 3600
    assert clock.slept == [3600, 0.0]
    assert clock.wall() - clock.now() == 1.7e9


def test_manual_virtual_clock_waits_for_advance() -> None:
    clock = VirtualClock(auto_advance=False)
    woke: list[float] = []

    async def sleeper(d: float) -> None:
        await clock.sleep(d)
        woke.append(clock.now())

    async def main() -> None:
        tasks = [asyncio.create_task(sleeper(d)) for d in (2.0, 1.0)]
        await asyncio.sleep(0)
        assert clock.sleepers == 2 and woke == []
        clock.advance(1.5)
        await asyncio.sleep(0)
        assert woke == [1.5]  # it wakes at the time the test moved the clock to
        clock.advance(1.0)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert woke == [1.5, 2.5]
    assert clock.now() == 2.5


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(VirtualClock(), Clock)
