"""A classroom: one room server for a class of notebooks, and the thundering herd seen live.

The teacher starts a room (`Classroom(...)`, or `nbagent classroom` in a terminal): the demo
model behind one shared capacity, scenarios to start and stop (``herd``, ``wall``,
``storm``), one lane per student and a live dashboard. Each student joins from their own
notebook::

    import nbagent.classroom
    seat = nbagent.classroom.join("http://10.0.0.5:8765", code="K7QF-29XD", name="ana")
    agent = seat.agent(retry=nbagent.RetryPolicy(jitter=None))

and every request they send, through an nbagent agent or an official SDK client
(`seat.base_url`, `seat.api_key`, `seat.headers`), arrives in the teacher's view.
"""

from ._cli import main
from ._room import RoomFull
from ._scenarios import SCENARIOS
from ._seat import Seat, join
from ._server import Classroom

__all__ = ["SCENARIOS", "Classroom", "RoomFull", "Seat", "join", "main"]
