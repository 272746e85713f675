"""The `nbagent` command: `nbagent demo` (the offline demo), `nbagent serve` (the mock) and
`nbagent classroom` (a room for a class).

A newcomer's first contact with the package, often typed carelessly: every mistake gets one
sentence on stderr and exit code 2, never a traceback; Ctrl-C gets one line and exit code 130
(the demo writes the steps that had finished first).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._core._command_line import Parser, UsageError, number
from ._core._words import counted

_USAGE = (
    "usage: nbagent {demo,serve,classroom} [options]\n"
    "       nbagent --version\n\n"
    "  demo       run the offline demo (no key, no internet)\n"
    "  serve      run the loopback mock provider in the foreground\n"
    "  classroom  open a room for a class of notebooks (the teacher's dashboard)\n\n"
    "'nbagent demo --help', 'nbagent serve --help' and 'nbagent classroom --help' list "
    "their options."
)


def _demo_parser() -> Parser:
    from .mock._cli import FAULTS_HELP

    parser = Parser(  # an option not given is left out: run_demo's own default applies
        prog="nbagent demo",
        description="Run the offline demo: every failure action, no key, no internet.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--out",
        dest="out_dir",
        help="output folder (default: nbagent-demo)",
    )
    parser.add_argument(
        "--seed",
        type=number(int, "a whole number"),
        help="seed for jitter and random faults",
    )
    parser.add_argument(
        "--faults",
        nargs="+",
        action="extend",
        metavar="FAULT",
        help=FAULTS_HELP + " (default: a script that shows all four actions)",
    )
    parser.add_argument(
        "--fault-rate",
        type=number(float, "a share of requests between 0 and 1", 0.0, 1.0),
        help="add random faults on this share of requests (0..1), drawn from --seed",
    )
    parser.add_argument(
        "--model",
        help="'demo' (default) or a real model such as anthropic:claude-sonnet-4-5 (needs its key)",
    )
    parser.add_argument(
        "--replay",
        metavar="NAME",
        help="replay a recording instead: a .nbrec path, or a shipped one "
        "(gemini-free-tier, anthropic-overload-storm)",
    )
    parser.add_argument(
        "--speed",
        type=number(float, "a positive number"),
        help="with --replay: how fast the recorded answers come (1: as recorded)",
    )
    return parser


def _demo(argv: Sequence[str]) -> int:
    given = vars(_demo_parser().parse_args(list(argv)))
    from .demo._command import DemoInterrupted, run_demo
    from .errors import ConfigError
    from .mock._cli import split_faults

    if "faults" in given:
        given["faults"] = split_faults(given["faults"])
    if "replay" in given and ("faults" in given or given.get("model", "demo") != "demo"):
        raise UsageError("nbagent demo: --replay cannot be combined with --faults or --model.")
    try:
        run_demo(**given)  # the options are named as run_demo's arguments
    except ConfigError as exc:
        raise UsageError(f"nbagent demo: {exc}") from None
    except DemoInterrupted as stop:
        done = stop.result
        if done.files:
            steps = len(done.outcomes)
            print(
                f"nbagent demo: interrupted; the {counted(steps, 'finished step')} "
                f"{'are' if steps != 1 else 'is'} in {done.out_dir}",
                file=sys.stderr,
            )
        else:
            print(
                "nbagent demo: interrupted before a step finished; nothing written",
                file=sys.stderr,
            )
        return 130
    return 0


def _version() -> str:
    from ._core._distribution import DISTRIBUTION, installed_version

    found = installed_version()
    if found is None:  # run from a source tree that was never installed
        return f"{DISTRIBUTION} (not installed; version unknown)"
    return f"{DISTRIBUTION} {found}"


def _main(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(_version())
        return 0
    command, rest = args[0], args[1:]
    if command == "demo":
        return _demo(rest)
    if command == "serve":
        from .mock._cli import main as serve_main

        return serve_main(rest)
    if command == "classroom":
        from .classroom import main as classroom_main

        return classroom_main(rest)
    raise UsageError(f"nbagent: unknown command {command!r}; use 'demo', 'serve' or 'classroom'.")


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit code (2 for a mistake, 130 for Ctrl-C)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nbagent: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else 0
    except OSError as exc:  # a disk that filled up, a folder removed while the demo ran
        print(f"nbagent: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
