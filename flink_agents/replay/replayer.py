"""Replaying recorded runs against the agent as it is now (``flink-agents replay``).

Each recorded run is executed again by the current plan, from its recorded input, with every
durable call served from its record (:class:`RecordedCallRunner`): no model, tool or service is
called. A key's runs replay in ``seq`` order, each starting from the short-term memory the
replay of the key's previous run committed (empty before the first replayed run of the key).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.durable.store import ActionState, ActionStateKey
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.resolve import ResolvedPlan, resolve_plan
from flink_agents.replay.recorded import RecordedRun
from flink_agents.replay.serving import DivergedError, Divergence, RecordedCallRunner
from flink_agents.runtime.engine import RunEngine
from flink_agents.runtime.state import KeyState, PendingInput


class Verdict(str, enum.Enum):
    """How a replayed run compares with its record."""

    SAME = "same outputs"
    DIFFERENT = "different outputs"
    DIVERGED = "diverged"
    FAILED = "failed"
    """The replay raised something other than a divergence (the run's own error)."""
    NOT_REPLAYABLE = "not replayable"
    """No input recorded (written before inputs were recorded) or the record is incomplete."""


@dataclass
class RunReport:
    """The outcome of one replayed run."""

    run: RecordedRun
    verdict: Verdict
    recorded_outputs: list[Any] | None = None
    outputs: list[Any] | None = None
    divergence: Divergence | None = None
    served: int = 0
    live_calls: int = 0
    note: str = ""

    def describe(self) -> str:
        """A few lines for a human: the verdict and what differs."""
        head = f"run {self.run.run_id}: {self.verdict.value}"
        head += f" ({self.served} calls served from records, {self.live_calls} made)"
        lines = [head]
        if self.note:
            lines.append(f"  {self.note}")
        if self.divergence is not None:
            lines.extend(f"  {line}" for line in self.divergence.describe().splitlines())
        if self.verdict is Verdict.DIFFERENT:
            lines.append(f"  recorded outputs: {self.recorded_outputs!r}")
            lines.append(f"  outputs now:      {self.outputs!r}")
        return "\n".join(lines)


@dataclass
class ReplayReport:
    """All replayed runs; :attr:`ok` is False on any divergence, difference or failure."""

    runs: list[RunReport] = field(default_factory=list)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for run in self.runs if run.verdict is verdict)

    @property
    def live_calls(self) -> int:
        return sum(run.live_calls for run in self.runs)

    @property
    def ok(self) -> bool:
        bad = (Verdict.DIVERGED, Verdict.DIFFERENT, Verdict.FAILED)
        return not any(run.verdict in bad for run in self.runs)

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(v)} {v.value}" for v in Verdict if self.count(v))
        return f"{len(self.runs)} runs: {counts or 'none'}; {self.live_calls} calls made"


def replay_runs(
    plan: AgentPlan, runs: Iterable[RecordedRun], *, allow_live: bool = False
) -> ReplayReport:
    """Replay ``runs`` (of ``plan``'s agent) with the current ``plan``; see the module."""
    return asyncio.run(replay_runs_async(plan, runs, allow_live=allow_live))


async def replay_runs_async(
    plan: AgentPlan, runs: Iterable[RecordedRun], *, allow_live: bool = False
) -> ReplayReport:
    """Async form of :func:`replay_runs`."""
    resolved = resolve_plan(plan)
    report = ReplayReport()
    memory: dict[str, dict[str, Any]] = {}  # by the key's canonical JSON
    for run in sorted(runs, key=lambda r: (r.key.agent, r.key.key, r.key.seq)):
        start = memory.get(run.key.key, {})
        outcome, committed = await _replay_one(resolved, run, start, allow_live)
        memory[run.key.key] = committed
        report.runs.append(outcome)
    return report


async def _replay_one(
    resolved: ResolvedPlan, run: RecordedRun, memory: dict[str, Any], allow_live: bool
) -> tuple[RunReport, dict[str, Any]]:
    """One run's report and the memory its replay committed (``memory`` if it failed)."""
    if run.input is None:
        note = "its input was not recorded (written by an older version)"
        return RunReport(run, Verdict.NOT_REPLAYABLE, note=note), memory
    recorded_outputs = run.outputs()
    states: dict[ActionStateKey, ActionState] = {state.key: state for state in run.states}
    runner = RecordedCallRunner(states, allow_live=allow_live)
    engine = RunEngine(resolved, call_runner=runner)
    key = run.run_id.key
    pending = PendingInput(seq=run.key.seq, input=run.input.value)
    engine.restore_key(
        key, KeyState(next_seq=run.key.seq + 1, pending=[pending], short_term_memory=memory)
    )
    error: BaseException | None = None
    try:
        await engine.drain()
    except Exception as exc:  # the run's failure (fail policy) or a divergence inside it
        error = exc
    results = engine.take_results()
    committed = engine.committed_memory(key) if error is None else memory
    await engine.close()
    outputs = results[0].output_values if results else None
    divergence = runner.divergence or (runner.unconsumed() if error is None else None)
    outcome = RunReport(
        run,
        Verdict.SAME,
        recorded_outputs,
        outputs,
        divergence,
        served=runner.served,
        live_calls=runner.live_calls,
    )
    if divergence is not None:
        outcome.verdict = Verdict.DIVERGED
    elif error is not None:
        outcome.verdict = Verdict.FAILED
        outcome.note = f"{type(_cause(error)).__name__}: {_cause(error)}"
    elif recorded_outputs is None:
        outcome.verdict = Verdict.NOT_REPLAYABLE
        outcome.note = "the recorded run did not finish: no outputs to compare"
    elif outputs != recorded_outputs:
        outcome.verdict = Verdict.DIFFERENT
    return outcome, committed


def _cause(error: BaseException) -> BaseException:
    """The action's own exception behind the engine's ``ActionError``."""
    cause = error.__cause__
    return cause if cause is not None and not isinstance(cause, DivergedError) else error
