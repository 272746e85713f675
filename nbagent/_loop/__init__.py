"""The agent loop: the agent, its run, compaction, tools, the rate limiter and the attempt log.

Imports the providers and the core, nothing above them.
"""
