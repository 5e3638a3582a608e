"""The one object every durable call passes through: :class:`DurableCalls`.

Built once per engine, by one constructor, with its collaborators: a store (or none), the
mismatch policy, a freeze fence, a listener told each call's outcome and a probe (kill points,
counting). It owns a call's way from identity to lookup, record and settle, and says how each
call got its result: ``live``, ``replayed``, ``reconciled``, ``failed`` or ``in-doubt``
(:data:`~flink_agents.observability.CallOutcome`). Without a store every call is made
and nothing is recorded (``journal`` is None).

With a store, every action invocation has one :class:`ActionState` (keyed by run, action and
the id of the event it handled) holding its calls in the order the code made them, and, once
the action returned, its events and memory writes. On replay a recorded outcome is handed back
instead of calling again (see docs/durable-execution.md).

When a write must be acknowledged: a call's outcome is handed to the action at once; the
action's *local* steps do not wait for the store. What waits is the next thing that leaves the
process and may depend on that outcome: the run's next call (waited for before it is sent) and
the run's outputs (:meth:`DurableCalls.settled`, before the engine hands the result over). So
an outcome something outside has seen is acknowledged first, and a crash before that loses only
outcomes nothing outside depended on: those calls are made again. Writes are flushed
continuously in batches (:class:`GroupFlusher`), so by the time a run's next call or output
comes, its outcomes are usually acknowledged already.

An outcome is put into the store at the end of the loop step that recorded it, or earlier
where something waits for it or the action completes: an action that makes its last call and
returns within one step (the common case) puts its state once, with the outcome and the
completion, instead of encoding it twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol

from flink_agents.api.attempts import (
    CountedAttempts,
    current_attempt_tracker,
    tracking_attempts,
)
from flink_agents.api.budgets import BudgetApprovalNeeded, CallSpend
from flink_agents.api.connection_notes import noting_connections
from flink_agents.api.context import (
    NOT_DONE,
    InDoubtCallError,
    InfrastructureError,
    RecordedCallError,
)
from flink_agents.api.paused import RunPaused, WaitCall, WaitNeedsStoreError
from flink_agents.durable import faults
from flink_agents.durable.call import DurableCall
from flink_agents.durable.faults import CallProbe, KillPoint
from flink_agents.durable.freeze_fence import FreezeFence
from flink_agents.durable.group_flush import GroupFlusher
from flink_agents.durable.identity import ActionInvocation, RunId, canonical_json
from flink_agents.durable.journal import RecordedAction
from flink_agents.durable.journal_codec import read_action, unwrite_action, write_action
from flink_agents.durable.meter import CallMeter, Reservation
from flink_agents.durable.mismatch import (
    MISMATCH_POLICIES,
    MISMATCH_POLICY_KEY,
    CallMismatchError,
    CallSignature,
    MismatchPolicy,
    describe_mismatch,
)
from flink_agents.durable.store import (
    PICKLE_TAG,
    ActionState,
    ActionStateKey,
    ActionStateStore,
    CallResult,
    CallStatus,
    OutcomeTooLargeError,
    RecordTooLargeError,
    RunInput,
    RunKey,
    StoreError,
    check_outcome_fits,
    now_ms,
)
from flink_agents.observability import CallOutcome, EventLog, call_kind

logger = logging.getLogger(__name__)


class _Op(Enum):
    """A step of the call protocol that its driver (sync or async) performs; the third kind
    of step, "invoke the call under this tracker", is the :class:`_Attempts` itself."""

    RECONCILE = "reconcile"
    SETTLE = "settle"  # wait until the run's writes so far are acknowledged


@dataclass
class _Run:
    """What the runner keeps of one run in flight, found by one lookup of its `RunId` (a
    dataclass: it hashes in Python, each lookup a frame): its store key, its open
    invocations, its input until its first action's state takes it, and its latest ticket."""

    key: RunKey
    # Open invocations by (event id, action), not by `ActionInvocation`: a dataclass hashes
    # in Python, and through its `RunId` again; a tuple of strings in C.
    open: dict[tuple[str, str], _Invocation] = field(default_factory=dict)
    # The input and when it was admitted, until its first action's state takes it (as a
    # `RunInput`, made then: a model held per run in flight is three objects for the garbage
    # collector to scan, a tuple one).
    input: tuple[Any, float] | None = None
    # The ticket of its latest call record: what its next call or output waits for.
    ticket: int | None = None


@dataclass
class _Invocation:
    """The working copy of one action invocation's state, and how far replay has come."""

    run: _Run
    state: ActionState
    position: int = 0  # calls requested so far in this execution
    unput: bool = False  # the state holds an outcome not put into the store yet


@dataclass
class _Attempts:
    """The :class:`AttemptTracker` of one call: counts live in the call's record."""

    runner: DurableCalls
    invocation: _Invocation
    result: CallResult

    @property
    def attempts(self) -> int:
        return self.result.attempts

    @property
    def failed_attempts(self) -> int:
        return self.result.failed_attempts

    def record_attempt(self) -> None:
        self._count("attempts")

    def record_failed_attempt(self) -> None:
        self._count("failed_attempts")

    def _count(self, field: str) -> None:
        self.result = self.result.model_copy(update={field: getattr(self.result, field) + 1})
        # Not awaited (the tracker is synchronous): durable before the run's next call or
        # output, like every outcome.
        self.runner._record(self.invocation, self.result)


class _Outcome:
    """How the call under way got its result, as the protocol says it (None: not yet)."""

    __slots__ = ("name", "sent", "tracker")

    def __init__(self) -> None:
        self.name: CallOutcome | None = None
        self.tracker: _Attempts | CountedAttempts | None = None
        # The call sent in its place (a budget's fallback), if any.
        self.sent: DurableCall | None = None


CallMode = Literal["live", "recorded-only"]
"""``live``: calls are made (and recorded, with a store); ``recorded-only``: every call is
served from its record and none is made, unless the :class:`Unserved` policy makes it live."""


class RecordLookup(Protocol):
    """What recorded-only calls read: an action invocation's recorded state by its key (an
    :class:`ActionStateStore` fits, and so does a dict of exported states)."""

    def get(self, key: ActionStateKey, /) -> ActionState | None: ...


class LiveWatch(Protocol):
    """A call that recorded-only calls make live: told what it returned or raised."""

    def succeeded(self, value: Any) -> None: ...

    def failed(self, error: BaseException) -> None: ...


class Unserved(Protocol):
    """Recorded-only calls' policy for what they cannot serve from a record (the replayer's
    report implements it)."""

    def handed_back(self, call: DurableCall) -> None:
        """``call`` got its recorded outcome."""

    def unserved(
        self,
        call: DurableCall,
        position: int,
        recorded: CallResult | None,
        requested: CallSignature,
    ) -> LiveWatch:
        """``call`` (at ``position`` of its invocation) has no record to serve (``recorded``:
        the record at that position, a call that differs or never finished, or None): raise to
        end the run, or return the watch of the call made live."""


class DurableCalls:
    """Runs an engine's durable calls; with a ``store``, records them and journals completed
    actions (see the module docstring).

    ``agent`` is the plan name (the agent part of every run id); ``mismatch_policy`` decides
    what a replay that differs from the record does (see :data:`MismatchPolicy`);
    ``record_arguments`` whether a call's record carries its arguments' JSON (capped), shown by
    mismatch diffs and the replay tool (only the digest is compared either way). ``fence`` is
    checked before every call is sent and every write (freeze_fence.py). ``listener`` is told
    every call's outcome. ``probe`` is reached at the kill points and invokes each call (a
    counting harness wraps it); without one, the armed fault plan (:data:`faults.ARMED`) is.
    ``meter`` reserves every new call before it is sent and counts what calls spent, recorded
    or replayed (durable/meter.py, docs/budgets.md).

    ``ends_runs_when_emitted``: the host emits a run's outputs some time after the run
    finishes and ends each run itself (:meth:`end_run`) once they are emitted. Ended at its
    finish, a run would be left out of a recovery marker taken before its emission, and a
    checkpoint that still holds its input would replay it with its records skipped.
    """

    def __init__(
        self,
        store: ActionStateStore | None = None,
        *,
        agent: str = "",
        mismatch_policy: MismatchPolicy = "fail",
        record_arguments: bool = True,
        fence: FreezeFence | None = None,
        listener: EventLog | None = None,
        probe: CallProbe | None = None,
        ends_runs_when_emitted: bool = False,
        mode: CallMode = "live",
        records: RecordLookup | None = None,
        unserved: Unserved | None = None,
        meter: CallMeter | None = None,
    ) -> None:
        if mode == "recorded-only":
            if store is not None or records is None or unserved is None:
                raise ValueError(
                    "recorded-only durable calls read records and make none: give them records "
                    "and an unserved-call policy, and no store to write to"
                )
        elif mode != "live":
            raise ValueError(f"mode {mode!r}: expected 'live' or 'recorded-only'")
        elif records is not None or unserved is not None:
            raise ValueError("records and an unserved-call policy are for recorded-only calls")
        if mismatch_policy not in MISMATCH_POLICIES:
            raise ValueError(
                f"mismatch policy {mismatch_policy!r}: expected one of {MISMATCH_POLICIES}"
            )
        if store is not None and not agent:
            raise ValueError("durable calls over a store need the agent (the plan's name)")
        self.store = store
        self.agent = agent
        self.mismatch_policy = mismatch_policy
        self.record_arguments = record_arguments
        self.fence = fence
        self.listener = listener
        self.probe = probe
        self.meter = meter
        self.ends_runs_when_emitted = ends_runs_when_emitted
        self.mode = mode
        self._records = records
        self._unserved = unserved
        # Recorded-only: how many calls of each recorded invocation were asked for so far.
        self._taken: dict[ActionStateKey, int] = {}
        # The engine's hook for replaying completed actions: none without a store.
        self.journal: DurableCalls | None = self if store is not None else None
        self._flusher = GroupFlusher(store) if store is not None else None
        # The runs in flight (until they end: see `end_run`).
        self._runs: dict[RunId, _Run] = {}
        # Invocations with outcomes not put yet; all are put at the end of the loop step.
        self._unput: list[_Invocation] = []

    @classmethod
    def for_plan(
        cls,
        store: ActionStateStore | None,
        plan_name: str,
        config: Mapping[str, Any],
        *,
        default_policy: MismatchPolicy = "fail",
        **collaborators: Any,
    ) -> DurableCalls:
        """Calls for an agent whose config may set :data:`MISMATCH_POLICY_KEY`;
        ``collaborators`` are the other arguments of the constructor."""
        policy = config.get(MISMATCH_POLICY_KEY, default_policy)
        return cls(store, agent=plan_name, mismatch_policy=policy, **collaborators)

    # --- run lifecycle ---------------------------------------------------------------------

    def run_admitted(self, run: RunId, input: Any, admitted_at: float | None = None) -> None:
        """The run's ``input`` is queued to execute (first time or replay); ``admitted_at``
        (epoch ms, now if None) is recorded with it: the run's clock (docs/memory.md)."""
        if self.meter is not None:
            self.meter.run_admitted(run, input)
        if self.store is None:
            return
        state = self._run(run)
        self.store.begin_run(state.key)
        try:
            canonical_json(input)
        except (TypeError, ValueError):
            logger.debug("run %s: its input has no JSON form and is not recorded", run)
            return
        state.input = (input, now_ms() if admitted_at is None else admitted_at)

    def run_finished(self, run: RunId) -> None:
        """The run ended (outputs handed over); its call records may be released."""
        if self.meter is not None:
            self.meter.run_finished(run)
        if self.store is None:
            return
        state = self._runs.get(run)
        if state is not None:
            self._put_outcomes(state)
            state.open, state.input, state.ticket = {}, None, None
        if not self.ends_runs_when_emitted:
            self.end_run(run)

    def end_run(self, run: RunId) -> None:
        """End ``run`` in the store (its outputs are emitted): the next marker leaves it out."""
        state = self._runs.pop(run, None)
        if self.store is not None:
            self.store.end_run(_run_key(run) if state is None else state.key)

    @property
    def writes(self) -> int:
        """How many writes were put into the store so far; the n-th write's ticket is n. Puts
        the call outcomes recorded but not put yet first, so the latest outcome's write is
        the latest write."""
        self._put_all_outcomes()
        return 0 if self._flusher is None else self._flusher.written

    def write_acknowledged(self, ticket: int) -> bool:
        """Whether the write with ``ticket`` and every earlier one are acknowledged."""
        return self._flusher is not None and self._flusher.acknowledged(ticket)

    async def settled(self, run: RunId) -> None:
        """Return once every call outcome recorded for ``run`` is acknowledged: the engine
        awaits this before the run's result (its outputs, its memory) leaves it."""
        state = self._runs.get(run)
        if state is None or self._flusher is None:
            return
        self._put_outcomes(state)
        if state.ticket is not None:
            await self._flusher.durable(state.ticket)

    # --- the action journal ----------------------------------------------------------------

    def recorded(self, invocation: ActionInvocation) -> RecordedAction | None:
        """A completed invocation's record; otherwise (re)opens it for its calls."""
        store = self._store()
        run = self._run(invocation.run)
        key = run.key.action(invocation.action, invocation.event_id)
        state = store.get(key)
        if state is not None and state.completed:
            if self.meter is not None:  # its calls are handed back with it: count them
                for result in state.calls:
                    self.meter.replayed(invocation.run, result)
            return read_action(state)
        if state is None:
            state = ActionState.opened(key, self._input_for(run, invocation))
        run.open[invocation.event_id, invocation.action] = _Invocation(run, state)
        return None

    async def completed(self, invocation: ActionInvocation, action: RecordedAction) -> None:
        """Journal what a completed action invocation did (its events, its memory writes)."""
        store, flusher = self._store(), self._flusher
        assert flusher is not None
        working = self._invocation(invocation)
        self._check_no_calls_left(invocation, working)
        write_action(working.state, action)
        if self.fence is not None:
            self.fence.check()
        try:
            store.put(working.state)
        except RecordTooLargeError as too_large:  # its events or memory writes: not journaled
            logger.warning("%s; the action is not journaled and runs again on a replay", too_large)
            unwrite_action(working.state)
            store.put(working.state)
        working.run.open.pop((invocation.event_id, invocation.action), None)
        # The completion alone is not waited for, not even by the run's outputs: lost in a
        # crash, it only means the action runs again on replay, and its calls' outcomes
        # (acknowledged before anything depending on them left) are handed back. An outcome
        # not put before rides with it, and is waited for like any.
        ticket = flusher.wrote()
        if working.unput:
            working.unput = False
            working.run.ticket = ticket
        probe = self._probe()
        if probe is not None and probe.arms(KillPoint.AFTER_ACTION_COMPLETED):
            await flusher.durable(ticket)  # as at AFTER_RECORD_ACKED: only a probe waits
            probe.reached(KillPoint.AFTER_ACTION_COMPLETED)

    # --- durable calls -----------------------------------------------------------------------

    def run(self, call: DurableCall) -> Any:
        """A call from a synchronous action: flushes block the loop (prefer async actions under
        load)."""
        outcome = _Outcome()
        started = time.perf_counter_ns() if self.listener is not None else 0
        try:
            with self._noting(call):
                if self.store is not None:
                    value = self._drive(call, outcome)
                elif self._unserved is not None:
                    value = self._recorded_only(call, outcome, None)
                else:
                    with self._direct(call, outcome), self._metered(call, outcome) as metered:
                        value = metered(self._invoke(outcome.sent or call, blocking=True))
        except Exception as exc:
            self._finished(call, outcome, started, error=exc)
            raise
        self._finished(call, outcome, started, value=value)
        return value

    async def run_async(self, call: DurableCall) -> Any:
        """A call from an async action (its function may be sync or async)."""
        outcome = _Outcome()
        started = time.perf_counter_ns() if self.listener is not None else 0
        if self.store is None and self._unserved is None and isinstance(call.function, WaitCall):
            raise WaitNeedsStoreError()
        try:
            with self._noting(call):
                if self.store is not None:
                    value = await self._drive_async(call, outcome)
                elif self._unserved is not None:
                    value = await _awaited(self._recorded_only(call, outcome, _awaited_watched))
                else:
                    with self._direct(call, outcome), self._metered(call, outcome) as metered:
                        value = metered(await _awaited(self._invoke(outcome.sent or call)))
        except RunPaused:
            # A wait without its decision: no outcome (the call stays PENDING or unrecorded),
            # made again when the run resumes (docs/waits.md).
            raise
        except Exception as exc:
            self._finished(call, outcome, started, error=exc)
            raise
        self._finished(call, outcome, started, value=value)
        return value

    def _noting(self, call: DurableCall) -> contextlib.AbstractContextManager[None]:
        """While ``call`` runs, its connections' notes (routing, fallbacks, rate-limit waits)
        go to the listener as records of its run."""
        listener = self.listener
        if listener is None:
            return contextlib.nullcontext()
        run = call.identity.run
        return noting_connections(lambda note: listener.connection_noted(run, note))

    def taken(self, key: ActionStateKey) -> int:
        """Recorded-only: how many of the invocation ``key``'s recorded calls were asked for."""
        return self._taken.get(key, 0)

    def _recorded_only(
        self,
        call: DurableCall,
        outcome: _Outcome,
        watched: Callable[[Any, LiveWatch], Any] | None,
    ) -> Any:
        """Serve ``call`` from the record at its position, or ask the :class:`Unserved` policy
        (which raises, or has it made live: its result then goes to the policy's watch, through
        ``watched`` when it may be awaitable)."""
        assert self._records is not None and self._unserved is not None
        identity = call.identity
        key = _run_key(identity.run).action(identity.action, identity.event_id)
        position = self._taken.get(key, 0)
        self._taken[key] = position + 1
        requested = CallSignature.of(identity.call_id, call.function, call.args, call.kwargs)
        state = self._records.get(key)
        calls = state.calls if state is not None else []
        recorded = calls[position] if position < len(calls) else None
        if recorded is not None and CallSignature.recorded(recorded).matches(requested):
            if recorded.status is CallStatus.PENDING:
                recorded = None  # started but never finished when recorded: nothing to serve
            else:
                outcome.name = "replayed"
                self._unserved.handed_back(call)
                return _recorded_outcome(recorded, call)
        watch = self._unserved.unserved(call, position, recorded, requested)
        outcome.name = "live"
        try:
            value = self._invoke(call, blocking=watched is None)
        except Exception as exc:
            watch.failed(exc)
            raise
        if watched is not None:
            return watched(value, watch)
        watch.succeeded(value)
        return value

    def _direct(
        self, call: DurableCall, outcome: _Outcome
    ) -> contextlib.AbstractContextManager[Any]:
        """Without a store the call is made and nothing recorded: its checks, and the context
        that counts its attempts for the listener."""
        if self.fence is not None:
            self.fence.check()
        outcome.name = "live"
        # A provider's retry loop reports its attempts to the current tracker; an enclosing one
        # (a durable call inside a durable call) keeps its own.
        if self.listener is None or current_attempt_tracker.get() is not None:
            return contextlib.nullcontext()
        counted = outcome.tracker = CountedAttempts()
        return tracking_attempts(counted, self._send_check)

    @contextlib.contextmanager
    def _metered(self, call: DurableCall, outcome: _Outcome) -> Generator[Callable[[Any], Any]]:
        """Without a store: the call reserved with the meter (``outcome.sent`` set to what is
        sent); yields what settles its value (nothing to record it in)."""
        reservation = self.meter.reserve(call) if self.meter is not None else None
        if reservation is None:
            yield _unchanged
            return
        outcome.sent = reservation.call
        settled = False

        def settle(value: Any) -> Any:
            nonlocal settled
            reservation.settle(value)
            settled = True
            return value

        try:
            yield settle
        finally:
            if not settled:
                reservation.release()

    def _invoke(self, call: DurableCall, *, blocking: bool = False) -> Any:
        probe = self._probe()
        return call.invoke() if probe is None else probe.invoke(call, blocking=blocking)

    def _drive(self, call: DurableCall, outcome: _Outcome) -> Any:
        stepper = _Stepper(self._protocol(call, outcome))
        probe = self._probe()
        with contextlib.closing(stepper):  # a cancellation ends the protocol (releases)
            while (step := stepper.next()) is not None:
                try:
                    if step is _Op.SETTLE:
                        self._settle_blocking(call.identity.run)
                        stepper.reply(None)
                    elif step is _Op.RECONCILE:
                        assert call.reconciler is not None
                        stepper.reply(_blocking(call.reconciler(call.reconcile_request())))
                    else:
                        with tracking_attempts(step, self._send_check):
                            sent = self._invoke(outcome.sent or call, blocking=True)
                            stepper.reply(_not_awaitable(sent, "function"))
                except Exception as exc:
                    stepper.fail(exc)
        if probe is not None:
            probe.returned(call, self)
        return stepper.value

    async def _drive_async(self, call: DurableCall, outcome: _Outcome) -> Any:
        stepper = _Stepper(self._protocol(call, outcome))
        probe = self._probe()
        with contextlib.closing(stepper):  # a cancellation ends the protocol (releases)
            while (step := stepper.next()) is not None:
                try:
                    if step is _Op.SETTLE:
                        await self.settled(call.identity.run)
                        stepper.reply(None)
                    elif step is _Op.RECONCILE:
                        assert call.reconciler is not None
                        stepper.reply(await _awaited(call.reconciler(call.reconcile_request())))
                    else:
                        with tracking_attempts(step, self._send_check):
                            stepper.reply(await _awaited(self._invoke(outcome.sent or call)))
                except Exception as exc:
                    stepper.fail(exc)
        if probe is not None:
            probe.returned(call, self)
        return stepper.value

    def _finished(
        self,
        call: DurableCall,
        outcome: _Outcome,
        started: int,
        *,
        value: Any = None,
        error: Exception | None = None,
    ) -> None:
        """Tell the listener the call's outcome, as the protocol named it; an error raised
        before it named one (a store or mismatch error on the lookup) is ``failed``."""
        listener = self.listener
        if listener is None:
            return
        name = outcome.name
        if error is not None and name in (None, "live", "reconciled"):
            name = "failed"
        tracker = outcome.tracker
        attempts = None if tracker is None else tracker.attempts
        listener.call_finished(
            call, name or "failed", started, attempts=attempts, value=value, error=error
        )

    def _protocol(
        self, call: DurableCall, outcome: _Outcome
    ) -> Generator[_Op | _Attempts, Any, Any]:
        """The steps of one call over the store, the same for the sync and the async driver;
        names the call's ``outcome`` as it comes about.

        Outcomes are recorded, not waited for: what waits is the next :data:`_Op.SETTLE`, before
        anything is sent (see the module docstring).
        """
        identity = call.identity
        invocation = identity.invocation  # made per access: once
        working = self._invocation(invocation)
        signature = CallSignature.of(
            identity.call_id,
            call.function,
            call.args,
            call.kwargs,
            with_text=self.record_arguments,  # only recorded arguments are ever shown
        )
        recorded = self._recorded_at(invocation, working, signature)
        probe = self._probe()
        if recorded is not None and recorded.status is CallStatus.SUCCEEDED:
            outcome.name = "replayed"
            if probe is not None:
                probe.reached(KillPoint.DURING_RESTORE)
            if self.meter is not None:  # counted, never checked: it was paid
                self.meter.replayed(identity.run, recorded)
            return recorded.value(call.result_type)
        if recorded is not None and recorded.status is CallStatus.FAILED:
            outcome.name = "replayed"
            if self.meter is not None:  # what it spent before it failed (a delegation's calls)
                self.meter.replayed(identity.run, recorded)
            error = recorded.error
            assert error is not None
            raise RecordedCallError(identity.call_id, error.type, error.message, error.trace)
        if recorded is not None:  # PENDING: started before a crash, outcome unknown
            found = NOT_DONE
            if call.reconciler is not None:
                yield _Op.SETTLE  # a reconciler asks the outside world
                outcome.name = "reconciled"
                try:
                    found = yield _Op.RECONCILE
                except InfrastructureError:
                    raise  # says nothing about the call: it stays PENDING
                except Exception as exc:
                    self._record(working, recorded.fail(exc))
                    raise
            if found is not NOT_DONE:
                # Validated as the declared type (or a PayloadError: the call stays PENDING).
                return self._succeed(working, recorded, found, call.result_type)
            if call.in_doubt == "fail":
                outcome.name = "in-doubt"
                unknown = InDoubtCallError(identity.call_id)
                self._record(working, recorded.fail(unknown))
                raise unknown
            if not isinstance(call.function, WaitCall):  # a wait's is its run resuming
                logger.info(
                    "call %s was started, its outcome is unknown: sending it again", identity
                )
        tracker = _Attempts(
            self,
            working,
            CallResult.pending(
                identity.call_id,
                function=signature.function,
                args_digest=signature.args_digest,
                arguments=signature.arguments,
                attempts=recorded.attempts if recorded is not None else 0,
                failed_attempts=recorded.failed_attempts if recorded is not None else 0,
                kind=call_kind(call.function),
            ),
        )
        # Take the call's position now (concurrent calls finish in any order). Write it at once
        # only when a replay would act on it: ask a reconciler, or fail under in_doubt="fail";
        # or when it is a wait, whose PENDING record is how the store shows an open wait
        # (`flink-agents waits list --store`). A resent call without a reconciler would be sent
        # again with or without the record, so it does not pay for the write.
        if (
            call.reconciler is not None
            or call.in_doubt == "fail"
            or isinstance(call.function, WaitCall)
        ):
            self._record(working, tracker.result)
        else:
            if working.unput:  # the earlier outcomes are put as they are, without this position
                self._put(working)
            working.state.record_call(tracker.result)
        # Before sending: the run's earlier outcomes (the call may depend on them) and this
        # call's PENDING record are acknowledged.
        yield _Op.SETTLE
        if probe is not None:
            probe.reached(KillPoint.BEFORE_CALL_SENT)
        if self.fence is not None:
            self.fence.check()
        reservation = self._reserve(call, outcome, working, tracker.result)
        outcome.name, outcome.tracker = "live", tracker
        try:
            value = yield tracker
        except BaseException as exc:
            # Failed or cancelled (the driver closes the protocol): what it spent all the same.
            spent = reservation.release() if reservation is not None else None
            # An infrastructure error (a store, codec or replay error inside the call) is not
            # the call's outcome, nor is a cancellation: the call stays PENDING, so a replay
            # sends it again (or reconciles it).
            if isinstance(exc, Exception) and not isinstance(exc, InfrastructureError):
                self._record(working, tracker.result.fail(exc, spend=spent))
            raise
        if probe is not None:
            probe.reached(KillPoint.AFTER_REPLY_BEFORE_RECORD)
        spend = reservation.settle(value) if reservation is not None else None
        value = self._succeed(working, tracker.result, value, call.result_type, spend)
        if probe is not None and probe.arms(KillPoint.AFTER_RECORD_ACKED):
            # Only a probe waits here: the moment the point names (the outcome acknowledged,
            # the action not resumed yet) exists only when something waits.
            yield _Op.SETTLE
            probe.reached(KillPoint.AFTER_RECORD_ACKED)
        if (
            probe is not None
            and isinstance(call.function, WaitCall)
            and probe.arms(KillPoint.DECISION_RECORDED)
        ):
            yield _Op.SETTLE  # the wait's decision acknowledged, as above
            probe.reached(KillPoint.DECISION_RECORDED)
        return value

    def _reserve(
        self, call: DurableCall, outcome: _Outcome, working: _Invocation, pending: CallResult
    ) -> Reservation | None:
        """A new call's reservation with the meter (None: no meter, or not metered); a refusal
        is recorded as the call's failure, like any outcome, and raised."""
        if self.meter is None:
            return None
        try:
            reservation = self.meter.reserve(call)
        except (InfrastructureError, BudgetApprovalNeeded):
            raise  # not the call's outcome (approval: asked by the action's context, not sent)
        except Exception as refused:
            outcome.name = "failed"
            self._record(working, pending.fail(refused))
            raise
        if reservation is not None:
            outcome.sent = reservation.call
        return reservation

    @property
    def _send_check(self) -> Callable[[], None] | None:
        """The fence's check, for ``check_before_sending`` where the call's request leaves."""
        return None if self.fence is None else self.fence.check

    def _probe(self) -> CallProbe | None:
        """The probe, else the armed fault plan (armed by a host at any time), else None."""
        return self.probe if self.probe is not None else faults.ARMED

    def _store(self) -> ActionStateStore:
        store = self.store
        if store is None:  # the engine asks for the journal only when there is one
            raise RuntimeError("durable calls without a store keep no journal")
        return store

    # --- helpers -------------------------------------------------------------------------------

    def _input_for(self, run: _Run, invocation: ActionInvocation) -> RunInput | None:
        """The run's input, for the first action invoked on its input event (so a recorded run
        can be replayed elsewhere: one small field, no record of its own)."""
        if run.input is None or invocation.event_id != invocation.run.input_event_id:
            return None
        (value, admitted_at), run.input = run.input, None
        return RunInput.of(value, admitted_at)

    def _run(self, run: RunId) -> _Run:
        state = self._runs.get(run)
        if state is None:
            state = self._runs[run] = _Run(_run_key(run))
        return state

    def _invocation(self, invocation: ActionInvocation) -> _Invocation:
        run = self._runs.get(invocation.run)
        working = None if run is None else run.open.get((invocation.event_id, invocation.action))
        if working is None:  # not opened through the journal (an engine without one)
            self.recorded(invocation)
            working = self._runs[invocation.run].open[invocation.event_id, invocation.action]
        return working

    def _record(self, working: _Invocation, result: CallResult) -> None:
        """Record the call's outcome, put into the store by the end of this loop step (see the
        module docstring); the run's next call and its outputs wait for it."""
        working.state.record_call(result)
        if result.payload_type == PICKLE_TAG:
            # Put at once: a store without a secret refuses it, and the call must see that.
            self._put(working)
        elif not working.unput:
            working.unput = True
            if not self._unput:
                asyncio.get_running_loop().call_soon(self._put_all_outcomes)
            self._unput.append(working)

    def _put(self, working: _Invocation) -> None:
        """Put an invocation's state holding outcomes not put yet."""
        assert self._flusher is not None
        if self.fence is not None:
            self.fence.check()
        self._store().put(working.state)
        working.unput = False
        working.run.ticket = self._flusher.wrote()

    def _put_all_outcomes(self) -> None:
        waiting, self._unput = self._unput, []
        for working in waiting:
            if working.unput:
                try:
                    self._put(working)
                except StoreError as exc:
                    # Still not put: tried again, and raised, where its run waits for it.
                    logger.warning("putting %s failed: %r", working.state.key.canonical(), exc)

    def _put_outcomes(self, run: _Run) -> None:
        """Put the outcomes of ``run`` not put yet: something is about to wait for them."""
        for working in run.open.values():
            if working.unput:
                self._put(working)

    def _settle_blocking(self, run: RunId) -> None:
        """:meth:`settled` for synchronous actions: flushes the store on the loop thread."""
        state = self._runs.get(run)
        if state is None:
            return
        self._put_outcomes(state)
        ticket, flusher = state.ticket, self._flusher
        if ticket is not None and flusher is not None and not flusher.acknowledged(ticket):
            written = flusher.written
            self._store().flush()
            flusher.flushed(written)

    def _succeed(
        self,
        working: _Invocation,
        started: CallResult,
        value: Any,
        result_type: type | None,
        spend: CallSpend | None = None,
    ) -> Any:
        """Record ``value`` as the call's outcome (with what it ``spend``s); returns what the
        action gets: with a declared type, the value rebuilt from its record, exactly what a
        replay hands back. A value too large for the store's record is recorded (and raised) as
        the call's failure."""
        if spend is not None:
            started = started.model_copy(update={"spend": spend})
        done = started.succeed(value, result_type)
        try:
            check_outcome_fits(self._store(), working.state, done)
        except OutcomeTooLargeError as too_large:
            self._record(working, started.fail(too_large))
            raise
        self._record(working, done)
        return value if result_type is None else done.value(result_type)

    def _recorded_at(
        self, invocation: ActionInvocation, working: _Invocation, requested: CallSignature
    ) -> CallResult | None:
        """The record at the call's position, if it is the same call; else a mismatch."""
        position = working.position
        working.position += 1
        calls = working.state.calls
        if position >= len(calls):
            return None
        recorded = calls[position]
        if CallSignature.recorded(recorded).matches(requested):
            return recorded
        self._mismatch(invocation, working, position, CallSignature.recorded(recorded), requested)
        return None

    def _check_no_calls_left(self, invocation: ActionInvocation, working: _Invocation) -> None:
        calls = working.state.calls
        if working.position < len(calls):
            extra = CallSignature.recorded(calls[working.position])
            self._mismatch(invocation, working, working.position, extra, None)

    def _mismatch(
        self,
        invocation: ActionInvocation,
        working: _Invocation,
        position: int,
        recorded: CallSignature,
        requested: CallSignature | None,
    ) -> None:
        if self.mismatch_policy == "fail":
            raise CallMismatchError(invocation, position, recorded, requested)
        logger.warning(
            "%s\n(policy warn: the records from here on are dropped and calls made again)",
            describe_mismatch(invocation, position, recorded, requested),
        )
        del working.state.calls[position:]


class _Stepper:
    """Feeds replies and errors into a call protocol generator; keeps its return value."""

    def __init__(self, steps: Generator[_Op | _Attempts, Any, Any]) -> None:
        self._steps = steps
        self._reply: Any = None
        self._error: Exception | None = None
        self.value: Any = None

    def next(self) -> _Op | _Attempts | None:
        """The next step, or None when the protocol returned (see :attr:`value`)."""
        reply, error = self._reply, self._error
        self._reply, self._error = None, None
        try:
            return self._steps.throw(error) if error is not None else self._steps.send(reply)
        except StopIteration as done:
            self.value = done.value
            return None

    def reply(self, value: Any) -> None:
        self._reply = value

    def fail(self, error: Exception) -> None:
        self._error = error

    def close(self) -> None:
        """End the protocol where it is (a no-op once it returned)."""
        self._steps.close()


def _run_key(run: RunId) -> RunKey:
    return RunKey(agent=run.agent, key=canonical_json(run.key), seq=run.seq)


def _recorded_outcome(recorded: CallResult, call: DurableCall) -> Any:
    """A recorded outcome, handed back: its value, or its failure raised."""
    if recorded.status is CallStatus.FAILED:
        error = recorded.error
        assert error is not None
        raise RecordedCallError(call.identity.call_id, error.type, error.message, error.trace)
    return recorded.value(call.result_type)


async def _awaited_watched(value: Any, watch: LiveWatch) -> Any:
    """A live call's result (awaited if it is awaitable), told to ``watch``."""
    try:
        result = await value if inspect.isawaitable(value) else value
    except Exception as exc:
        watch.failed(exc)
        raise
    watch.succeeded(result)
    return result


def _unchanged(value: Any) -> Any:
    return value


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _blocking(value: Any) -> Any:
    """``value``, awaited to its end if it is awaitable: an async reconciler asked from a
    synchronous action (which holds the loop, as its flushes do) runs on a loop of its own in a
    worker thread, so it must not use clients bound to the job's loop."""
    if not inspect.isawaitable(value):
        return value
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(asyncio.run, _awaited(value)).result()


def _not_awaitable(value: Any, what: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(f"the {what} of a durable call returned an awaitable: use an async action")
    return value
