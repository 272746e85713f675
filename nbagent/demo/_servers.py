"""Small MCP servers shipped with nbagent, for demos that need no network and no keys.

`notes_source()` is an `MCPSource` for the notes server (`add_note`, `list_notes`, `read_note`,
`delete_note`), run over stdio with the current Python::

    from nbagent import Agent
    from nbagent.demo._servers import notes_source

    async with notes_source() as notes:
        agent = Agent("demo", tools=[notes])
        await agent.run("Save a note called 'groceries' with 'eggs, milk'")
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._mcp._source import MCPSource


NOTES_SERVER = Path(__file__).with_name("notes_server.py")
"""The demo's MCP notes server script (run with `python -m nbagent.demo.notes_server`)."""


def notes_server_command(notes_file: str | None = None) -> list[str]:
    """The command line that runs the notes server over stdio (optionally saving to a file).

    Args:
        notes_file: A JSON file the server keeps its notes in; None to keep them in memory.

    Returns:
        The argv, with this Python.
    """
    argv = [sys.executable, str(NOTES_SERVER)]
    if notes_file is not None:
        argv += ["--file", str(notes_file)]
    return argv


def notes_source(*, notes_file: str | None = None, **options: Any) -> MCPSource:
    """An `MCPSource` named `notes` for the demo notes server; `options` go to `MCPSource`.

    Args:
        notes_file: A JSON file the server keeps its notes in; None for memory.
        **options: Given to `MCPSource` (`name` defaults to "notes").

    Returns:
        The tool source, not yet started.
    """
    from .._mcp._source import MCPSource

    options.setdefault("name", "notes")
    return MCPSource(notes_server_command(notes_file), **options)
