"""The crash-and-replay harness: run inputs, crash at a chosen durable call, restore, replay.

:func:`crash_and_replay` runs the inputs through :class:`DurableCalls` over a store, with a
:class:`CountingProbe`, until the chosen call starts, throws the engine away there (the call
never finishes, as in a process killed mid-call), restores a new store from the checkpoint
taken before the inputs and lets a new engine finish every unfinished run. Every durable call
is counted by identity, so a test can say exactly which calls were made again.

A call *completed* before the crash when its outcome was acknowledged by the store by then. A
runner hands an outcome to the action at once and waits for its acknowledgement only before
the run's next call or output leaves (docs/durable-execution.md), so a call can have returned
and still be in flight at the crash: nothing outside the process depended on it, and the replay
makes it again. Those are counted apart (:meth:`CrashReplayResult.resent`), not as completed.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.tools import function_label
from flink_agents.durable.call import DurableCall
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.faults import CallProbe, Writes
from flink_agents.durable.identity import CallIdentity, RunId, canonical_json
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import RunEngine, RunResult
from flink_agents.runtime.local import KeySelector, key_of
from flink_agents.runtime.state import KeyState
from flink_agents.testing.stores import Stores

CrashPoint = int | Callable[[DurableCall], bool]
"""Where to crash: the n-th durable call to start (1-based, over all inputs), or the first call
a predicate accepts (e.g. ``lambda call: call.identity.call_id == "chat"``)."""


@dataclass
class CallLog:
    """Durable calls by identity: how often each was invoked, which ones returned a value, and
    which of those completed (their outcome acknowledged by the store: for the live phase of a
    crashed scenario, by the crash)."""

    invoked: Counter[CallIdentity] = field(default_factory=Counter)
    returned: set[CallIdentity] = field(default_factory=set)
    completed: set[CallIdentity] = field(default_factory=set)
    labels: dict[CallIdentity, str] = field(default_factory=dict)
    # The ticket of each returned call's outcome record (DurableCalls.writes).
    outcome_writes: dict[CallIdentity, int] = field(default_factory=dict, repr=False)

    def by_function(self) -> Counter[str]:
        """Invocations per function label (``module.qualname``)."""
        counts: Counter[str] = Counter()
        for identity, times in self.invoked.items():
            counts[self.labels[identity]] += times
        return counts

    @property
    def total(self) -> int:
        """Invocations of all calls."""
        return sum(self.invoked.values())


class CountingProbe(CallProbe):
    """The probe of a crash scenario's durable calls: logs every invocation of a call's
    function and, at the crash point, holds the call open until the engine is closed (async
    calls only)."""

    def __init__(self, log: CallLog, crash_at: CrashPoint | None) -> None:
        self._log = log
        self._crash_at = crash_at
        self._started = 0
        self.crashed = asyncio.Event()

    def invoke(self, call: DurableCall, *, blocking: bool = False) -> Any:
        self._started += 1
        identity, log = call.identity, self._log
        log.labels[identity] = function_label(call.function)
        if self._is_crash_point(call):
            if blocking:
                raise NotImplementedError("the harness crashes only at calls of async actions")
            log.invoked[identity] += 1
            return self._held(call)
        log.invoked[identity] += 1
        value = call.invoke()
        if inspect.isawaitable(value):
            return self._returned(identity, value)
        log.returned.add(identity)
        return value

    def returned(self, call: DurableCall, calls: Writes) -> None:
        # The calls put a call's outcome and return it with nothing run in between (no await
        # unless a fault plan is armed), so their latest write is the outcome's. A call handed
        # back from a record (not in `returned`) gets a ticket that is never read.
        self._log.outcome_writes[call.identity] = calls.writes

    async def _returned(self, identity: CallIdentity, value: Awaitable[Any]) -> Any:
        result = await value
        self._log.returned.add(identity)
        return result

    async def _held(self, call: DurableCall) -> Any:
        self.crashed.set()
        await asyncio.Event().wait()  # until the engine is closed: the "crash"
        raise AssertionError("unreachable: a held call is cancelled")

    def _is_crash_point(self, call: DurableCall) -> bool:
        if self._crash_at is None or self.crashed.is_set():
            return False
        if isinstance(self._crash_at, int):
            return self._started == self._crash_at
        return self._crash_at(call)


def _take_acknowledged(log: CallLog, calls: DurableCalls) -> None:
    """Mark as completed the returned calls whose outcome the store has acknowledged by now
    (at the crash, or once every run finished)."""
    log.completed = {
        identity
        for identity, ticket in log.outcome_writes.items()
        if identity in log.returned and calls.write_acknowledged(ticket)
    }


@dataclass
class CrashReplayResult:
    """What :func:`crash_and_replay` saw: results in input order and the calls of each phase."""

    results: list[RunResult]
    live: CallLog
    replay: CallLog
    crashed: bool
    key_states: dict[str, KeyState] = field(default_factory=dict)
    """Each key's state once every run finished (by the key's canonical JSON): its committed
    short-term and long-term memory."""

    def reinvoked(self) -> set[CallIdentity]:
        """Calls that had completed before the crash (outcome acknowledged) and were invoked
        again on replay: durable execution promises there are none."""
        return self.live.completed & set(self.replay.invoked)

    def resent(self) -> set[CallIdentity]:
        """Calls that had returned before the crash but whose outcome was not acknowledged yet,
        invoked again on replay: allowed (nothing outside the process depended on them), and
        counted so a test can see how many."""
        return (self.live.returned - self.live.completed) & set(self.replay.invoked)

    def outputs(self) -> list[list[Any]]:
        """Each run's output values, in input order."""
        return [result.output_values for result in self.results]


def crash_and_replay(
    plan: AgentPlan,
    inputs: Iterable[Any],
    *,
    key: KeySelector,
    crash_at: CrashPoint,
    stores: Stores | None = None,
    replay_plan: AgentPlan | None = None,
) -> CrashReplayResult:
    """Run ``inputs`` until the ``crash_at`` call starts, crash, restore and replay.

    ``stores`` default to :meth:`Stores.in_memory` (pass Kafka-backed ones to test the real
    store); ``replay_plan`` is the plan the restarted job runs (the same one by default).
    If no call matches ``crash_at`` the inputs simply finish and ``crashed`` is False.
    """
    records = list(inputs)
    own = stores is None
    stores = stores or Stores.in_memory()
    try:
        return asyncio.run(_scenario(plan, replay_plan or plan, records, key, crash_at, stores))
    finally:
        if own:
            stores.close()


async def _scenario(
    plan: AgentPlan,
    replay_plan: AgentPlan,
    records: list[Any],
    key: KeySelector,
    crash_at: CrashPoint,
    stores: Stores,
) -> CrashReplayResult:
    live, replayed = CallLog(), CallLog()
    probe = CountingProbe(live, crash_at)
    runtime = Runtime.build(plan, store=stores.first, probe=probe)
    engine, calls = runtime.engine, runtime.calls
    assert isinstance(calls, DurableCalls)
    order = [engine.submit(key_of(record, key), record) for record in records]
    done = asyncio.ensure_future(engine.drain())
    crash = asyncio.ensure_future(probe.crashed.wait())
    await asyncio.wait({done, crash}, return_when=asyncio.FIRST_COMPLETED)
    crash.cancel()
    # The crash: what the store acknowledged, the results that left and the key states are
    # taken here, with nothing run in between.
    _take_acknowledged(live, calls)
    finished = {r.run_id: r for r in engine.take_results()}
    if done.done():
        done.result()  # an action's failure is the test's to see
        ends = _key_states(engine, order)
        await engine.close()
        return CrashReplayResult(
            [finished[r] for r in order], live, replayed, crashed=False, key_states=ends
        )
    # Checkpointed key states: inputs whose runs had not finished stay pending.
    states: dict[str, tuple[Any, KeyState]] = {}
    for run in order:
        states[canonical_json(run.key)] = (run.key, engine.snapshot_key(run.key))
    done.cancel()
    await engine.close()
    runtime = Runtime.build(
        replay_plan, store=stores.restored(), probe=CountingProbe(replayed, None)
    )
    engine, calls = runtime.engine, runtime.calls
    assert isinstance(calls, DurableCalls)
    for run_key, state in states.values():
        engine.restore_key(run_key, state)
    await engine.drain()
    _take_acknowledged(replayed, calls)
    finished.update((r.run_id, r) for r in engine.take_results())
    ends = _key_states(engine, order)
    await engine.close()
    return CrashReplayResult(
        [finished[r] for r in order], live, replayed, crashed=True, key_states=ends
    )


def _key_states(engine: RunEngine, runs: list[RunId]) -> dict[str, KeyState]:
    return {canonical_json(run.key): engine.snapshot_key(run.key) for run in runs}
