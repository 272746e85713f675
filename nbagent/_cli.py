"""The `nbagent` command: `nbagent demo` (the offline demo) and `nbagent serve` (the mock)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _demo(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nbagent demo",
        description="Run the offline demo: every failure action, no key, no internet.",
    )
    parser.add_argument(
        "--out", default="nbagent-demo", help="output folder (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed for jitter and random faults")
    parser.add_argument(
        "--faults",
        default=None,
        help="comma-separated fault script for the whole demo, e.g. '429:retry_after=2,500,ok' "
        "(default: a script that shows all four actions)",
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="add random faults on this share of requests (0..1), drawn from --seed",
    )
    parser.add_argument(
        "--model",
        default="demo",
        help="'demo' (default) or a real model such as anthropic:claude-sonnet-4-5 (needs its key)",
    )
    args = parser.parse_args(list(argv))
    from .demo._command import run_demo
    from .errors import ConfigError

    faults = None if args.faults is None else [f for f in args.faults.split(",") if f.strip()]
    if not 0 <= args.fault_rate <= 1:
        parser.error("--fault-rate is a share of requests between 0 and 1")
    try:
        run_demo(
            args.out, seed=args.seed, faults=faults, fault_rate=args.fault_rate, model=args.model
        )
    except (ConfigError, ValueError) as exc:
        print(f"nbagent demo: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(
            "usage: nbagent {demo,serve} [options]\n\n"
            "  demo   run the offline demo (no key, no internet)\n"
            "  serve  run the loopback mock provider in the foreground"
        )
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "demo":
        return _demo(rest)
    if command == "serve":
        from .mock._cli import main as serve_main

        return serve_main(rest)
    print(f"nbagent: unknown command {command!r}; use 'demo' or 'serve'", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
