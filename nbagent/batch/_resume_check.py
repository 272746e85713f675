"""Before a provider batch is resumed: is the server it went to still there?

The demo model's batches live in its loopback mock server, inside the process that began them.
Resumed in a new process, the stored URL leads nowhere, and the client used to find out after
its retries, with a `ConnectError`. One connect says so at once, in a sentence that says why.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from ..errors import ConfigError

__all__ = ["refuse_a_gone_demo_server"]


def refuse_a_gone_demo_server(provider: str, url: str | None, state: str) -> None:
    """Raise a `ConfigError` when a demo batch's server is gone (nothing listens at `url`).

    Args:
        provider: The provider the state names ("demo" is checked; the others are not).
        url: The server's base URL, as stored or given.
        state: The state file, for the sentence.

    Raises:
        ConfigError: The demo model's server at `url` no longer answers.
    """
    if provider != "demo" or not url:
        return
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 2.0):
            return
    except OSError:
        pass
    raise ConfigError(
        f"the demo batch in {state} cannot be resumed here: its batches lived in the demo "
        f"model's loopback server ({url}), which ran inside the process that began it and "
        "ended with it; run the map() again (a demo batch takes seconds)"
    )
