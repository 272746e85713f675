"""Everything the offline demo needs, in one place.

- the demo model (`demo_reply`): deterministic, tool-using replies computed from the
  conversation, served by the loopback mock server over real HTTP (`model="demo"`);
- its tools (`calculator`, `file_tools` over the bundled `data/` folder) and an MCP notes server
  (`notes_source()`, `python -m nbagent.demo.notes_server`);
- `run_demo`, the `nbagent demo` command;
- two recordings assembled from real provider answers (`shipped_recordings()`), replayed by
  `Agent("replay:<name>")` and `nbagent demo --replay <name>`.

`install()` registers the demo model with the providers (the model string "demo") and as the
mock server's default responder; `import nbagent` calls it.
"""

from ._command import DEMO_PLAN, DemoStep, run_demo
from ._install import install
from ._model import demo_reply
from ._replay import recording_path, shipped_recordings
from ._servers import NOTES_SERVER, notes_server_command, notes_source
from ._tools import DEMO_DATA, calculator, file_tools

__all__ = [
    "DEMO_DATA",
    "DEMO_PLAN",
    "NOTES_SERVER",
    "DemoStep",
    "calculator",
    "demo_reply",
    "file_tools",
    "install",
    "notes_server_command",
    "notes_source",
    "recording_path",
    "run_demo",
    "shipped_recordings",
]
