"""A student's side of the room: `join` and the `Seat` it returns.

The join code is the student's API key and their name travels in a header, so the same seat
serves an nbagent `Agent` (`seat.agent()`) and an official SDK client (`base_url`, `api_key`,
`headers`). Each agent of a seat also reports its retry policy (attempts, jitter, a retry
budget) in a header, which the teacher's lane for the student shows.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx

from .._core._retry import RetryPolicy
from .._loop._agent import Agent
from .._loop._limiter import RateLimiter
from ..errors import AuthFailed, ConfigError, TransportError, set_provider_label
from ..providers import AnthropicProvider
from ._names import NAME_HEADER, encode_name
from ._room import RoomFull

__all__ = ["AGENT_HEADER", "POLICY_HEADER", "RoomFull", "Seat", "join", "policy_header"]

set_provider_label("classroom", "Classroom")  # how an error names the room

AGENT_HEADER = "x-nbagent-agent"
POLICY_HEADER = "x-nbagent-policy"
JOIN_PATH = "/classroom/join"


def policy_header(retry: RetryPolicy | None, limiter: object = None) -> str:
    """``attempts=4; jitter=full; budget=500``: what the teacher's lane shows for an agent."""
    policy = retry if retry is not None else RetryPolicy()
    jitter = policy.jitter
    jitter_text = (
        "none"
        if jitter is None
        else jitter
        if isinstance(jitter, (str, float))
        else (type(jitter).__name__)
    )
    parts = [f"attempts={policy.max_attempts}", f"jitter={jitter_text}"]
    budget = getattr(limiter, "budget", None) if isinstance(limiter, RateLimiter) else None
    if budget is not None:
        parts.append(f"budget={budget.capacity:g}")
    return "; ".join(parts)


def _check_url(url: object) -> str:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(
            f"The room's URL must start with http:// (the line the teacher showed), got {url!r}."
        )
    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigError(f"The room's URL has no address in it: {url!r}.")
    return f"{parts.scheme}://{parts.netloc}"


class Seat:
    """A student's place in a room (`join` returns one).

    Args:
        url: The room's address.
        code: The join code.
        name: The name the room gave.
        seat: The order the student joined in.

    Attributes:
        url: The room's address.
        name: The name the room gave (cleaned; with a suffix when it was taken).
        seat: The order the student joined in, from 1.
        base_url: For an Anthropic SDK client (`anthropic.Anthropic(base_url=...)`).
        openai_base_url: For an OpenAI SDK client (`.../v1`).
        api_key: The join code, which the room takes as the key.
        headers: The student's name header, for an SDK client's `default_headers`.
    """

    def __init__(self, url: str, code: str, name: str, seat: int) -> None:
        self.url = url
        self.name = name
        self.seat = seat
        self.base_url = url
        self.openai_base_url = url + "/v1"
        self.api_key = code
        self.headers = {NAME_HEADER: encode_name(name)}
        self._agents = itertools.count(1)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Seat({self.name!r}, seat {self.seat}, {self.url})"

    def agent(self, **options: Any) -> Agent:
        """An `Agent` on the room's demo model, tagged with this student and a new agent id.

        Args:
            **options: Given to `Agent` (`retry=`, `limiter=`, `tools=`, ...), but `model`,
                `api_key` and `base_url`, which the seat sets.

        Returns:
            The agent.

        Raises:
            ConfigError: `options` names `model`, `api_key` or `base_url`, or is not an
                `Agent` argument.
        """
        taken = {"model", "api_key", "base_url"} & set(options)
        if taken:
            raise ConfigError(
                f"A seat's agent talks to the room; leave out {', '.join(sorted(taken))}."
            )
        with self._lock:
            number = next(self._agents)
        headers = {
            **self.headers,
            AGENT_HEADER: f"agent-{number}",
            POLICY_HEADER: policy_header(options.get("retry"), options.get("limiter")),
        }
        provider = AnthropicProvider(
            "demo",
            api_key=self.api_key,
            base_url=self.base_url,
            extra_headers=headers,
            name="classroom",
        )
        return Agent(provider, **options)


def join(url: str, *, code: str, name: str, timeout: float = 10.0) -> Seat:
    """Take a seat in the room at `url` with the teacher's join code.

    Args:
        url: The room's address, as the teacher showed it ("http://10.0.0.5:8765").
        code: The join code ("K7QF-29XD").
        name: Your name as the teacher's screen will show it (at most 40 characters).
        timeout: Seconds to wait for the room.

    Returns:
        The seat.

    Raises:
        AuthFailed: The room did not take the code.
        RoomFull: The room has as many students as it takes.
        ConfigError: The URL or the name cannot be used.
        TransportError: The room could not be reached.
    """
    base = _check_url(url)
    if not isinstance(code, str) or not code.strip() or not code.isascii():
        raise AuthFailed(
            "Classroom join code missing: pass the code the teacher showed, e.g. code='K7QF-29XD'.",
            provider="classroom",
            status_code=None,
        )
    if not isinstance(name, str):
        raise ConfigError(f"name must be text, got {type(name).__name__}.")
    try:
        reply = httpx.post(
            base + JOIN_PATH,
            json={"name": name},
            headers={"x-api-key": code.strip()},
            timeout=timeout,
        )
    except httpx.HTTPError as err:
        raise TransportError(
            f"Classroom at {base} could not be reached ({type(err).__name__}); "
            "check the address and that the room is still open.",
            provider="classroom",
        ) from None
    try:
        body = reply.json()
    except ValueError:
        body = {}
    detail = body.get("error", {}).get("message", "") if isinstance(body, dict) else ""
    if reply.status_code == 401:
        raise AuthFailed(
            f"Classroom at {base} did not accept the join code {code.strip()!r}; "
            "check it against the one the teacher showed.",
            provider="classroom",
            status_code=401,
        )
    if reply.status_code == 409:
        raise RoomFull(detail or "The room is full.")
    if reply.status_code == 400:
        raise ConfigError(detail or "The room did not accept that name.")
    if reply.status_code != 200 or not isinstance(body, dict) or "name" not in body:
        raise TransportError(
            f"Classroom at {base} answered the join with HTTP {reply.status_code}; "
            "is this the address of a classroom?",
            provider="classroom",
            status_code=reply.status_code,
        )
    return Seat(base, code.strip(), str(body["name"]), int(body.get("seat", 0)))
