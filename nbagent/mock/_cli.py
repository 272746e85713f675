"""``python -m nbagent.mock``: run the mock provider in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from ._emulate import EMULATIONS
from ._faults import Fault, parse_faults
from ._ratelimit import RateLimit
from ._server import MockServer

FAULTS_HELP = (
    "fault script, one entry per request, separated by spaces or commas, "
    "e.g. 429:retry_after=2 500 drop_after_tokens=20, or '429:retry_after=2,500,ok'"
)
_FAULT_PARAMS = ("retry_after", "should_retry")


def split_faults(texts: str | Iterable[str]) -> list[str]:
    """One fault script syntax for `nbagent serve`, `nbagent demo` and `%%agent`.

    Entries are separated by whitespace, ';' or ',' (within one argument or across several). A
    comma also separates a fault's own parameters (`429:retry_after=1,should_retry=false`), so
    a piece that is one of those parameters stays with the fault before it.
    """
    entries: list[str] = []
    for text in [texts] if isinstance(texts, str) else texts:
        for piece in re.split(r"[\s;,]+", text.strip()):
            if not piece:
                continue
            key = piece.partition("=")[0].lower()
            if key in _FAULT_PARAMS and entries and ":" in entries[-1]:
                entries[-1] += "," + piece
            else:
                entries.append(piece)
    return entries


# flag, the MockServer argument it sets (None: read in `main`), type, default, metavar, help
_OPTIONS: tuple[tuple[str, str | None, Any, Any, str | None, str], ...] = (
    ("--port", "port", int, 0, None, "port on 127.0.0.1 (0: a free one)"),
    ("--seed", "seed", int, None, None, "seed for random faults"),
    ("--requests-per-s", None, float, None, None, "rate limit (token bucket)"),
    ("--burst", None, int, 5, None, "rate limit bucket size"),
    ("--tokens-per-min", None, int, None, None, "prompt tokens per minute"),
    ("--context-window", "context_window", int, None, None, "tokens before overflow"),
    ("--delay", "demo_delay_s", float, 0.0, None, "seconds between streamed deltas"),
    ("--record", "record", str, None, "PATH", "append every exchange to a recording"),
    ("--replay", "replay", str, None, "PATH", "answer with a recording's answers"),
    ("--speed", "speed", float, 1.0, None, "with --replay: 2 is twice as fast (default 1)"),
    (
        "--batch-duration",
        "batch_duration_s",
        float,
        2.0,
        "S",
        "seconds a provider batch runs before it ends",
    ),
    (
        "--expire-after",
        "expire_after_s",
        float,
        None,
        "S",
        "a provider batch still running S s after creation expires",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbagent serve",
        description=(
            "Run the nbagent loopback mock provider (Anthropic, OpenAI Chat and Responses, "
            "Gemini and Azure wire formats)."
        ),
    )
    for flag, _, kind, default, metavar, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    parser.add_argument(
        "--faults", nargs="*", action="extend", default=[], metavar="FAULT", help=FAULTS_HELP
    )
    parser.add_argument(
        "--fault-rate",
        action="append",
        default=[],
        metavar="FAULT=P",
        help="random fault with probability P after the script, e.g. 500=0.1 (repeatable)",
    )
    parser.add_argument(
        "--emulate",
        choices=EMULATIONS,
        default=None,
        help="take on a server's quirks on the Chat Completions route (llama-cpp-python: "
        "interrupt_requests, no usage chunk, response_format json_object only)",
    )
    return parser


def _rates(entries: Sequence[str]) -> dict[str | Fault, float]:
    rates: dict[str | Fault, float] = {}
    for entry in entries:
        spec, eq, value = entry.rpartition("=")
        try:
            rates[spec] = float(value)
        except ValueError:
            eq = ""
        if not eq or not spec:
            raise ValueError(f"Fault rate {entry!r} must be written FAULT=P, e.g. 500=0.1.")
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted; print the URL first. Returns the process exit code.

    Args:
        argv: The arguments; None for `sys.argv[1:]`.

    Returns:
        0 once interrupted; 2 when an option is wrong or the port cannot be bound (one
            sentence on stderr).
    """
    args = build_parser().parse_args(argv)
    try:
        faults = parse_faults(split_faults(args.faults))
        rates = _rates(args.fault_rate)
        limit = None
        if args.requests_per_s is not None or args.tokens_per_min is not None:
            limit = RateLimit(args.requests_per_s or 10.0, args.burst, args.tokens_per_min)
        given = vars(args)
        settings = {name: given[flag[2:].replace("-", "_")] for flag, name, *_ in _OPTIONS if name}
        server = MockServer(
            faults, fault_rates=rates or None, rate_limit=limit, emulate=args.emulate, **settings
        )
        server.start()
    except (ValueError, OSError) as err:
        print(f"nbagent serve: {err}", file=sys.stderr)
        return 2
    print(f"nbagent mock provider listening on {server.url}", flush=True)
    print(
        f"  Anthropic: {server.url}/v1/messages   OpenAI: {server.url}/v1/chat/completions",
        flush=True,
    )
    print(
        f"  batches: {server.url}/v1/messages/batches, {server.url}/v1/batches, "
        f"{server.url}/v1beta/models/{{model}}:batchGenerateContent",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
