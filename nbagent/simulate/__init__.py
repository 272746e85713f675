"""Backoff in virtual time: an hour of retries in a fraction of a second.

The simulations drive the agent's own decision (`decide`, with the real `RetryPolicy`'s
backoff, jitter and caps) with no sleeping, and emit the same events the agent emits into an
`AttemptLog`, so they return attempt frames with exactly the columns of `agent.attempts` and
every plot of `nbagent.analysis` applies::

    df = simulate_retries(RetryPolicy(max_attempts=6, seed=1), fail_rate=0.4, n_runs=50, seed=1)
    plot_backoff(df, policy)

    compare_jitter(n_clients=50, seed=0)     # none vs full vs equal vs decorrelated

    result = what_if("storm.nbrec", policy=RetryPolicy(max_attempts=8), clients=3)
    result.comparison                        # recorded vs this policy, side by side
    plot_what_if(result)                     # nbagent.analysis: both timelines

`simulate_contention` is the experiment of the AWS Architecture Blog post "Exponential Backoff
And Jitter": N clients start at the same moment and race for one server; without jitter they
retry in lock-step and collide again and again. `what_if` takes its server from a recording
(`nbagent.recording`) or an attempt frame instead; `server_model` shows what it read there.
"""

from ._backoff import ContentionJitter, compare_jitter, simulate_contention, simulate_retries
from ._server_model import Bucket, ServerModel, server_model
from ._what_if import WhatIf, what_if

__all__ = [
    "Bucket",
    "ContentionJitter",
    "ServerModel",
    "WhatIf",
    "compare_jitter",
    "server_model",
    "simulate_contention",
    "simulate_retries",
    "what_if",
]
