"""Replaying recorded runs against the agent as it is now (``flink-agents replay``).

Each recorded run is executed again by the current plan, from its recorded input, with every
durable call served from its record (recorded-only :class:`DurableCalls`): no model, tool or
service is called. A key's runs replay in ``seq`` order, each starting from the short-term and
long-term memory the replay of the key's previous run committed.

A filter (by key or time) may leave a key's earlier runs out. Given the recorded runs it was
chosen from (``earlier``), the replay rebuilds the memory a chosen run starts from by replaying
the key's earlier runs first, silently (not reported, calls served from their records as
always, never made live); a key whose earlier runs are not all recorded (pruned, or compacted
away) starts from what there is, and its first chosen run's report says which runs are missing.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import ActionState, ActionStateKey
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.resolve import ResolvedPlan, resolve_plan
from flink_agents.replay.recorded import RecordedRun
from flink_agents.replay.serving import (
    DivergedError,
    Divergence,
    LiveCall,
    LiveCalls,
    ReplayBook,
)
from flink_agents.runtime.assembly import Runtime
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
    live: list[LiveCall] = field(default_factory=list)
    """The calls made live (``--live``), in the order they were made."""
    note: str = ""

    @property
    def live_calls(self) -> int:
        return len(self.live)

    def describe(self) -> str:
        """A few lines for a human: the verdict and what differs (with live calls, what each
        returned against its record, and the outputs they led to)."""
        head = f"run {self.run.run_id}: {self.verdict.value}"
        head += f" ({self.served} calls served from records, {self.live_calls} made)"
        lines = [head]
        if self.note:
            lines.append(f"  {self.note}")
        if self.divergence is not None:
            lines.extend(f"  {line}" for line in self.divergence.describe().splitlines())
        for call in self.live:
            lines.extend(f"  {line}" for line in call.describe().splitlines())
        if self.verdict is Verdict.DIFFERENT or (self.live and self.outputs is not None):
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

    @property
    def checked(self) -> int:
        """How many runs were compared with their record (all but the not replayable)."""
        return len(self.runs) - self.count(Verdict.NOT_REPLAYABLE)

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(v)} {v.value}" for v in Verdict if self.count(v))
        return f"{len(self.runs)} runs: {counts or 'none'}; {self.live_calls} calls made"


def replay_runs(
    plan: AgentPlan,
    runs: Iterable[RecordedRun],
    *,
    live: LiveCalls | None = None,
    earlier: Iterable[RecordedRun] = (),
) -> ReplayReport:
    """Replay ``runs`` (of ``plan``'s agent) with the current ``plan``; ``live``: which calls
    are made instead of served (see :mod:`.serving`), None: none; ``earlier``: recorded runs to
    rebuild their keys' memory from (see the module)."""
    return asyncio.run(replay_runs_async(plan, runs, live=live, earlier=earlier))


async def replay_runs_async(
    plan: AgentPlan,
    runs: Iterable[RecordedRun],
    *,
    live: LiveCalls | None = None,
    earlier: Iterable[RecordedRun] = (),
) -> ReplayReport:
    """Async form of :func:`replay_runs`."""
    resolved = resolve_plan(plan)
    report = ReplayReport()
    chosen = {run.key: run for run in runs}
    last_chosen: dict[str, int] = {}  # per key (canonical JSON): its last chosen run's seq
    for run in chosen.values():
        last_chosen[run.key.key] = max(run.key.seq, last_chosen.get(run.key.key, -1))
    before = [
        run
        for run in earlier
        if run.key not in chosen and run.key.seq < last_chosen.get(run.key.key, -1)
    ]
    keys: dict[str, _KeyProgress] = {}
    for run in sorted([*chosen.values(), *before], key=lambda r: (r.key.key, r.key.seq)):
        progress = keys.setdefault(run.key.key, _KeyProgress())
        progress.missing.extend(range(progress.next_seq, run.key.seq))
        # A run replayed only to rebuild memory is not reported: it makes no call.
        run_live = live if run.key in chosen else None
        outcome, progress.memory = await _replay_one(resolved, run, progress.memory, run_live)
        progress.next_seq = run.key.seq + 1
        if run.key not in chosen:
            progress.rebuilt.append(run.key.seq)
            continue
        outcome.note = "; ".join(filter(None, [outcome.note, *progress.notes()]))
        report.runs.append(outcome)
    return report


@dataclass
class _KeyProgress:
    """One key's replay so far: the memory its next run starts from, and what a report owes."""

    memory: KeyState = field(default_factory=KeyState)
    """Only its memories count (short-term and long-term), as the previous run left them."""
    next_seq: int = 0
    rebuilt: list[int] = field(default_factory=list)
    """Earlier runs replayed silently since the last reported run."""
    missing: list[int] = field(default_factory=list)
    """Earlier runs not recorded, since the last reported run."""

    def notes(self) -> list[str]:
        """What the next reported run's note says about its memory (then forgotten)."""
        notes = []
        if self.rebuilt:
            notes.append(
                f"memory rebuilt by replaying the key's earlier runs {_seqs(self.rebuilt)}"
            )
        if self.missing:
            notes.append(
                f"depends on the key's earlier runs {_seqs(self.missing)}, which are not "
                "recorded: replayed without the memory they left"
            )
        self.rebuilt, self.missing = [], []
        return notes


def _seqs(seqs: Iterable[int]) -> str:
    return ", ".join(f"#{seq}" for seq in seqs)


async def _replay_one(
    resolved: ResolvedPlan, run: RecordedRun, memory: KeyState, live: LiveCalls | None
) -> tuple[RunReport, KeyState]:
    """One run's report and the memory its replay committed (``memory`` if it failed)."""
    if run.input is None:
        note = "its input was not recorded (written by an older version)"
        return RunReport(run, Verdict.NOT_REPLAYABLE, note=note), memory
    recorded_outputs = run.outputs()
    states: dict[ActionStateKey, ActionState] = {state.key: state for state in run.states}
    # A sub-agent's own invocations are recorded in the run; replaying its call hands the
    # call's record back, so they are not run again: only the run's own must be.
    book = ReplayBook(live=live)
    calls = DurableCalls(
        agent=resolved.plan.name, mode="recorded-only", records=states, unserved=book
    )
    # Memory sets on a vector store are replayed in the key's state: a replay never writes to
    # (or deletes from) the job's store.
    engine = Runtime.build(resolved, calls=calls, vector_store_memory=False).engine
    key = run.run_id.key
    # The clock its memory expired by: the admission the store recorded with its input.
    pending = PendingInput(
        seq=run.key.seq, input=run.input.value, admitted_at=run.input.admitted_at
    )
    engine.restore_key(
        key, memory.model_copy(update={"next_seq": run.key.seq + 1, "pending": [pending]})
    )
    error: BaseException | None = None
    try:
        await engine.drain()
    except Exception as exc:  # the run's failure (fail policy) or a divergence inside it
        error = exc
    results = engine.take_results()
    committed = engine.snapshot_key(key) if error is None else memory
    await engine.close()
    outputs = results[0].output_values if results else None
    divergence = book.divergence
    if divergence is None and error is None:
        divergence = book.unconsumed(states, run.own_state_keys(), calls.taken)
    outcome = RunReport(
        run,
        Verdict.SAME,
        recorded_outputs,
        outputs,
        divergence,
        served=book.served,
        live=book.made_live,
    )
    if divergence is not None:
        outcome.verdict = Verdict.DIVERGED
        if error is not None and not isinstance(error, DivergedError):  # after a live call
            outcome.note = f"then failed: {_failure(error)}"
    elif error is not None:
        outcome.verdict = Verdict.FAILED
        outcome.note = _failure(error)
    elif recorded_outputs is None:
        outcome.verdict = Verdict.NOT_REPLAYABLE
        outcome.note = "the recorded run did not finish: no outputs to compare"
    elif outputs != recorded_outputs:
        outcome.verdict = Verdict.DIFFERENT
    return outcome, committed


def _failure(error: BaseException) -> str:
    """The type and text of the action's own exception behind the engine's ``ActionError``."""
    cause = error.__cause__
    if cause is None or isinstance(cause, DivergedError):
        cause = error
    return f"{type(cause).__name__}: {cause}"
