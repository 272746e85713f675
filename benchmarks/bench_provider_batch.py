"""Provider batches end to end: N items through `backend="provider"` against the mock's Message
Batches (in its own process): create (two batches of 50,000 at 100,000), poll, stream the
results, read every answer, build the frames. Each size runs in a fresh process, so its peak
memory (`ru_maxrss`) is its own.

The goal: memory that does not grow with the item count beyond what the results hold. The
requests are encoded and streamed to the create call item by item, and the results are read
line by line, so from the smaller run to the larger the peak should grow by little more than the
two frames (`results`, `attempts`) grow: at most twice as much."""

from __future__ import annotations

from common import Goal, Report, fresh_python, mock_process

SCRIPT = r"""
import json, resource, sys, time, tempfile, os, gc
import nbagent
from nbagent.providers._batch_wire import BatchCaps
n, url = int(sys.argv[1]), sys.argv[2]
prompts = [f"Summarise review number {i}: it arrived on time and works well." for i in range(n)]
gc.collect()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
out = nbagent.map(prompts, model="anthropic:claude-sonnet-4-0", backend="provider", base_url=url,
                  show=False, poll=(0.5, 1.0), max_tokens=64,
                  state=os.path.join(tempfile.mkdtemp(), "bench.batch"),
                  batch_caps=(50_000, 256 * 1024 * 1024))
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
frames = int(out.results.memory_usage(deep=True).sum() + out.attempts.memory_usage(deep=True).sum())
ok = int(out.results["error"].isna().sum())
print(json.dumps({"wall": wall, "base": base, "peak": peak, "frames": frames, "ok": ok,
                  "batches": int(out.attempts["batch_id"].nunique())}))
"""


def run(short: bool = False) -> Report:
    sizes = (1_000, 3_000) if short else (10_000, 100_000)
    rep = Report(f"provider batches: {sizes[0]:,} and {sizes[1]:,} items end to end")
    rows: list[list[object]] = []
    peaks: list[tuple[int, int]] = []
    with mock_process("--batch-duration", "1") as url:
        for n in sizes:
            r = fresh_python(SCRIPT, str(n), url)
            grown = r["peak"] - r["base"]
            overhead = max(0, grown - r["frames"])
            peaks.append((r["peak"], r["frames"]))
            rows.append([f"{n:,}", r["batches"], r["ok"], r["wall"], n / r["wall"],
                         r["peak"] / 2**20, r["frames"] / 2**20, overhead / 2**20,
                         overhead / n])  # fmt: skip
    rep.table(
        [
            "items",
            "batches",
            "ok",
            "seconds",
            "items/s",
            "peak MiB",
            "frames MiB",
            "overhead MiB",
            "overhead B/item",
        ],
        rows,
    )
    (a, b) = peaks
    ratio = (b[0] - a[0]) / (b[1] - a[1]) if b[1] > a[1] else float("nan")
    name = "peak growth / frames growth, smaller to larger run"
    if not short:
        rep.goals.append(Goal(name, ratio, 2.0))
    else:
        rep.lines.append(f"  {name}: {ratio:.2f} (short mode: no goal)")
    return rep


if __name__ == "__main__":
    run()
