"""The Runs page's rows: each run of the event log (agent, key, seq) with its state, from the
executions ``flink-agents trace`` groups the records into."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from flink_agents.cli.trace_tree import RunExecution

RunState = Literal["running", "waiting", "failed", "finished", "cancelled"]
STATES: tuple[RunState, ...] = ("running", "waiting", "failed", "finished", "cancelled")
_STATE_OF = {"succeeded": "finished", "paused": "waiting", "failed": "failed"}


@dataclass(frozen=True)
class RunRow:
    """One run: its latest execution's state, and whether a failover made it run again."""

    agent: str
    key_json: str
    seq: int
    state: RunState
    replayed: bool
    """An execution of it was cut off (or cancelled) and the run executed again: a failover,
    not the resume after a wait."""
    executions: int
    started: float
    latency_ms: float | None
    calls: int
    tokens: int
    error: str | None

    @property
    def key_text(self) -> str:
        """The key as a person reads it: a string without its quotes."""
        value = json.loads(self.key_json)
        return value if isinstance(value, str) else self.key_json


def run_row(found: list[RunExecution]) -> RunRow:
    """The row of one run: its executions, in order."""
    last = found[-1]
    agent, key_json, seq = last.run
    end = last.finished
    state: RunState = "running" if end is None else _STATE_OF.get(end.status, "cancelled")  # type: ignore[assignment]
    calls = [
        call for execution in found for i in execution.invocations.values() for call in i.calls
    ]
    return RunRow(
        agent=agent,
        key_json=key_json,
        seq=seq,
        state=state,
        replayed=any(interrupted(execution) for execution in found),
        executions=len(found),
        started=found[0].started.time,
        latency_ms=None if end is None else end.latency_ms,
        calls=len(calls),
        tokens=sum(call.usage.total_tokens for call in calls if call.usage is not None),
        error=None if end is None else end.error,
    )


def interrupted(execution: RunExecution) -> bool:
    """Whether this execution was cut off by a failure (no end) or cancelled, and the run
    executed again: what a failover leaves."""
    end = execution.finished
    return execution.executed_again and (end is None or end.status == "cancelled")


def select(
    rows: list[RunRow],
    *,
    state: str | None = None,
    agent: str | None = None,
    key: str | None = None,
) -> list[RunRow]:
    """The rows of one state (``replayed``: the runs a failover executed again), one agent,
    and whose key holds ``key`` (as typed, or as JSON)."""
    found = rows
    if state == "replayed":
        found = [row for row in found if row.replayed]
    elif state:
        found = [row for row in found if row.state == state]
    if agent:
        found = [row for row in found if row.agent == agent]
    if key:
        found = [row for row in found if key in row.key_json]
    return found
