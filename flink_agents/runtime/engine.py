"""The run engine: per-key runs of one plan, many keys interleaved on one asyncio loop.

A host feeds it with :meth:`RunEngine.submit` and collects finished runs through an
``on_result`` callback (then the engine keeps none) or, without one, with
:meth:`RunEngine.wait_for_results` or :meth:`RunEngine.drain` and
:meth:`RunEngine.take_results`. Per key,
one run at a time and later inputs queue in order; across keys, up to ``max_in_flight`` runs
proceed at once, so a slow model call of one key does not hold the others. Per-key state can be
snapshotted and restored (:class:`KeyState`) between steps. A run paused at a wait holds its key's
later inputs behind it, or -- under a plan with ``while_paused: alongside`` -- is set aside
while they run, and goes on when its wait's decision comes (docs/waits.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api.context import InfrastructureError, live_failure
from flink_agents.api.events import ActionFailure, Event, InputEvent, OutputEvent
from flink_agents.api.memory import Memory, MemoryChangedEvent, memory_ttl_seconds
from flink_agents.api.paused import RunPaused
from flink_agents.api.secret_values import scrub_exception_chain
from flink_agents.api.waits import Decision, ScheduledInput, WaitRequest
from flink_agents.durable.call import CallRunner
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.identity import ActionInvocation, RunId, canonical_json, event_id
from flink_agents.durable.journal import MemoryWatch, RecordedAction
from flink_agents.durable.store import now_ms
from flink_agents.observability import EventLog
from flink_agents.plan.models import ActionPlan, AgentPlan
from flink_agents.plan.resolve import ResolvedPlan, resolve_plan
from flink_agents.runtime.action_context import ActionContext, RunState
from flink_agents.runtime.budget_meter import BudgetMeter, KeySpend, metered_subagent
from flink_agents.runtime.compaction_runs import (
    COMPACTION_ACTION,
    MemoryCompactions,
    compaction_of,
)
from flink_agents.runtime.keyed_memory import EMPTY as EMPTY_LONG_TERM
from flink_agents.runtime.keyed_memory import CommittedMemory, MemorySets
from flink_agents.runtime.memory_backends import MemoryBackends, RunLongTermMemory
from flink_agents.runtime.memory_changes import MemoryChanges
from flink_agents.runtime.run_bounds import RunBudget
from flink_agents.runtime.scopes import Scope
from flink_agents.runtime.state import KeyState, PendingInput

logger = logging.getLogger(__name__)


class ActionError(RuntimeError):
    """An action raised and the agent's error policy is ``fail``."""

    def __init__(self, run_id: RunId, failure: ActionFailure) -> None:
        super().__init__(f"run {run_id}: {failure.describe()}")
        self.run_id = run_id
        self.failure = failure


@dataclass(frozen=True)
class RunResult:
    """A finished run: its outputs, and the failure that ended it (policy ``emit``)."""

    run_id: RunId
    outputs: list[OutputEvent]
    error: ActionFailure | None = None
    paused: WaitRequest | None = None
    """Set when the run did not finish but paused at a wait (docs/waits.md): it has no
    outputs yet, and runs again, with the same ``seq``, once :meth:`RunEngine.resume` hands it
    the wait's decision."""
    scheduled: tuple[ScheduledInput, ...] = ()
    """The follow-ups a successful run scheduled (``ctx.schedule``), for its host to deliver
    to the key as new inputs when they come due (docs/waits.md, "Timers")."""

    @property
    def key(self) -> Any:
        return self.run_id.key

    @property
    def output_values(self) -> list[Any]:
        return [event.output for event in self.outputs if event.error is None]


_Outcome = tuple[RunResult, "RunState | None"]


@dataclass
class _KeySlot:
    next_seq: int = 0
    queue: deque[PendingInput] = field(default_factory=deque)  # head is running when busy
    # Committed short-term memory: replaced when a run commits, never changed in place, so it
    # can be handed out without a copy (see committed_memory).
    memory: dict[str, Any] = field(default_factory=dict)
    expiry: dict[str, float] = field(default_factory=dict)  # of `memory`'s entries; the same
    long_term: CommittedMemory = EMPTY_LONG_TERM  # the same: replaced, never changed in place
    busy: bool = False
    ready: bool = False  # in the engine's ready queue (a flag: a deque's `in` scans it all)
    # The run ids of queued inputs made when they were admitted, by seq: the run starts with
    # the same object, whose ids (its input event's, say) are then rendered once.
    admitted: dict[int, RunId] = field(default_factory=dict)
    # The head input's run paused at a wait: the key's inputs wait behind it until resumed.
    paused: bool = False
    # The decisions handed to the key's runs, by wait id (a wait id is one run's): each
    # dropped when its run finishes.
    decisions: dict[str, Decision] = field(default_factory=dict)
    # Which waits each unfinished input's run paused at, by seq (to drop their decisions).
    waited: dict[int, set[str]] = field(default_factory=dict)
    # While paused "alongside": the inputs whose runs are paused, set aside by the wait they
    # paused at, out of the queue (its head runs meanwhile).
    parked: dict[str, PendingInput] = field(default_factory=dict)


class RunEngine:
    """Runs a plan for many keys. Single-threaded: call it from one asyncio loop."""

    def __init__(
        self,
        plan: AgentPlan | ResolvedPlan,
        *,
        max_in_flight: int = 128,
        call_runner: CallRunner | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        environ: Mapping[str, str] | None = None,
        event_log: EventLog | None = None,
        meter: BudgetMeter | None = None,
        vector_store_memory: bool = True,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._resolved = plan if isinstance(plan, ResolvedPlan) else resolve_plan(plan)
        self._plan = self._resolved.plan
        self._root = Scope.build(self._resolved, environ)
        # False: memory sets on a vector store are kept in the key's state (offline replay).
        self._memory_backends = MemoryBackends(
            self._resolved, self._root.resources, vector_stores=vector_store_memory
        )
        self._memory_ttl_s = memory_ttl_seconds(self._plan.config)
        self._compactions = MemoryCompactions(self._resolved, self._memory_backends.external)
        # The calls are built with their listener (runtime/assembly.py builds both).
        self._call_runner: CallRunner = call_runner or DurableCalls(listener=event_log)
        self._log = event_log  # None: every hook below is one check, nothing is recorded
        self._meter = meter  # budgets: counters saved with each key (runtime/budget_meter.py)
        self._on_result = on_result
        self._on_failure = on_failure
        self._max_in_flight = max_in_flight
        self._alongside = self._plan.while_paused == "alongside"
        self._slots: dict[str, _KeySlot] = {}  # by canonical JSON of the key
        self._keys: dict[str, Any] = {}
        self._ready: deque[str] = deque()  # keys with input waiting for a free run slot
        self._active: dict[asyncio.Task[_Outcome], str] = {}
        self._finished: list[RunResult] = []
        self._failure: BaseException | None = None
        self._progress: asyncio.Event | None = None
        self._drops_warned: set[tuple[str, str]] = set()  # (scope, event type) said once

    @property
    def plan(self) -> AgentPlan:
        return self._plan

    def open_resources(self) -> None:
        """Open all resources now (a host calls this at start-up) instead of on first use."""
        self._root.open_all()

    @property
    def runs_alongside_paused(self) -> bool:
        """Whether a key's later inputs run while one of its runs is paused at a wait (the
        plan's ``while_paused: alongside``) instead of queueing behind it."""
        return self._alongside

    @property
    def in_flight(self) -> int:
        """Runs executing now."""
        return len(self._active)

    @property
    def queued(self) -> int:
        """Inputs submitted whose run has not started."""
        return sum(len(slot.queue) - slot.busy for slot in self._slots.values())

    def submit(
        self, key: Any, value: Any, seq: int | None = None, admitted_at: float | None = None
    ) -> RunId:
        """Queue ``value`` as the next input of ``key``; returns the id its run will have.

        ``seq`` is the input's number when the caller's key state owns the numbering (the keyed
        logic's does, so a replay keeps its run ids); without it the engine numbers the key's
        inputs itself (a caller with no key state, such as :func:`run_local`). ``admitted_at``
        (epoch ms, now if not given) is the run's clock, saved with the input by a caller with
        key state (its short-term memory expires by it: docs/memory.md).
        Runs start from within the loop (:meth:`drain`, :meth:`wait_for_results`).
        """
        self._raise_failure()
        token = canonical_json(key)
        slot = self._slot(token, key)
        pending = PendingInput(
            seq=slot.next_seq if seq is None else seq,
            input=value,
            admitted_at=now_ms() if admitted_at is None else admitted_at,
        )
        slot.next_seq = pending.seq + 1
        slot.queue.append(pending)
        self._mark_ready(token)
        run = RunId(self._plan.name, key, pending.seq)
        if _same_key(self._keys[token], key):
            slot.admitted[pending.seq] = run
        self._call_runner.run_admitted(run, value, pending.admitted_at)
        if self._log is not None:
            self._log.run_admitted(run)
        return run

    def pump(self) -> None:
        """Start queued runs while the window allows. Call it on the loop after :meth:`submit`
        or :meth:`restore_key` when no :meth:`drain`/:meth:`wait_for_results` is driving."""
        self._raise_failure()
        self._start_ready()

    async def drain(self) -> None:
        """Run until every submitted input has finished."""
        self._start_ready()
        while self._active or self._ready:
            await self._wait_progress(None)
        self._raise_failure()

    async def wait_for_results(self, timeout: float | None = None) -> list[RunResult]:
        """Wait until at least one run finished (or ``timeout``); returns and clears results."""
        self._start_ready()
        if not self._finished and (self._active or self._ready):
            await self._wait_progress(timeout)
        self._raise_failure()
        return self.take_results()

    def take_results(self) -> list[RunResult]:
        """Finished runs not yet taken, in completion order."""
        results, self._finished = self._finished, []
        return results

    async def close(self) -> None:
        """Cancel runs in flight (their inputs stay pending in the key state), then close the
        resources (an MCP server's session, say)."""
        for task in list(self._active):
            task.cancel()
        await asyncio.gather(*self._active, return_exceptions=True)
        await self._root.aclose()

    # --- per-key state -------------------------------------------------------------------------

    def keys(self) -> list[Any]:
        """Keys the engine holds state for."""
        return list(self._keys.values())

    def snapshot_key(self, key: Any) -> KeyState:
        """The state of ``key``: its seq counter, unfinished inputs and committed memory."""
        slot = self._slots.get(canonical_json(key))
        if slot is None:
            return KeyState()
        unfinished = sorted([*slot.queue, *slot.parked.values()], key=lambda p: p.seq)
        return KeyState(
            next_seq=slot.next_seq,
            pending=[p.model_copy(deep=True) for p in unfinished],
            short_term_memory=copy.deepcopy(slot.memory),
            short_term_expiry=dict(slot.expiry),
            long_term_memory=slot.long_term.to_state(),
            spend=self.committed_spend(key),
        )

    def committed_spend(self, key: Any) -> KeySpend | None:
        """What the finished runs of ``key`` spent on model calls (None: no budgets, or
        nothing yet); immutable, like :meth:`committed_memory`."""
        return None if self._meter is None else self._meter.committed(key)

    def committed_memory(self, key: Any) -> dict[str, Any]:
        """The short-term memory of ``key`` as its last successful run committed it.

        Not a copy: the engine replaces it when a run commits and never changes it in place, so
        a host may keep it (and serialize it from another thread) without copying.
        """
        slot = self._slots.get(canonical_json(key))
        return {} if slot is None else slot.memory

    def committed_expiry(self, key: Any) -> dict[str, float]:
        """When the entries of ``key``'s committed short-term memory expire (entry -> epoch
        ms): not a copy either (replaced, never changed in place)."""
        slot = self._slots.get(canonical_json(key))
        return {} if slot is None else slot.expiry

    def resume(self, key: Any, wait_id: str, decision: Decision) -> None:
        """Hand the decision of wait ``wait_id`` to the run of ``key`` that waits for it; a
        paused run runs again (its recorded calls handed back) and its wait returns the
        decision. A run set aside (``alongside``) goes before the key's inputs that never ran,
        after the one running now."""
        token = canonical_json(key)
        slot = self._slot(token, key)
        slot.decisions[wait_id] = decision
        parked = slot.parked.pop(wait_id, None)
        if parked is not None:
            _requeue(slot.queue, parked, running=slot.busy)
            self._mark_ready(token)
        elif slot.paused:
            slot.paused = False
            self._mark_ready(token)

    def committed_long_term_memory(self, key: Any) -> MemorySets:
        """The long-term memory of ``key`` as its last successful run committed it: not a copy
        either (replaced, never changed in place)."""
        slot = self._slots.get(canonical_json(key))
        return {} if slot is None else slot.long_term.to_state()

    def restore_key(self, key: Any, state: KeyState) -> None:
        """Install ``state`` for an idle ``key``; its pending inputs will run again."""
        token = canonical_json(key)
        if token in self._slots and self._slots[token].busy:
            raise RuntimeError(f"key {token} has a run in flight; restore keys before running")
        if token in self._slots and self._slots[token].ready:
            self._ready.remove(token)
        self._keys[token] = key
        self._slots[token] = _KeySlot(
            next_seq=state.next_seq,
            queue=deque(_with_clock(p) for p in state.pending),
            memory=copy.deepcopy(state.short_term_memory),
            expiry=dict(state.short_term_expiry),
            decisions=state.waits.decisions(),
            waited=state.waits.waited(),
            long_term=CommittedMemory.from_state(state.long_term_memory),
        )
        if self._meter is not None:
            self._meter.restore(key, state.spend)
        self._mark_ready(token)
        # Admitted now, not when they start: a replay waiting behind the in-flight bound must
        # already hold its recorded states (a store lets go of restored runs never admitted).
        for pending in self._slots[token].queue:  # with their clocks
            run = RunId(self._plan.name, key, pending.seq)
            self._call_runner.run_admitted(run, pending.input, pending.admitted_at)
            if self._log is not None:
                self._log.run_admitted(RunId(self._plan.name, key, pending.seq))

    def forget_keys(self, keys: Iterable[Any]) -> None:
        """Drop what the engine holds for ``keys`` that are idle (nothing queued, running or
        paused): for a host whose key state outlives the engine's (Flink's keyed state), which
        hands a key back with :meth:`restore_key` when it comes again. A key not idle stays."""
        for key in keys:
            token = canonical_json(key)
            slot = self._slots.get(token)
            if slot is None or slot.queue or slot.busy or slot.parked or slot.paused:
                continue
            del self._slots[token], self._keys[token]
            if self._meter is not None:
                self._meter.restore(key, None)  # its spend is in the host's key state too

    # --- scheduling ----------------------------------------------------------------------------

    def _slot(self, token: str, key: Any) -> _KeySlot:
        if token not in self._slots:
            self._slots[token] = _KeySlot()
            self._keys[token] = key
        return self._slots[token]

    def _mark_ready(self, token: str) -> None:
        slot = self._slots[token]
        if slot.queue and not slot.busy and not slot.ready and not slot.paused:
            slot.ready = True
            self._ready.append(token)

    def _start_ready(self) -> None:
        while self._ready and len(self._active) < self._max_in_flight and self._failure is None:
            token = self._ready.popleft()
            slot = self._slots[token]
            slot.ready = False
            slot.busy = True
            head = slot.queue[0]
            run_id = slot.admitted.pop(head.seq, None) or RunId(
                self._plan.name, self._keys[token], head.seq
            )
            run = RunState(
                run_id,
                Memory(  # a copy: the run's writes count only if it succeeds
                    slot.memory,
                    expiry=slot.expiry,
                    now_ms=head.admitted_at,
                    ttl_s=self._memory_ttl_s,
                ),
                budget=RunBudget.from_config(self._plan.config),
                decisions=slot.decisions,
                long_term_memory=self._memory_backends.for_run(token, slot.long_term),
            )
            work = self._execute(run, slot.queue[0])
            if self._log is not None:
                work = self._log.observe_run(run.run_id, slot.queue[0].input, work, _result)
            task = asyncio.get_running_loop().create_task(work)
            self._active[task] = token
            task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[_Outcome]) -> None:
        token = self._active.pop(task)
        slot = self._slots[token]
        if task.cancelled():
            slot.busy = False
            return
        error = task.exception()
        if error is not None:
            self._fail(error)
            return
        result, run = task.result()
        slot.busy = False
        if result.paused is not None:
            # Not finished: its run stays open in the store; its input stays at the head, or
            # (alongside) is set aside until its wait's decision comes.
            slot.waited.setdefault(result.run_id.seq, set()).add(result.paused.wait_id)
            if self._alongside:
                slot.parked[result.paused.wait_id] = slot.queue.popleft()
                self._mark_ready(token)
            else:
                slot.paused = True
        else:
            slot.queue.popleft()
            for wait_id in slot.waited.pop(result.run_id.seq, ()):
                slot.decisions.pop(wait_id, None)
            if not slot.queue and not slot.parked:  # nothing of the key can still wait
                slot.decisions.clear()
                slot.waited.clear()
            if run is not None:
                slot.memory = run.short_term_memory.snapshot()
                slot.expiry = run.short_term_memory.expiry()
                slot.long_term = run.long_term_memory.commit()
                if self._log is not None and self._log.counts_memory:
                    self._note_memory(run.long_term_memory)
            self._call_runner.run_finished(result.run_id)
            self._mark_ready(token)
        if self._on_result is None:
            self._finished.append(result)
        else:
            # Handed over, not kept as well: a host that never takes results (a Flink task's)
            # would hold every run of its attempt (the soak's Python heap grew so).
            try:
                self._on_result(result)
            except Exception as exc:
                self._fail(exc)
                return
        self._start_ready()
        self._signal_progress()

    def _note_memory(self, memory: RunLongTermMemory) -> None:
        """Count what a finished run did with long-term memory (a run that did nothing with
        it costs this check only)."""
        activity = memory.activity
        if activity.searches or activity.writes or activity.deletes:
            assert self._log is not None
            self._log.memory_noted(
                activity.searches,
                activity.writes,
                activity.deletes,
                activity.bytes_written,
                list(memory.items_written().values()),
            )
            for done in activity.compactions:
                self._log.memory_compacted(done.items_before, done.items_after, done.tokens)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
            for task in list(self._active):
                task.cancel()
            if self._on_failure is not None:
                self._on_failure(error)
        self._signal_progress()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _signal_progress(self) -> None:
        if self._progress is not None:
            self._progress.set()

    async def _wait_progress(self, timeout: float | None) -> None:
        self._raise_failure()
        if self._progress is None:
            self._progress = asyncio.Event()
        self._progress.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout)
        self._raise_failure()

    # --- one run -------------------------------------------------------------------------------

    async def _execute(self, run: RunState, pending: PendingInput) -> _Outcome:
        """Run one input through the root scope.

        Returns the run (its memories to commit), or None when the run failed (its writes are
        dropped).
        With a journal, only once the call outcomes the result may depend on are durable: the
        result's outputs and memory leave the engine with it.
        """
        try:
            outcome = await self._run_root(run, pending)
        finally:
            # Before the result leaves (or the failure or cancellation is handed up): a call
            # still in flight (a sibling of a failed one under asyncio.gather) is cancelled and
            # awaited, so none acts or writes for the ended run (runtime/call_scope.py).
            await run.calls.end()
        journal = self._call_runner.journal
        if journal is not None:
            await journal.settled(run.run_id)
        return outcome

    async def _run_root(self, run: RunState, pending: PendingInput) -> _Outcome:
        start = InputEvent(input=pending.input, id=event_id(run.run_id, None, None, 0))
        outputs: list[OutputEvent] = []
        compacting = compaction_of(pending.input)
        try:
            if compacting is not None:
                await self._compact(run, start, compacting)
            else:
                await self._dispatch(self._root, run, start, outputs)
        except RunPaused as paused:
            # Its outputs so far are dropped: the resumed run replays up to the wait (completed
            # actions from the journal) and emits every output once, when it finishes.
            return RunResult(run.run_id, [], paused=paused.request), None
        except _ActionRaised as raised:
            if self._plan.error_policy == "fail":
                if raised.__cause__ is not None:  # its text goes out with the job's failure
                    scrub_exception_chain(raised.__cause__)
                raise ActionError(run.run_id, raised.failure) from raised.__cause__
            failure = raised.failure
            error_output = OutputEvent(
                error=failure,
                id=event_id(run.run_id, failure.event_id, failure.action, "error"),
                upstream_id=failure.event_id,
                upstream_action=failure.action,
            )
            return RunResult(run.run_id, [*outputs, error_output], failure), None
        scheduled = (*run.scheduled, *self._compactions.requested(run))
        return RunResult(run.run_id, outputs, scheduled=scheduled), run

    async def _compact(self, run: RunState, start: InputEvent, set_name: str) -> None:
        """The run of a compaction follow-up (runtime/compaction_runs.py): it compacts
        ``set_name`` in place of the agent's actions; a failure is the run's, as an action's.
        A set no longer compacted (the job restored with a plan without its ``compaction``) is
        left as it is."""
        if not self._compactions.compacts(set_name):
            logger.info("run %s: memory set %r is not compacted any more", run.run_id, set_name)
            return
        ctx = ActionContext(
            run,
            COMPACTION_ACTION,
            start,
            self._plan.config,
            self._root.resources,
            self._call_runner,
        )
        try:
            done = await self._compactions.compact(ctx, run, set_name)
        except Exception as exc:
            raise _ActionRaised(_failure(COMPACTION_ACTION, start, exc)) from exc
        run.long_term_memory.activity.compactions.append(done)

    async def _dispatch(
        self, scope: Scope, run: RunState, start: Event, outputs: list[OutputEvent]
    ) -> None:
        """Dispatch events breadth-first, each to its listeners in plan order, until none remain.

        Output events are appended to ``outputs`` as they come; an action that raises ends the
        dispatch with :class:`_ActionRaised`.
        """
        plan = scope.resolved.plan
        journal = self._call_runner.journal
        run_child = functools.partial(self._run_child, scope, run)
        # Change events cost a copy of the memory per action: only for an agent that wants them.
        reports_changes = bool(scope.listeners(MemoryChangedEvent.EVENT_TYPE or ""))
        events: deque[Event] = deque([start])
        while events:
            event = events.popleft()
            listeners = scope.listeners(event.type)
            if isinstance(event, OutputEvent):
                outputs.append(event)
            elif not listeners:
                self._dropped(scope, run, event)
            for action in listeners:
                invocation: ActionInvocation | None = None
                watch: MemoryWatch | None = None
                if journal is not None:
                    invocation = ActionInvocation(run.run_id, event.id, action.name)
                    recorded = journal.recorded(invocation)
                    if recorded is not None:  # completed before a failover: not run again
                        replayed = recorded.reapply(run)
                        try:  # counted as it was live, so a replay ends where the run did
                            run.budget.spend_action()
                            run.budget.spend_events(len(replayed))
                            await run.long_term_memory.written()  # its vector-store writes
                        except Exception as exc:
                            raise _ActionRaised(_failure(action, event, exc)) from exc
                        if self._log is not None:
                            self._log.action_replayed(run.run_id, event, action.name, replayed)
                        events.extend(replayed)
                        continue
                    watch = MemoryWatch(run)
                changes = MemoryChanges(run.short_term_memory) if reports_changes else None
                ctx = ActionContext(
                    run,
                    action,
                    event,
                    plan.config,
                    scope.resources,
                    self._call_runner,
                    run_child,
                )
                watched = (
                    self._log.action_started(run.run_id, event, action.name)
                    if self._log is not None
                    else None
                )
                try:
                    run.budget.spend_action()
                    outcome = scope.resolved.functions[action.name](event, ctx)
                    if outcome is not None and inspect.isawaitable(outcome):
                        await run.budget.within(outcome)
                    # Its writes to vector stores are made before it completes (journaled).
                    await run.long_term_memory.written()
                    if changes is not None:  # sent by the action: journaled, replayed with it
                        for changed in changes.events():
                            ctx.send_event(changed)
                    run.budget.spend_events(len(ctx.sent_events))
                    if journal is not None and invocation is not None and watch is not None:
                        done = RecordedAction(list(ctx.sent_events), watch.updates())
                        await journal.completed(invocation, done)
                except RunPaused:
                    raise  # not a failure: the run pauses (_run_root)
                except Exception as exc:
                    if watched is not None:
                        watched.failed(exc)
                    raise _ActionRaised(_failure(action, event, exc)) from exc
                if watched is not None:
                    watched.finished(ctx.sent_events)
                events.extend(ctx.sent_events)

    def _dropped(self, scope: Scope, run: RunState, event: Event) -> None:
        """``event`` has no listener in ``scope`` and is not an output, so nothing handles it.

        Its sender did not declare it in ``sends`` (the compiler refuses a declared type nobody
        listens to): say so once per agent and event type, and record every drop in the event
        log, instead of losing it without a word. Only reached for such an event: the dispatch
        pays a truth test of the listeners it looks up anyway.
        """
        if (scope.name, event.type) not in self._drops_warned:
            self._drops_warned.add((scope.name, event.type))
            logger.warning(
                "agent %r: action %r sent %s, but no action listens to it: the event is dropped "
                "(run %s; warned once per agent and event type). Add an action listening to it, "
                "or declare what the action sends (@action(..., sends=[...])) so that compiling "
                "the agent checks it (docs/agents.md, 'What the compiler checks').",
                scope.name,
                event.upstream_action,
                event.type,
                run.run_id,
            )
        if self._log is not None:
            self._log.event_dropped(run.run_id, event)

    async def _run_child(
        self, parent: Scope, run: RunState, name: str, input: Any, delegation_key: str
    ) -> list[Any]:
        """Run the internal sub-agent ``name`` in the same run; returns its output values.

        The child's input event id derives from the delegation's identity digest, so every id
        of the child run (events, durable calls) is nested under the delegation and never
        collides with the parent's. The child has its own memory for the delegation's duration.

        A child action's own failure fails the delegation (:class:`SubagentScopeError`); an
        :class:`InfrastructureError` (replay mismatch, store, codec) is re-raised as it is, so
        it reaches the parent's action and the job's policies, never a failed delegation.
        """
        scope = parent.child(name)
        run_id = run.run_id
        start = InputEvent(input=input, id=event_id(run_id, delegation_key, f"scope:{name}", 0))
        outputs: list[OutputEvent] = []
        infrastructure: InfrastructureError | None = None
        try:
            child = RunState(
                run_id,
                Memory(),
                calls=run.calls,
                budget=run.budget,
                decisions=run.decisions,
                long_term_memory=run.long_term_memory,  # the delegating run's key's
                scheduled=run.scheduled,  # for the delegating run's key
            )
            with metered_subagent(scope.name, delegation_key):  # its budgets meter its calls
                await self._dispatch(scope, child, start, outputs)
        except _ActionRaised as raised:
            cause = raised.__cause__
            if not isinstance(cause, InfrastructureError):
                raise SubagentScopeError(
                    f"sub-agent {name!r}: {raised.failure.describe()}"
                ) from cause
            infrastructure = cause
        if infrastructure is not None:
            raise infrastructure  # outside the handler: its own cause and trace, no wrapper
        return [event.output for event in outputs if event.error is None]


class SubagentScopeError(RuntimeError):
    """An action of an internal sub-agent raised; the delegation fails with this."""


class _ActionRaised(Exception):
    """An action raised while dispatching; carries where, for the error policy to handle."""

    def __init__(self, failure: ActionFailure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


def _same_key(held: Any, key: Any) -> bool:
    """Whether a run of ``key`` is a run of the key object the engine holds for its token:
    the same object, or an equal string or int (a key of another type with the same JSON,
    a tuple for a list say, keeps the held object, as it always did)."""
    return held is key or (type(held) is type(key) and type(key) in (str, int))


def _requeue(queue: deque[PendingInput], resumed: PendingInput, *, running: bool) -> None:
    """Put a resumed input back into its key's queue in ``seq`` order, after the head when it
    is ``running``: before every input that never ran (those came later), so resumed runs go
    first, oldest first."""
    position = 1 if running and queue else 0
    while position < len(queue) and queue[position].seq < resumed.seq:
        position += 1
    queue.insert(position, resumed)


def _result(outcome: _Outcome) -> RunResult:
    return outcome[0]


def _failure(action: ActionPlan, event: Event, error: Exception) -> ActionFailure:
    # A call's failure handed back on replay ends the run as the live one did: the same error
    # output, which an exactly-once sink commits in place of the live run's.
    error_type, message = live_failure(error)
    return ActionFailure(
        action=action.name,
        event_id=event.id,
        event_type=event.type,
        error_type=error_type,
        message=message,
    )


def _with_clock(pending: PendingInput) -> PendingInput:
    """A copy of a restored input, with a clock if its state was saved before inputs had one
    (from now on it is saved with it)."""
    copied = pending.model_copy(deep=True)
    if copied.admitted_at is None:
        copied.admitted_at = now_ms()
    return copied
