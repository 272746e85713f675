"""A recording as the mock server's responder: the recorded answers, in order, with their timing.

Each request the server receives is matched against the next recorded one (method, path, model);
a match gets the recorded status, kept headers and body chunks, each at its recorded offset from
the request divided by `speed` (`math.inf`: no waiting at all). A request that does not match,
or one past the end of the recording, gets a 400 whose message names the difference in one
sentence, and does not use up a recorded answer.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..recording import RecordedExchange, Recording, clean_path, model_of, read_recording


@dataclass(frozen=True)
class Mismatch:
    """A request the recording cannot answer, and the sentence that says why."""

    message: str


class Replayer:
    """The recorded exchanges of a `Recording`, handed out one per request, in order."""

    def __init__(self, recording: Recording | str | os.PathLike[str], speed: float = 1.0) -> None:
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0:
            raise ValueError(
                f"speed must be a positive number (1.0: as recorded, 2.0: twice as fast, "
                f"math.inf: no waiting), got {speed!r}."
            )
        self.recording = (
            recording if isinstance(recording, Recording) else read_recording(Path(recording))
        )
        self.speed = float(speed)
        self._lock = threading.Lock()
        self._next = 0

    @property
    def name(self) -> str:
        path = self.recording.path
        return path.name if path is not None else "the recording"

    @property
    def served(self) -> int:
        """How many recorded answers have been given."""
        with self._lock:
            return self._next

    def scaled(self, seconds: float) -> float:
        """A recorded offset at this replay's speed."""
        return 0.0 if math.isinf(self.speed) else seconds / self.speed

    def take(self, method: str, path: str, body: bytes) -> RecordedExchange | Mismatch:
        """The recorded answer for this request, or why there is none."""
        path = clean_path(path)
        model = model_of(path, body)
        with self._lock:
            n = self._next
            total = len(self.recording.exchanges)
            if n >= total:
                return Mismatch(
                    f"nbagent replay: request {n + 1} goes past the end of {self.name}, "
                    f"which recorded {total} request{'s' if total != 1 else ''}."
                )
            ex = self.recording.exchanges[n]
            what = f"request {n + 1} of {self.name}"
            if method.upper() != ex.method.upper():
                return Mismatch(f"nbagent replay: {what} was a {ex.method}, not a {method}.")
            if path.split("?", 1)[0] != ex.path.split("?", 1)[0]:
                return Mismatch(f"nbagent replay: {what} went to {ex.path}, not to {path}.")
            if ex.model is not None and model is not None and model != ex.model:
                return Mismatch(
                    f"nbagent replay: {what} asked for model {ex.model!r}, not {model!r}."
                )
            self._next = n + 1
            return ex
