"""Replaying a recording through an agent: the model string `"replay:<recording>"`.

`Agent("replay:storm.nbrec")` starts a mock server that answers with the recording's answers
(`MockServer(replay=...)`) and talks to it in the wire format and with the model the recording
names. `<recording>` is a path, or the name of a recording shipped with nbagent
(`shipped_recordings()`: "gemini-free-tier", "anthropic-overload-storm").
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..mock import MockServer, route
from ..providers import Provider
from ..providers._models import _READERS, PROVIDERS
from ..recording import SUFFIX, Recording, read_recording

RECORDINGS = Path(__file__).with_name("recordings")
REPLAY_KEY = "replay-key-not-secret"  # the mock server wants some key; a replay needs no real one

_servers: list[MockServer] = []
_lock = threading.Lock()


def shipped_recordings() -> dict[str, Path]:
    """The recordings that come with nbagent, by name.

    Returns:
        Each shipped `.nbrec` file's path, by its name (the file's stem), sorted.
    """
    return {p.stem: p for p in sorted(RECORDINGS.glob("*" + SUFFIX))}


def recording_path(name: str | Path) -> Path:
    """A recording's path: a shipped recording's name, or a path to a file.

    Args:
        name: A shipped recording's name (see `shipped_recordings`), or a path to a `.nbrec` file.

    Returns:
        The file's path.

    Raises:
        ConfigError: Neither a shipped recording nor a file; the message lists the shipped names.
    """
    text = str(name).strip()
    shipped = shipped_recordings()
    if text in shipped:
        return shipped[text]
    path = Path(text).expanduser()
    if path.is_file():
        return path
    names = ", ".join(repr(n) for n in shipped) or "none"
    raise ConfigError(
        f"no recording {text!r}: pass the path of a {SUFFIX} file or the name of a shipped "
        f"recording ({names})."
    )


def _wire(recording: Recording) -> tuple[str, str]:
    """The provider registry's row that speaks the recording's wire format, and its model."""
    if not recording.exchanges:
        raise ConfigError(
            f"the recording {recording.path} holds no requests: there is nothing to replay."
        )
    first = recording.exchanges[0]
    found = route(first.path)
    if found is None or found.azure:
        raise ConfigError(
            f"the recording {recording.path} went to {first.path}, which Agent('replay:...') "
            "cannot aim at: serve it with MockServer(replay=...) and point your client there."
        )
    return _READERS[(found.format, False)], first.model or found.model or "replay"


def replay_provider(
    rest: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    speed: float = 1.0,
    **options: Any,
) -> Provider:
    """The provider for `"replay:<rest>"`: the recording's wire format and model, against a mock
    server replaying it at `speed` (started here on 127.0.0.1, unless `base_url` names one
    already replaying it)."""
    recording = read_recording(recording_path(rest))
    name, model = _wire(recording)
    url = base_url
    if url is None:
        server = MockServer(replay=recording, speed=speed).start()
        with _lock:
            _servers.append(server)
        url = server.openai_base_url if name.startswith("openai") else server.url
    options.setdefault("name", name)
    return PROVIDERS[name].wire(model, api_key=api_key or REPLAY_KEY, base_url=url, **options)


@atexit.register
def _stop_servers() -> None:
    with _lock:
        servers = list(_servers)
        _servers.clear()
    for server in servers:
        server.stop(timeout=1.0)
