"""Watching an SDK client: the CPU the watcher adds to the anthropic SDK's own, per streamed reply.

One reply of 20,000 text deltas (`[demo:deltas=N]` against the mock server, which runs in its own
process), read with
`messages.stream()` by an unwatched `anthropic.Anthropic` and by `nbagent.watch` of the same
client, and by `nbagent.guard` of it (nbagent's transport deciding about each attempt), in turns
run back to back; the median of the turns' ratios is the figure. Goals: watching adds at most
5 %, and so does guarding.

The figure is the CPU time of the thread that reads (`time.thread_time`): the SDK and the
watcher both run there (the watcher has no thread of its own), while threads other benchmarks
of the same process left behind (Ray's driver, in a full run) do not count towards it.
"""

from __future__ import annotations

import time
from typing import Any

from common import Goal, Report, median, mock_process

import nbagent

MODEL = "demo"


def _read(client: Any, deltas: int) -> int:
    with client.messages.stream(
        model=MODEL,
        max_tokens=100_000,
        messages=[{"role": "user", "content": f"[demo:deltas={deltas}] Go."}],
    ) as stream:
        n = 0
        for text in stream.text_stream:
            n += len(text)
    return n


def run(short: bool = False) -> Report:
    import anthropic

    deltas = 2_000 if short else 20_000
    repeats = 3 if short else 9
    rep = Report(f"watch: one reply of {deltas:,} text deltas through the anthropic SDK")
    with mock_process() as url:
        plain = anthropic.Anthropic(base_url=url, api_key="bench", max_retries=0)
        w = nbagent.watching(anthropic.Anthropic(base_url=url, api_key="bench", max_retries=0))
        guarded = nbagent.guard(anthropic.Anthropic(base_url=url, api_key="bench"))
        clients = {
            "anthropic SDK": plain,
            "anthropic SDK, watched": w.client,
            "anthropic SDK, guarded": guarded,
        }
        cpu: dict[str, list[float]] = {name: [] for name in clients}
        for c in clients.values():  # warm up: imports, connections
            _read(c, 10)
        order = list(clients.items())
        for i in range(repeats):
            # each pair in turn order (ABBA...), so a drift of the machine's speed is shared
            for name, c in order if i % 2 == 0 else order[::-1]:
                t0 = time.thread_time()
                n = _read(c, deltas)
                cpu[name].append(time.thread_time() - t0)
                assert n > deltas, f"{name} read only {n} characters"
        for watcher in (w, nbagent.watching(guarded)):
            attempts = watcher.attempts
            assert len(attempts) == repeats + 1 and (attempts["outcome"] == "ok").all()
        plain.close()
        w.client.close()
        guarded.close()
    med = {k: median(v) for k, v in cpu.items()}
    base = med["anthropic SDK"]
    rows = [[k, v, v / base, 1e6 * v / deltas] for k, v in med.items()]
    rep.table(["client", "CPU seconds", "x unwatched", "us/delta"], rows)
    # the median of the pairs' ratios: each pair ran back to back, so a slow spell of a shared
    # machine (seen: the same read taking 1.5 s in one pair and 2.1 s in the next) moves both
    for name, label in (("watched", "watched / unwatched"), ("guarded", "guarded / unguarded")):
        pairs = zip(cpu["anthropic SDK"], cpu[f"anthropic SDK, {name}"], strict=True)
        ratio = median([theirs / plain for plain, theirs in pairs])
        rep.goals.append(Goal(f"{label} client CPU, median of pairs", ratio, 1.05))
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
