"""The core: what every other layer stands on, and which imports nothing above it.

Clock, retry policy and the one decision, the attempt loop, messages, usage and budgets, and
the seams upper layers fill (the presenter that shows a run in a notebook, the pacer that holds
a request back). `nbagent.errors` and `nbagent.events` belong to this layer too; they are
public modules because their names are contracts.
"""
