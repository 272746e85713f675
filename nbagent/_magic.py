"""`%%agent`: exploratory prompting from a notebook cell.

    %load_ext nbagent

    %%agent --faults "429:retry_after=1,500"
    What is 17 * 23 + 4?

    %%agent --output Review
    Great kettle, boils fast.

`--output NAME` asks for a structured answer in the shape of `NAME` from the notebook's
namespace (a pydantic model, a dataclass, a TypedDict or a JSON Schema dict); the validated
value is `_agent_result.output` (and is printed when the cell waits).

The cell body is the prompt. The magics keep one agent per model string, so the conversation
continues from cell to cell (`--new` starts over); the agent is `_agent` in the notebook's
namespace (`_agent.attempts`, `_agent.history`).

How a cell runs. In a notebook the timeline appears under the cell and the run goes to a
background task on the kernel's event loop (`_agent_handle` is its `RunHandle`): the cell
returns at once, the kernel keeps handling messages, so the widget updates live and its Stop
button cancels the run on every ipykernel version. A blocking run could not offer that: while a
cell runs, the kernel does not read the button's comm messages, so Stop would only take effect
after the run had ended by itself. A further `%%agent` cell on the same agent queues behind the
running one. With `--wait` or `--no-widget`, and outside a notebook (IPython in a terminal), the
cell runs to completion instead (`Agent.run_sync`: a worker thread, nothing patched) and prints
the final text; the kernel's interrupt cancels it.

The demo model runs against a loopback mock server owned by the magics, so `--faults` can
script its failures cell by cell. The server is stopped by `%agent_reset`, by `%reload_ext`,
and at interpreter exit.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ._core._retry import RetryPolicy
from ._loop._blocking import loop_running
from .errors import NbAgentError
from .mock import parse_faults
from .mock._cli import split_faults
from .notebook import in_notebook

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ._loop._agent import Agent
    from ._loop._output_schema import OutputMode
    from ._loop._results import RunHandle, RunResult
    from ._loop._tools import Tool
    from .mock import MockServer
    from .notebook._widget import AgentView


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as IPython `UsageError`s instead of exiting (it has no
    help action, the other way argparse exits: `--help` is an option the magic reads)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%%agent: {message}\n{self.format_usage().rstrip()}")


def _parser() -> _Parser:
    p = _Parser(prog="%%agent", add_help=False, description="The cell body is the prompt.")
    p.add_argument("-h", "--help", action="store_true", help="show this help and do nothing")
    p.add_argument(
        "--model", default="demo", help="a model string (default: demo, the offline model)"
    )
    p.add_argument(
        "--faults",
        default=None,
        metavar="SCRIPT",
        help="demo model only: the mock server's fault script for this cell, one entry per "
        "request, separated by commas or spaces, e.g. '429:retry_after=1,500'",
    )
    p.add_argument(
        "--delay",
        type=float,
        default=None,
        metavar="S",
        help="demo model only: seconds between streamed deltas (a slow stream)",
    )
    p.add_argument(
        "--output",
        default=None,
        metavar="NAME",
        help="a structured answer in the shape of NAME, a schema in the notebook's namespace "
        "(a pydantic model, dataclass, TypedDict or JSON Schema dict)",
    )
    p.add_argument(
        "--output-mode",
        choices=("auto", "native", "tool", "prompted"),
        default="auto",
        help="how the schema reaches the model (with --output; default: auto)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed for the retry jitter")
    p.add_argument(
        "--max-attempts", type=int, default=None, metavar="N", help="attempts per request"
    )
    p.add_argument("--system", default=None, help="the system prompt (kept for later cells)")
    p.add_argument("--new", action="store_true", help="start a new conversation")
    p.add_argument(
        "--tools",
        choices=("demo", "none"),
        default=None,
        help="demo: a calculator and a read-only file browser (default for the demo model); "
        "none: no tools (default for other models)",
    )
    p.add_argument(
        "--no-widget", action="store_true", help="no timeline; run to completion and print"
    )
    p.add_argument(
        "--wait", action="store_true", help="show the timeline but block the cell until done"
    )
    return p


@magics_class
class AgentMagics(Magics):
    """The `%%agent` cell magic and the `%agent_reset` line magic."""

    def __init__(self, shell: InteractiveShell | None = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.agents: dict[str, Agent] = {}
        self.handles: dict[Agent, RunHandle] = {}  # the latest background run of each agent
        self.server: MockServer | None = None
        self.view: AgentView | None = None  # the timeline shown by the latest cell
        self._parser = _parser()
        atexit.register(self.close)

    # -- the magics -------------------------------------------------------------------------

    @cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Prompt an agent; the cell body is the prompt and the conversation continues.

        %%agent [--model demo] [--faults "429:retry_after=1,500"] [--delay S] [--seed N]
                [--max-attempts N] [--system "..."] [--new] [--tools demo|none]
                [--output NAME] [--output-mode auto|native|tool|prompted]
                [--no-widget] [--wait]

        In a notebook the run goes to the background with the live timeline under the cell
        (its Stop button cancels it); `_agent` is the agent, `_agent_handle` the run's handle
        (`await _agent_handle` for the result), `_agent_result` the last finished result.
        `--wait` / `--no-widget` (and IPython in a terminal) run to completion and print the
        final text. `%%agent --help` lists the options.
        """
        opts = self._parse(line)
        if opts is None:
            return
        prompt = (cell or "").strip()
        if not prompt:
            raise UsageError("%%agent: the cell body is the prompt, and it is empty")
        agent = self._agent_for(opts)
        self._ns()["_agent"] = agent
        show = not opts.no_widget and in_notebook()
        if show and not opts.wait and loop_running():
            self._start(agent, opts, prompt)
            return
        self._run_now(agent, opts, prompt, show)

    @line_magic
    def agent_reset(self, line: str = "") -> None:
        """Forget every `%%agent` conversation and stop the demo model's mock server."""
        self.reset()

    def reset(self) -> None:
        """What `%agent_reset` does: cancel background runs, forget the agents, stop the server."""
        for handle in self.handles.values():
            handle.cancel()
        self.handles.clear()
        self.agents.clear()
        self._stop_server()
        for name in ("_agent", "_agent_handle", "_agent_result"):
            self._ns().pop(name, None)

    def close(self) -> None:
        """Stop the mock server (on reload and at interpreter exit)."""
        self._stop_server()
        atexit.unregister(self.close)

    # -- parts --------------------------------------------------------------------------------

    def _ns(self) -> dict[str, Any]:
        return self.shell.user_ns if self.shell is not None else {}

    def _parse(self, line: str) -> argparse.Namespace | None:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%%agent: cannot read the options ({exc})") from None
        args = self._parser.parse_args(argv)
        if args.help:
            print(self._parser.format_help())
            return None
        if args.max_attempts is not None and args.max_attempts < 1:
            raise UsageError("%%agent: --max-attempts must be 1 or more")
        if args.delay is not None and not 0 <= args.delay <= 60:
            raise UsageError("%%agent: --delay is seconds between deltas, from 0 to 60")
        if args.wait and args.no_widget:
            raise UsageError("%%agent: --no-widget already waits; drop --wait")
        # the options as parsed, but for the fault script and the schema, read here
        if args.faults is not None:
            try:
                args.faults = parse_faults(split_faults(args.faults))
            except ValueError as exc:
                raise UsageError(f"%%agent: --faults: {exc}") from None
        if args.output is not None:
            ns = self._ns()
            if args.output not in ns:
                raise UsageError(
                    f"%%agent: --output {args.output}: no such name in the notebook; define "
                    "the schema first (a pydantic model, a dataclass, a TypedDict or a dict)"
                )
            from ._loop._output_schema import OutputSchema

            try:
                args.output = OutputSchema.of(ns[args.output])
            except NbAgentError as exc:
                raise UsageError(f"%%agent: --output {args.output}: {exc}") from None
        elif args.output_mode != "auto":
            raise UsageError("%%agent: --output-mode goes with --output NAME")
        if args.model != "demo" and (args.faults is not None or args.delay is not None):
            which = "--faults" if args.faults is not None else "--delay"
            raise UsageError(
                f"%%agent: {which} scripts the offline mock server, so it works with "
                f"--model demo only (not {args.model!r})"
            )
        return args

    def _agent_for(self, opts: argparse.Namespace) -> Agent:
        from ._loop._agent import Agent

        agent = None if opts.new else self.agents.get(opts.model)
        tools = opts.tools or ("demo" if opts.model == "demo" else "none")
        had = "demo" if agent is not None and agent.toolbox.names else "none"
        if agent is not None and opts.tools is not None and had != tools:
            raise UsageError(
                f"%%agent: this conversation was started with --tools {had}; "
                f"add --new to start a new one with --tools {tools}"
            )
        # the retry settings this cell names (a new agent's policy, or a change to the old one)
        retry = {"max_attempts": opts.max_attempts, "seed": opts.seed}
        changes: dict[str, Any] = {k: v for k, v in retry.items() if v is not None}
        if agent is None:
            base_url = self._server().url if opts.model == "demo" else None
            try:
                agent = Agent(
                    opts.model,
                    tools=_tools(tools),
                    system=opts.system,
                    retry=RetryPolicy(**changes),
                    base_url=base_url,
                )
            except NbAgentError as exc:
                raise UsageError(f"%%agent: {exc}") from None
            self.agents[opts.model] = agent
            return agent
        if opts.system is not None:
            agent.system = opts.system
        if changes:
            agent.retry = replace(agent.retry, **changes)  # reseeds the jitter
        return agent

    def _server(self) -> MockServer:
        from .mock import MockServer

        if self.server is None or not self.server.running:
            self.server = MockServer().start()
        return self.server

    def _stop_server(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def _prepare(self, agent: Agent, opts: argparse.Namespace) -> None:
        """Set the agent's output mode (`--output-mode`) and the mock server up for this cell's
        requests (just before its run starts)."""
        if opts.output is not None:
            agent.output_mode = cast("OutputMode", opts.output_mode)
        if opts.model != "demo":
            return
        server = self._server()
        server.set_faults(opts.faults or [])
        server.demo_delay_s = opts.delay or 0.0

    def _start(self, agent: Agent, opts: argparse.Namespace, prompt: str) -> None:
        """Background run on the kernel's loop, with the timeline shown under this cell now."""
        from .notebook._display import start_shown

        previous = self.handles.get(agent)
        if previous is not None and previous.done():
            previous = None

        async def before() -> None:
            if previous is not None:
                # Queue behind the running cell of this conversation, whatever its outcome.
                await asyncio.wait([previous.task])
            self._prepare(agent, opts)

        handle, view = start_shown(agent, prompt, before=before, output=opts.output)
        self.handles[agent] = handle
        self.view = view
        ns = self._ns()
        ns["_agent_handle"] = handle
        handle.task.add_done_callback(_keep_result(ns))

    def _run_now(self, agent: Agent, opts: argparse.Namespace, prompt: str, show: bool) -> None:
        running = self.handles.get(agent)
        if running is not None and not running.done():
            raise UsageError(
                "%%agent: the previous run of this conversation is still going in the "
                "background; wait for it (`await _agent_handle`) or press its Stop button"
            )
        self._prepare(agent, opts)
        result = agent.run_sync(prompt, show=show, output=opts.output)
        self._ns()["_agent_result"] = result
        print(result.output if opts.output is not None else result.final_text)


def _tools(choice: str) -> list[Tool]:
    if choice == "none":
        return []
    from .demo._tools import calculator, file_tools

    return [calculator, *file_tools()]


def _keep_result(ns: dict[str, Any]) -> Callable[[asyncio.Task[RunResult]], None]:
    def done(task: asyncio.Task[RunResult]) -> None:
        if task.cancelled() or task.exception() is not None:
            return  # the timeline shows why; `await _agent_handle` raises it
        ns["_agent_result"] = task.result()

    return done


def help_alone(lines: list[str]) -> list[str]:
    """An input transformer: `%%agent --help` in a cell with no body shows the help.

    IPython refuses a cell magic whose body is empty before the magic is called ("the cell
    body is empty"), yet `%%agent --help` alone is the natural way to ask for the options. Such
    a cell, and only such a cell, gets a blank body, so the magic runs and prints its help.
    """
    words = lines[0].split() if lines else []
    asks = words[:1] == ["%%agent"] and ("-h" in words or "--help" in words)
    if asks and not "".join(lines[1:]).strip():
        return [lines[0].rstrip("\n") + "\n", "\n"]
    return lines


def load_ipython_extension(shell: Any) -> None:
    """`%load_ext nbagent`: register `%%agent` and `%agent_reset`.

    `%reload_ext nbagent` comes here again: the previous magics' runs are cancelled and their
    mock server stopped before the new magics replace them.
    """
    previous = shell.magics_manager.registry.get("AgentMagics")
    if isinstance(previous, AgentMagics):
        previous.reset()
        previous.close()
    shell.register_magics(AgentMagics(shell))
    cleanup = shell.input_transformers_cleanup
    cleanup[:] = [t for t in cleanup if getattr(t, "__name__", "") != help_alone.__name__]
    cleanup.append(help_alone)
