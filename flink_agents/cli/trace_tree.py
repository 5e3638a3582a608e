"""``flink-agents trace``: an event log file as one tree per run.

Each execution of a run is a tree::

    run weather_react "Oslo" #0  succeeded  41.2 ms  outputs 1
      action chat_action on InputEvent 1f2e3d4c  12.0 ms
        call chat  model  live  10.1 ms  attempts 1  tokens 12/7
        event ToolRequestEvent 9a8b7c6d

A run executed again after a restore (its first execution cut off by the failure, or replayed
from a checkpoint) gets a second tree, marked ``execution 2``: its calls recorded before the
failure show ``replayed``, its actions completed before it ``replayed`` too. The first tree ends
``cancelled`` when its host stopped it, or shows ``unfinished  cut off: no end record, executed
again`` when its process was killed (nothing writes an end then). An event no action listened to
(its sender did not declare it) ends with ``dropped: no action listens to it``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from flink_agents.observability import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    EventDropped,
    EventSent,
    LogRecord,
    RunFinished,
    RunStarted,
)

RunKey = tuple[str, str, int]  # agent, key as JSON, seq


@dataclass
class _Invocation:
    action: str
    event_id: str
    event_type: str = "?"
    """Set by the action's start or end record: ``?`` while the log holds neither."""
    started: ActionStarted | None = None
    finished: ActionFinished | None = None
    calls: list[CallFinished] = field(default_factory=list)
    events: list[EventSent] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)
    """Ids of the events it sent that no action listened to."""


@dataclass
class RunExecution:
    """One execution of a run: what its records say, grouped by action invocation."""

    run: RunKey
    started: RunStarted
    number: int = 1
    """Which execution of the run this is in the log (2 and on: after a restore)."""
    finished: RunFinished | None = None
    executed_again: bool = False
    """A later execution of the run follows in the log (after a restore)."""
    invocations: dict[tuple[str, str], _Invocation] = field(default_factory=dict)

    def invocation(self, event_id: str, action: str) -> _Invocation:
        found = self.invocations.get((event_id, action))
        if found is None:
            found = self.invocations[(event_id, action)] = _Invocation(action, event_id)
        return found


class ExecutionGroups:
    """Records grouped into run executions as they are added: a ``run_started`` opens a new one
    for its run. A log read in parts (a console's page loads) is grouped once."""

    def __init__(self) -> None:
        self.found: list[RunExecution] = []
        self.runs: dict[RunKey, list[RunExecution]] = {}
        """Each run's executions, in order."""
        self._current: dict[RunKey, RunExecution] = {}

    def add(self, records: Iterable[LogRecord]) -> set[RunKey]:
        """Group ``records``, which follow those added before; the runs they touched."""
        current = self._current
        touched: set[RunKey] = set()
        for record in records:
            run = (record.agent, json.dumps(record.key, sort_keys=True), record.seq)
            touched.add(run)
            if isinstance(record, RunStarted):
                earlier = current.get(run)
                number = 1
                if earlier is not None:
                    earlier.executed_again, number = True, earlier.number + 1
                current[run] = RunExecution(run, record, number)
                self.found.append(current[run])
                self.runs.setdefault(run, []).append(current[run])
                continue
            execution = current.get(run)
            if execution is None:
                continue  # run_admitted, or records of an execution the file does not start
            if isinstance(record, RunFinished):
                execution.finished = record
            elif isinstance(record, ActionStarted):
                invocation = execution.invocation(record.event_id, record.action)
                invocation.event_type, invocation.started = record.event_type, record
            elif isinstance(record, ActionFinished):
                # A replayed action's events are recorded before its end (and it has no start),
                # so its invocation was opened by its first event, without the type of what it
                # handled.
                invocation = execution.invocation(record.event_id, record.action)
                invocation.event_type, invocation.finished = record.event_type, record
            elif isinstance(record, CallFinished):
                execution.invocation(record.event_id, record.action).calls.append(record)
            elif isinstance(record, EventSent) and record.upstream_id and record.action:
                execution.invocation(record.upstream_id, record.action).events.append(record)
            elif isinstance(record, EventDropped) and record.upstream_id and record.action:
                execution.invocation(record.upstream_id, record.action).dropped.add(record.event_id)
        return touched


def executions(records: Iterable[LogRecord]) -> list[RunExecution]:
    """Group records into run executions; a ``run_started`` opens a new one for its run."""
    groups = ExecutionGroups()
    groups.add(records)
    return groups.found


def render_trace(
    records: Iterable[LogRecord], *, key: str | None = None, seq: int | None = None
) -> str:
    """The trees of the runs in ``records``; ``key`` (as written in the input, or as JSON) and
    ``seq`` select runs."""
    lines: list[str] = []
    for execution in executions(records):
        _, key_json, run_seq = execution.run
        if key is not None and key not in (key_json, str(execution.started.key)):
            continue
        if seq is not None and run_seq != seq:
            continue
        lines.extend(_run_lines(execution))
    return "\n".join(lines)


def _run_lines(execution: RunExecution) -> Iterator[str]:
    agent, key_json, seq = execution.run
    end = execution.finished
    if end is None:
        # Its host stopped it in a live process: the end says `cancelled`. A killed process
        # (kill -9, a lost TaskManager) writes no end at all.
        summary = "unfinished"
        if execution.executed_again:
            summary += "  cut off: no end record, executed again"
    else:
        summary = f"{end.status}  {_ms(end.latency_ms)}  outputs {end.outputs}"
        if end.error:
            summary += f"  error: {end.error}"
    again = f" (execution {execution.number})" if execution.number > 1 else ""
    yield f"run {agent} {key_json} #{seq}{again}  {summary}"
    for invocation in execution.invocations.values():
        yield "  " + _invocation_line(invocation)
        for call in invocation.calls:
            yield "    " + _call_line(call)
        for event in invocation.events:
            line = f"    event {_short_type(event.event_type)} {event.event_id[:8]}"
            if event.event_id in invocation.dropped:
                line += "  dropped: no action listens to it"
            yield line


def _invocation_line(invocation: _Invocation) -> str:
    head = (
        f"action {invocation.action} on {_short_type(invocation.event_type)} "
        f"{invocation.event_id[:8]}"
    )
    done = invocation.finished
    if done is None:
        return f"{head}  unfinished"
    text = f"{head}  {'replayed' if done.replayed else _ms(done.latency_ms)}"
    return f"{text}  error: {done.error}" if done.error else text


def _call_line(call: CallFinished) -> str:
    parts = [f"call {call.call_id}", call.call_kind, call.outcome, _ms(call.latency_ms)]
    if call.attempts is not None:
        parts.append(f"attempts {call.attempts}")
    if call.usage is not None:
        parts.append(f"tokens {call.usage.input_tokens}/{call.usage.output_tokens}")
    if call.error:
        parts.append(f"error: {call.error}")
    return "  ".join(parts)


def _short_type(event_type: str) -> str:
    """``package.module:ChatRequestEvent`` -> ``ChatRequestEvent``."""
    return event_type.rpartition(":")[2]


def _ms(value: float) -> str:
    return f"{value:.1f} ms"
