"""``nbagent classroom``: open a room in the foreground until Ctrl-C.

Every mistake is one sentence on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence

from .._core._command_line import Parser, UsageError, number
from ._server import Classroom

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="nbagent classroom",
        description="Open a classroom: one room server for a class of notebooks, a shared "
        "capacity, scenarios, and the teacher's live dashboard.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; a room on a "
        "network is 0.0.0.0)",
    )
    parser.add_argument(
        "--port",
        type=number(int, "a port number from 0 to 65535", 0, 65535),
        default=0,
        help="port (0: a free one)",
    )
    parser.add_argument(
        "--capacity",
        type=number(float, "a positive number of requests per second", 0.001),
        default=10.0,
        help="requests per second for the whole room (default %(default)s)",
    )
    parser.add_argument(
        "--max-students",
        type=number(int, "a whole number, 1 or more", 1),
        default=200,
        help="room size (default %(default)s)",
    )
    parser.add_argument(
        "--simulate",
        type=number(int, "a whole number of students", 0),
        default=0,
        metavar="N",
        help="fill the room with N seeded virtual students (rehearse alone)",
    )
    parser.add_argument(
        "--seed",
        type=number(int, "a whole number", -(2**62)),
        default=0,
        help="seed for the scenarios and the virtual students",
    )
    parser.add_argument(
        "--refusal",
        choices=("429", "529"),
        default="429",
        help="what a request past the capacity gets (default 429, with Retry-After)",
    )
    return parser


def _open(args: argparse.Namespace) -> Classroom:
    try:
        room = Classroom(
            host=args.host,
            port=args.port,
            capacity_rps=args.capacity,
            max_students=args.max_students,
            seed=args.seed,
            refusal=args.refusal,
        )
        return room.start()
    except ValueError as bad:
        raise UsageError(f"nbagent classroom: {bad}") from None
    except OSError as err:
        where = f"{args.host}:{args.port}"
        raise UsageError(
            f"nbagent classroom: cannot listen on {where} ({err.strerror or err}); "
            "choose another --port or --host."
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run a room until interrupted (`nbagent classroom`).

    Args:
        argv: The arguments; None for `sys.argv[1:]`.

    Returns:
        The exit code: 0 once closed, 2 for a mistake (one sentence on stderr).
    """
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        room = _open(args)
    except UsageError as mistake:
        print(mistake, file=sys.stderr)
        return 2
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    try:
        if room.local_only:
            print(
                f"Listening on {args.host} only: students on other machines cannot reach "
                "this room (use --host 0.0.0.0 for a room on a network)."
            )
        else:
            print(
                f"Listening on {args.host}, port {room.mock.port}: anyone on this network "
                "with the join code can take a seat."
            )
        print("Students run:")
        print(f"    import nbagent.classroom\n    seat = {room.join_line}")
        print(f"Teacher's dashboard (keep this link to yourself): {room.teacher_url}")
        if args.simulate:
            room.simulate(args.simulate)
            print(f"{args.simulate} virtual students have joined.")
        print("Ctrl-C closes the room.", flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        print("The room is closed.", file=sys.stderr)
    finally:
        room.stop()
    return 0
