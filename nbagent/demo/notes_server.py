"""A tiny notes server speaking MCP over stdio, for nbagent's demos.

Tools: `add_note(title, text)`, `list_notes()`, `read_note(title)`, `delete_note(title)`.
Asking for a note that does not exist is an error result that names the titles there are, so a
model can recover from it. Notes live in memory, or in a JSON file with `--file PATH`.

    python notes_server.py [--file notes.json]

This file runs as a script in its own process: it imports only the standard library and `mcp`.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

MAX_TITLE = 100
MAX_TEXT = 20_000


class Notes:
    """The notes, in insertion order, optionally saved to a JSON file after each change."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.items: dict[str, str] = {}
        if path is not None and path.exists():
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
            if isinstance(data, dict):
                self.items = {str(k): str(v) for k, v in data.items()}

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.items, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def _known(self) -> str:
        titles = ", ".join(repr(t) for t in self.items)
        return f"Existing titles: {titles}." if titles else "There are no notes yet."

    def add(self, title: str, text: str) -> str:
        title = title.strip()
        if not title:
            raise ValueError("A note needs a non-empty title.")
        if len(title) > MAX_TITLE:
            raise ValueError(f"A title may have at most {MAX_TITLE} characters.")
        if len(text) > MAX_TEXT:
            raise ValueError(f"A note may have at most {MAX_TEXT} characters.")
        replaced = title in self.items
        self.items[title] = text
        self._save()
        return f"{'Replaced' if replaced else 'Saved'} note {title!r} ({len(text)} characters)."

    def list(self) -> str:
        if not self.items:
            return "There are no notes yet."
        return "\n".join(f"- {t} ({len(v)} characters)" for t, v in self.items.items())

    def read(self, title: str) -> str:
        if title not in self.items:
            raise KeyError(f"There is no note titled {title!r}. {self._known()}")
        return self.items[title]

    def delete(self, title: str) -> str:
        if title not in self.items:
            raise KeyError(f"There is no note titled {title!r}. {self._known()}")
        del self.items[title]
        self._save()
        return f"Deleted note {title!r}."


def build(notes: Notes) -> Any:
    """The MCP server object for `notes`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("notes", instructions="A small notebook of titled text notes.")

    def run(fn: Any, *args: Any) -> str:
        try:
            return str(fn(*args))
        except (KeyError, ValueError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            raise ToolError(str(message)) from None

    def add_note(title: str, text: str) -> str:
        """Save a note under a title (replacing any note with that title).

        Args:
            title: A short title, at most 100 characters.
            text: The note's text.

        Returns:
            What happened, in a sentence.
        """
        return run(notes.add, title, text)

    def list_notes() -> str:
        """List the titles of all notes, one a line, with their lengths."""
        return run(notes.list)

    def read_note(title: str) -> str:
        """Return the text of the note with this exact title.

        Args:
            title: The note's title, as `list_notes` shows it.

        Returns:
            The note's text.
        """
        return run(notes.read, title)

    def delete_note(title: str) -> str:
        """Delete the note with this exact title.

        Args:
            title: The note's title, as `list_notes` shows it.

        Returns:
            What happened, in a sentence.
        """
        return run(notes.delete, title)

    for fn in (add_note, list_notes, read_note, delete_note):
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""))
    return server


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    path: Path | None = None
    if "--file" in args:
        i = args.index("--file")
        if i + 1 >= len(args):
            sys.exit("usage: notes_server.py [--file PATH]")
        path = Path(args[i + 1])
    build(Notes(path)).run()


if __name__ == "__main__":
    main()
