"""Replaying recorded runs against the agent as it is now, outside the job (docs/replay.md).

* :mod:`.recorded` -- the states of a store topic or an exported file, grouped into runs;
* :mod:`.serving` -- :class:`ReplayBook`: what recorded-only durable calls could not serve;
* :mod:`.replayer` -- :func:`replay_runs`: re-execute each run and compare it with its record.

The commands (``flink-agents store export``, ``flink-agents replay``) are in
:mod:`flink_agents.cli`.

Nothing is imported here, so the command line loads the engine only when a replay runs.
"""
