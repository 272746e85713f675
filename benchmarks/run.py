"""Run every benchmark: `python benchmarks/run.py` (full) or `--short` (CI: checks they work).

Each benchmark prints its table, its ratios and PASS/MISS against its goal. Short mode uses tiny
sizes and asserts no times. `--only NAME` runs one of: streaming, contention, bookkeeping,
timing, ray, watch, replay, first_attempt, provider_batch, output, classroom. `--write FILE`
also saves the printed report (for benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_bookkeeping
import bench_classroom
import bench_contention
import bench_first_attempt
import bench_output
import bench_provider_batch
import bench_ray
import bench_replay
import bench_streaming
import bench_timing
import bench_watch
from common import machine

BENCHMARKS = {
    "streaming": bench_streaming.run,
    "contention": bench_contention.run,
    "bookkeeping": bench_bookkeeping.run,
    "timing": bench_timing.run,
    "ray": bench_ray.run,
    "watch": bench_watch.run,
    "replay": bench_replay.run,
    "first_attempt": bench_first_attempt.run,
    "provider_batch": bench_provider_batch.run,
    "output": bench_output.run,
    "classroom": bench_classroom.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--short", action="store_true", help="tiny sizes, one repeat")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append")
    parser.add_argument("--write", metavar="FILE", help="also write the report to FILE")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    head = f"machine: {machine()}\nmode: {'short' if args.short else 'full'}"
    print(head, flush=True)
    texts, missed = [head], []
    for name, fn in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        rep = fn(args.short)
        texts.append(rep.show())
        missed += [f"{name}: {g.name}" for g in rep.goals if not g.ok]
    tail = f"total {time.perf_counter() - t0:.0f} s; goals missed: {len(missed)}"
    print(tail, flush=True)
    texts.append(tail)
    if args.write:
        with open(args.write, "w") as f:
            f.write("\n\n".join(texts) + "\n")
    return 0  # times are reported, never asserted


if __name__ == "__main__":
    sys.exit(main())
