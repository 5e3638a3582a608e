"""The per-key logic of a keyed host, as a plain object: no Flink here.

A keyed host (the PyFlink operator, ``flink/operator.py``) calls :class:`KeyedAgentLogic` for
every input and every timer, under the key it belongs to, with that key's saved state (any
:class:`SavedState`: PyFlink's ``ValueState`` fits as it is). The logic never calls the host back:
it answers with a :class:`Visit`, the records to emit and the timers to register. It owns

* the key's :class:`~flink_agents.runtime.state.KeyState`, the one owner of ``seq`` (the engine
  runs each input under the ``seq`` handed to it) and of the committed short-term memory (taken
  from each finished run when its outputs are emitted, and serialized with the state);
* when to come back to a key with a run in flight (the timer arithmetic: one chain of timers per
  key, aimed at its running input's expected end), and counts of those visits;
* restoring the action-state store after a restart from the recovery marker saved with key
  states, and taking markers now and then (``runtime/recovery.py``);
* closing an engine its task left open: PyFlink's thread mode skips ``close()`` when a task is
  stopped, cancelled or failed over. Given ``task_alive``, the engine closes itself once its
  task has ended (the freeze fence's watchdog asks); and an attempt a failed one left open in
  this interpreter is closed when the next one opens.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from flink_agents.api.json_values import json_bytes
from flink_agents.api.waits import Decision
from flink_agents.durable import faults
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.faults import KillPoint
from flink_agents.durable.freeze_fence import FreezeFence
from flink_agents.durable.identity import RunId
from flink_agents.durable.store import (
    ANY_PLACEMENT,
    CRC32_PLACEMENT,
    ActionStateStore,
    KeyGroupRange,
    RecoveryMarker,
    canonical_json,
    now_ms,
)
from flink_agents.observability import EventLog, Observer, WaitChange, build_event_log
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import RunEngine
from flink_agents.runtime.host import CompletedRun, EngineHost
from flink_agents.runtime.json_records import (
    BadRecord,
    bad_input_record,
    decode_input,
    outputs_of,
    unkeyed,
)
from flink_agents.runtime.rate_split import with_rate_limits_split
from flink_agents.runtime.recovery import MarkerClock, compact, from_start
from flink_agents.runtime.settings import RuntimeSettings
from flink_agents.runtime.state import KeyState, PendingInput
from flink_agents.runtime.wait_book import Apply, OpenWait, Refused, Resume
from flink_agents.runtime.wait_records import (
    bad_resume_record,
    record_key,
    refused_record,
    waiting_record,
)

logger = logging.getLogger(__name__)


class SavedState(Protocol):
    """The current key's saved state in the host's keyed state (PyFlink's ``ValueState`` fits)."""

    def value(self) -> str | None: ...

    def update(self, value: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Visit:
    """What one input or timer of a key gives back to the host."""

    outputs: Sequence[str] = ()
    """Output records (JSON text), in order."""
    poll_at: int | None = None
    """Processing time (ms) at which to visit the key again, if any."""
    until_end_of_input: bool = False
    """Whether to visit the key when a bounded input ends (so it does not end with runs in
    flight); set with a key's first input: the host checkpoints that timer with the key's
    state, so it is there for every later input, after a restore too."""
    wake_at: int | None = None
    """Processing time (ms) of a wait's deadline: a timer to register besides ``poll_at``
    (docs/waits.md); it fires once, after a restore too if it came due meanwhile."""
    follow_ups_at: Sequence[int] = ()
    """Processing times (ms) of the follow-ups the key's finished runs scheduled
    (``ctx.schedule``): a timer each, checkpointed like ``wake_at``."""
    expiry_at: int | None = None
    """Processing time (ms) at which the key's earliest short-term memory entry expires: a timer
    at which its expired entries are dropped from the key's state if no run of the key did it
    first (docs/memory.md, "Expiry")."""
    parked: int = 0
    """Runs this visit parked at a new wait (their ``waiting`` records are in ``outputs``): the
    host passes the :attr:`~KillPoint.WHILE_PAUSED` kill point once each, after the outputs."""


_NOTHING = Visit()


@dataclass(slots=True)
class VisitCounts:
    """Timer visits of keys (the end-of-input visit not counted), for the host's metrics."""

    visits: int = 0
    """Processing-time visits."""
    idle: int = 0
    """Visits that emitted nothing (the key's run was still going)."""


class SavedKey(BaseModel):
    """What keyed state holds for one key: the key state and a recovery marker."""

    runs: KeyState = Field(default_factory=KeyState)
    marker: str | None = Field(
        default=None, description="Compact RecoveryMarker JSON taken before this state was saved."
    )
    parallelism: int | None = Field(
        default=None,
        description="The operator's parallelism when the marker was taken: a marker covers the "
        "runs of its own subtask only, so after a rescale that merges subtasks it is not enough.",
    )


def _saved_text(saved: SavedKey) -> str:
    """The keyed state's text of ``saved``: pydantic's JSON, a lone surrogate (an input or
    memory holding undecodable bytes) written as its escape (`json_bytes`)."""
    return json_bytes(saved, inf_nan_mode="null").decode("utf-8")


def _read_saved(text: str) -> SavedKey:
    """`_saved_text`'s `SavedKey` (pydantic's JSON parser refuses a lone surrogate's escape,
    ``json`` reads it back into the same string)."""
    try:
        return SavedKey.model_validate_json(text)
    except ValidationError:
        return SavedKey.model_validate(json.loads(text))


class KeyedAgentLogic:
    """Runs one agent plan per key for a keyed host (see the module docstring).

    Construct it with the plan and the runtime's settings, :meth:`open` it, call
    :meth:`on_input` and :meth:`on_timer` under each key, and :meth:`close` it. With a store in
    the settings, every durable call goes through the action-state store, so a run replayed
    after a restore gets back what had completed instead of calling again.
    """

    def __init__(
        self,
        plan: AgentPlan,
        settings: RuntimeSettings,
        *,
        listeners: Sequence[Observer] = (),
    ) -> None:
        self._plan = plan
        self._settings = settings
        self._listeners = listeners
        self._event_log: EventLog | None = None
        self._options = options = settings.operator
        self._identity = plan.name
        self._host: EngineHost | None = None
        self._store: ActionStateStore | None = None
        self._fence: FreezeFence | None = None
        self._calls: DurableCalls | None = None  # with a store: ends runs once emitted
        self._restarted = False
        self._parallelism = 1
        self._key_groups: KeyGroupRange | None = None  # this subtask's, in a Flink job
        self._placement = CRC32_PLACEMENT
        self._recovered = True
        self._marker: str | None = None
        self._marker_deadline: float | None = None  # set by the first key without a marker
        self._armed: dict[str, int] = {}  # per key, the timer last armed until it fires
        self._pending_states: dict[str, KeyState] = {}  # see _load
        self._deadlines: dict[str, int] = {}  # per key with timed waits or follow-ups, the next
        self._expiries: dict[str, int] = {}  # per key with expiring memory, its earliest expiry
        self.visits = VisitCounts()
        self._clock = MarkerClock(
            every_s=options.marker_interval_ms / 1000, prune_after_s=options.prune_after_ms / 1000
        )
        self._closing = threading.Lock()  # the host's thread and the fence's watchdog may close

    # --- lifecycle -------------------------------------------------------------------------------

    def open(
        self,
        *,
        attempt: int,
        subtask: int,
        parallelism: int = 1,
        max_parallelism: int | None = None,
        task_alive: Callable[[], bool] | None = None,
    ) -> None:
        """Start the engine (and the store) for subtask ``subtask`` of ``parallelism``.

        ``attempt`` is the host task's attempt number (0 on a fresh start). A later attempt, or
        a first one with ``started_from_savepoint``, restores the store before running anything:
        Flink does not tell Python functions whether their state was restored.
        ``max_parallelism``: the job's key groups (a Flink host tells them): the store then
        places records by key group and a restore reads only this subtask's.
        ``task_alive``: whether the host's task still runs, for a host that may end without
        calling :meth:`close` (asked a few times a second; once false, the engine sends nothing
        more and closes).
        """
        self._plan = with_rate_limits_split(self._plan, parallelism)
        plan = self._plan
        settings = self._settings
        if settings.store is not None:
            self._store = settings.store.build(max_parallelism)
            self._placement = settings.store.placement_for(max_parallelism)
        if max_parallelism is not None:
            self._key_groups = KeyGroupRange.of_subtask(subtask, parallelism, max_parallelism)
        # A zombie's store writes are fenced at restore (writer epochs); its calls, here, with
        # a store or without.
        self._fence = FreezeFence(
            self._options.freeze_fence_s, task_alive=task_alive, on_task_ended=self._task_ended
        )
        self._fence.start()
        self._event_log = build_event_log(
            settings.event_log,
            self._listeners,
            plan_data=plan.model_dump(mode="json"),
            subtask=subtask,
        )
        factory = partial(
            self._build_engine,
            store=self._store,
            fence=self._fence,
            ends_runs_when_emitted=True,  # see _end_emitted
            event_log=self._event_log,
        )
        # Stop the previous attempt's engine first, or its runs would go on calling models
        # beside ours.
        self._identity = f"{plan.name}/{subtask}"
        _close_previous_attempt(self._identity)
        if self._options.kill_points:  # armed once the previous attempt is closed: see faults
            faults.arm(self._options.kill_points, self._options.kill_markers_dir)
        self._host = EngineHost(
            factory,
            max_unfinished=self._options.unfinished_bound,
            idle_key_s=self._options.idle_key_ms / 1000,
        )
        _OPEN[self._identity] = self
        # Missing credentials and unusable resources fail here, at job start.
        self._host.engine.open_resources()
        self._restarted = attempt > 0 or self._options.started_from_savepoint
        self._parallelism = parallelism
        self._recovered = self._store is None

    def _build_engine(self, **options: Any) -> RunEngine:
        """The engine (built by :meth:`Runtime.build`); keeps its calls when they record."""
        runtime = Runtime.build(self._plan, self._settings, **options)
        if self._store is not None:
            assert isinstance(runtime.calls, DurableCalls)
            self._calls = runtime.calls
        return runtime.engine

    def close(self) -> None:
        """Cancel runs in flight and close the store; unfinished inputs stay in the key states."""
        with self._closing:
            try:
                if self._host is not None:
                    self._host.close()
                    self._host = None
                if self._fence is not None:
                    self._fence.stop()
                    self._fence = None
                if self._store is not None:
                    self._store.close()
                    self._store = None
                if self._event_log is not None:
                    self._event_log.close()
                    self._event_log = None
            finally:
                # Registered until closed: the next attempt's open waits for a close under way
                # (the watchdog's), whose last store writes its restore must read.
                if _OPEN.get(self._identity) is self:
                    del _OPEN[self._identity]

    def _task_ended(self) -> None:
        """The host's task ended without :meth:`close` (the fence's watchdog tells): close."""
        host = self._host
        unfinished = 0 if host is None else host.unfinished
        self.close()
        # A bounded job's end is the usual way here; runs cut short are worth a warning.
        logger.log(
            logging.WARNING if unfinished else logging.INFO,
            "the task of %s ended without closing its engine, %d inputs unfinished: closed it "
            "(they go on from the last checkpoint or savepoint where the job runs next)",
            self._identity,
            unfinished,
        )

    # --- inputs and timers -----------------------------------------------------------------------

    def on_input(
        self,
        key: str,
        value: str,
        state: SavedState,
        clock: Callable[[], int],
        timestamp: int | None = None,
    ) -> Visit:
        """Accept ``value`` (JSON text) under ``key`` (the canonical JSON of the key value).

        The input is in the key's state from now until its outputs are emitted. Blocks while the
        window of unfinished inputs is full (back-pressure). ``clock`` reads the host's
        processing time in ms. ``timestamp``: the input's event time (ms), kept with it and
        written on its outputs.
        """
        try:
            record = decode_input(value)
            if key == "null":
                raise unkeyed(value)
        except BadRecord as exc:
            bad = bad_input_record(self._plan.name, None, str(exc), input=value)
            return Visit(outputs=[bad.to_json()])
        host = self._require_host()
        if self._key_groups is not None and not host.knows(key):
            # The store's form of the key (its runs' `RunKey.key`) must be in this subtask's
            # key groups, or a restore here would not read its records.
            self._placement.check_owner(self._key_groups, canonical_json(json.loads(key)))
        runs = self._load(key, state)
        if self._recovered and not host.knows(key) and _holds_anything(runs):
            # A key new to the job has nothing to restore: its submit makes it known. Most
            # inputs of a job with many keys are such keys (one restore hand-off less each).
            host.restore(key, runs)
        seq = runs.next_seq
        pending = PendingInput(seq=seq, input=record, admitted_at=now_ms(), timestamp=timestamp)
        runs.pending.append(pending)
        runs.next_seq = seq + 1
        self._save(key, state, runs)
        if self._recovered:
            host.submit(key, record, seq, pending.admitted_at)
        # Else the input waits in state for the store's restore; its timer comes back for it.
        # A key with a timer armed needs none: that visit comes first and re-arms (so neither
        # the clock nor the timer service is called). The end-of-input timer is checkpointed
        # with the key's state: its first input sets it (a state saved with a later seq,
        # restored or not, comes with its timer).
        poll_at = None if key in self._armed else self._arm(key, clock(), host.due(key))
        return Visit(poll_at=poll_at, until_end_of_input=seq == 0)

    def on_resume(self, key: str, value: str, state: SavedState, clock: Callable[[], int]) -> Visit:
        """Accept a decision or event record (JSON text) under ``key``, the second input keyed
        like the first (docs/waits.md): applied to the key's open wait (its run resumes), kept
        for a wait still to register, dropped as a duplicate, or refused with the reason."""
        try:
            resume = Resume.parse(decode_input(value))
        except (BadRecord, ValueError) as exc:
            return Visit(
                outputs=[bad_resume_record(self._plan.name, record_key(key), value, str(exc))]
            )
        runs = self._load(key, state)
        offer = runs.waits.offer(resume, runs_pending=bool(runs.pending), now_ms=clock())
        if offer == "duplicate":
            return _NOTHING
        if isinstance(offer, Refused):
            return Visit(outputs=[refused_record(self._plan.name, record_key(key), offer)])
        self._save(key, state, runs)
        if faults.ARMED is not None:  # in the key's state, not handed to (recorded by) the run
            faults.ARMED.reached(KillPoint.DECISION_READ)
        if not isinstance(offer, Apply):
            return _NOTHING  # kept for its wait
        self._note_resumed(key, runs, [offer])
        host = self._require_host()
        if host.knows(key):
            return Visit(poll_at=self._resumed(key, [offer], clock()))
        # A paused key not seen since a restart (no timer of its own brings it back): its run
        # starts again with the decision in its state.
        if self._recovered:
            host.restore(key, runs)
        return Visit(poll_at=self._arm(key, clock(), host.due(key)))

    def on_timer(
        self,
        key: str,
        state: SavedState,
        timestamp: int,
        clock: Callable[[], int],
        *,
        end_of_input: bool = False,
    ) -> Visit:
        """Visit ``key`` at ``timestamp``: emit its finished runs and say when to come back.

        With ``end_of_input`` (a bounded input has ended), wait for the key's remaining runs
        instead. After a restore, the first visit hands the key's unfinished inputs to the
        engine, which runs them again with the same ``seq``.
        """
        if self._host is None:
            # A poll timer outliving the end of a bounded input (the end-of-input timer already
            # finished the key's runs) fires after close(): nothing is left to do.
            return _NOTHING
        host = self._host
        host.forget_idle()  # before the key's own turn: a key it forgets is restored below
        if not end_of_input:
            self.visits.visits += 1
            if self._armed.get(key) == timestamp:
                del self._armed[key]
        if not host.knows(key):
            # First visit after a restore: the engine starts the key's unfinished inputs again.
            runs = self._load(key, state)
            if not self._recovered:
                if not end_of_input:  # still waiting for a key that carries a marker
                    self.visits.idle += 1
                    return Visit(poll_at=self._arm(key, max(clock(), timestamp), None))
                self._recover(None, wait=False)  # the input has ended: nothing more will come
            if not runs.pending and self._deadlines.get(key, timestamp + 1) > timestamp:
                if not end_of_input:
                    self.visits.idle += 1
                return Visit(expiry_at=self._drop_expired(key, state, max(clock(), timestamp)))
            host.restore(key, runs)  # a key with only a follow-up due too
        now = max(clock(), timestamp)
        expiry_at = self._drop_expired(key, state, now)
        resumed = self._time_out(key, state, now)
        if end_of_input:
            completed, progress = host.wait_idle(key), None
        else:
            progress = host.visit(key)
            completed = progress.completed
        # Most visits find the run still going: they touch neither state nor JSON.
        outputs: list[str] = []
        wake_at: int | None = None
        follow_ups_at: list[int] = []
        parked = 0
        if not completed and progress is not None:
            self.visits.idle += 1
        while completed:
            runs = self._load(key, state)
            before = runs.waits.next_deadline()
            outputs += self._commit(key, runs, completed, follow_ups_at)
            applies, new_waits = self._register(key, runs, completed, now, outputs)
            parked += new_waits
            after = runs.waits.next_deadline()
            if after is not None and after != before:
                wake_at = after
            self._save(key, state, runs)
            expiry_at = self._expiries.get(key, expiry_at)
            self._end_emitted(completed)
            if self._event_log is not None:
                # The runs' records are queued (a run's end is recorded before its result is
                # handed over): in the event log's file before their outputs leave.
                self._event_log.write_queued()
            completed = []
            if applies:
                resumed = self._resumed(key, applies, now) or resumed
                if end_of_input:  # nothing visits the key again: see the resumed runs out
                    completed = host.wait_idle(key)
        if resumed is not None:
            poll_at = resumed
        elif progress is None or not progress.unfinished:
            poll_at = None
        else:
            poll_at = self._arm(key, now, progress.due)
        return Visit(
            outputs,
            poll_at,
            wake_at=wake_at,
            follow_ups_at=follow_ups_at,
            expiry_at=expiry_at,
            parked=parked,
        )

    # --- helpers ---------------------------------------------------------------------------------

    def _commit(
        self, key: str, runs: KeyState, completed: list[CompletedRun], follow_ups_at: list[int]
    ) -> list[str]:
        """Take the finished runs' outputs, memory and follow-ups into the key state (a paused
        run's input stays pending; the follow-ups' times go to ``follow_ups_at``); records kept
        for waits no run is left to register are refused."""
        outputs: list[str] = []
        for run in completed:
            if run.result.paused is not None:
                continue
            seq = run.result.run_id.seq
            taken = [p for p in runs.pending if p.seq == seq]
            runs.pending = [p for p in runs.pending if p.seq != seq]
            runs.short_term_memory = run.short_term_memory
            runs.short_term_expiry = run.short_term_expiry
            runs.spend = run.spend
            runs.long_term_memory = run.long_term_memory
            if run.result.scheduled:  # in the same state as the input's end: kept once
                runs.schedule(run.result.scheduled)
                follow_ups_at.extend(s.at_ms for s in run.result.scheduled)
            run_input, timestamp = (taken[0].input, taken[0].timestamp) if taken else (None, None)
            outputs.extend(
                record.to_json() for record in outputs_of(run.result, run_input, timestamp)
            )
            if runs.waits:
                for refused in runs.waits.run_finished(seq, runs_pending=bool(runs.pending)):
                    outputs.append(refused_record(self._plan.name, record_key(key), refused))
        return outputs

    def _register(
        self, key: str, runs: KeyState, completed: list[CompletedRun], now: int, outputs: list[str]
    ) -> tuple[list[Apply], int]:
        """Register the waits the paused runs stopped at (a new one's ``waiting`` record goes
        to ``outputs``); returns the decisions to hand them at once, and how many waits were
        new."""
        applies: list[Apply] = []
        new_waits = 0
        for run in completed:
            request = run.result.paused
            seq = run.result.run_id.seq
            if request is None or not any(p.seq == seq for p in runs.pending):
                # A pause its run already went past: after a restore, the wait's decision can
                # reach the replayed run before a visit takes the pause (the run finished in
                # this same visit, committed above).
                continue
            registered = runs.waits.register(request, seq, now)
            new, apply = registered.new, registered.apply
            for refused in registered.refused:
                outputs.append(refused_record(self._plan.name, record_key(key), refused))
            if new:  # a replay registering it again after a restore was recorded before
                new_waits += 1
                wait = next(w for w in runs.waits.open if w.request.wait_id == request.wait_id)
                outputs.append(waiting_record(self._plan.name, record_key(key), wait))
                self._note_wait(key, "paused", wait)
                if apply is not None:  # a decision kept early: the run resumes at once
                    self._note_resumed(key, runs, [apply])
            if apply is not None:
                applies.append(apply)
        return applies, new_waits

    def _time_out(self, key: str, state: SavedState, now: int) -> int | None:
        """Resolve the key's waits whose deadline passed (a timer of the key fired: a deadline,
        a follow-up or a poll) and start its follow-ups that came due, as new inputs; returns
        the poll timer to arm for the resumed or new runs, if any."""
        deadline = self._deadlines.get(key)
        if deadline is None or deadline > now:
            return None
        runs = self._load(key, state)
        fired = runs.waits.due(now) if runs.waits else []
        follow_ups = runs.take_due(now)
        self._save(key, state, runs)  # the follow-ups are pending inputs before they start
        if faults.ARMED is not None and (fired or follow_ups):
            faults.ARMED.reached(KillPoint.TIMER_FIRING)
        host = self._require_host()
        for pending in follow_ups:
            host.submit(key, pending.input, pending.seq)
        self._note_resumed(key, runs, fired)
        if fired:
            return self._resumed(key, fired, now)
        return self._arm(key, now, host.due(key)) if follow_ups else None

    def _drop_expired(self, key: str, state: SavedState, now: int) -> int | None:
        """Drop the key's expired short-term memory entries from its state when one expired by
        ``now`` and no run of the key is pending (a run drops them when it commits; while one
        runs, its memory is the engine's); returns when the next one expires, for a timer.
        A key's entry expires for runs admitted at or after its expiry, so one dropped at
        ``now`` is one no later run could see. Costs a lookup unless one is due."""
        at = self._expiries.get(key)
        if at is None or at > now:
            return None
        runs = self._load(key, state)
        if runs.pending:
            return None
        expiry = runs.short_term_expiry
        expired = [entry for entry, until in expiry.items() if until <= now]
        runs.short_term_memory = {
            entry: value for entry, value in runs.short_term_memory.items() if entry not in expired
        }
        runs.short_term_expiry = {e: until for e, until in expiry.items() if e not in expired}
        self._save(key, state, runs)
        return self._expiries.get(key)

    def _resumed(self, key: str, applies: list[Apply], now: int) -> int | None:
        """Hand the key's run its decisions; returns the poll timer to arm for it, if any."""
        host = self._require_host()
        if not host.knows(key):  # the first visit after a restore hands over the key state
            return None
        for apply in applies:
            host.resume(key, apply.wait_id, apply.decision)
        return self._arm(key, now, host.due(key))

    def _note_resumed(self, key: str, runs: KeyState, applies: list[Apply]) -> None:
        """Record that the key's waits were resolved (a decision, an event, a deadline)."""
        for apply in applies:
            wait = next(w for w in runs.waits.open if w.request.wait_id == apply.wait_id)
            self._note_wait(key, "resumed", wait, apply.decision)

    def _note_wait(
        self, key: str, change: WaitChange, wait: OpenWait, decision: Decision | None = None
    ) -> None:
        """Tell the event log (its records and the metrics) of a wait's change, on the
        engine's thread, where its listeners are called (before the run it resumes goes on)."""
        if self._event_log is None:
            return
        run = RunId(self._plan.name, record_key(key), wait.seq)
        self._require_host().post(
            self._event_log.wait_noted, run, change, wait.request, wait.deadline_ms, decision
        )

    def _end_emitted(self, completed: list[CompletedRun]) -> None:
        """End the runs just emitted in the store, now that the key's state no longer holds their
        inputs: a recovery marker taken while a finished run waits for its visit still covers
        it, so a checkpoint holding its input replays it with its records. A paused run stays
        open: its records are what its resumed run replays."""
        if self._calls is not None:
            for run in completed:
                if run.result.paused is None:
                    self._require_host().post(self._calls.end_run, run.result.run_id)

    def _arm(self, key: str, now: int, due: float | None) -> int | None:
        """The timer to register so that ``key`` is visited when its running input is likely
        done (``due``, the host's clock), or None when a timer already armed comes first.

        The logic remembers the timer it last armed per key until that timer fires, so a key
        has one chain of visits however many inputs arrive meanwhile: a visit re-arms only when
        no later timer is pending. Every key with unfinished inputs has a timer pending (or
        asked for here); after a restart the books start empty and the restored timers fire
        anyway, which at worst arms one timer more.
        """
        at = self._next_visit(now, due)
        armed = self._armed.get(key)
        if armed is not None and armed <= at:
            return None
        self._armed[key] = at
        return at

    def _next_visit(self, now: int, due: float | None) -> int:
        """When to come back to a key (processing time, ms) whose running input is ``due``.

        While the run is expected to go on, at its expected end, its start plus the average
        run duration (capped at ``max_first_poll_ms``); once it is overdue (or nothing tells
        when it started), the runs' mean deviation later (at least ``poll_interval_ms``, at
        most ``max_poll_ms``): a run that outlasts every estimate is still visited until it
        ends. Aiming at the average, not beyond it, keeps the output latency of the runs
        slower than average to about a deviation (bench/results/analysis.md, "Timer visits").
        Timers sit on a grid of ``poll_interval_ms``: a host keeps one timer per key and
        timestamp (Flink does), so arming again never starts a second chain.
        """
        host = self._require_host()
        interval = self._options.poll_interval_ms
        remaining_ms = 0 if due is None else math.ceil((due - host.now()) * 1000)
        if remaining_ms > 0:
            delay = min(remaining_ms, self._options.max_first_poll_ms)
        else:
            deviation_ms = int(host.run_deviation_seconds * 1000)
            delay = min(max(deviation_ms, interval), self._options.max_poll_ms)
        return ((now + delay) // interval + 1) * interval

    def _load(self, key: str, state: SavedState) -> KeyState:
        """The key's state. While the key has inputs pending it is the one this logic saved last
        (kept, not read back: nothing else writes a key's state, and a restart opens a new
        logic), else it is read; the first state read after a restart also restores the
        action-state store from the marker saved with it."""
        if self._recovered:
            kept = self._pending_states.get(key)
            if kept is not None:
                return kept
        text = state.value()
        saved = _read_saved(text) if text else SavedKey()
        if not self._recovered:
            self._recover(saved.marker, saved.parallelism)
        self._note_deadline(key, saved.runs)
        return saved.runs

    def _save(self, key: str, state: SavedState, runs: KeyState) -> None:
        # No marker before the store is restored: it would not cover the runs still to replay.
        if self._store is not None and self._recovered and self._clock.due():
            self._take_marker()
        if _holds_anything(runs):
            saved = SavedKey(runs=runs, marker=self._marker, parallelism=self._parallelism)
            state.update(_saved_text(saved))
        self._note_deadline(key, runs)
        # Kept only while a run of the key can go on: as many keys as the window of unfinished
        # inputs (a paused key's state is read back when its decision or timeout comes).
        if runs.runs_on(alongside=self._plan.while_paused == "alongside"):
            self._pending_states[key] = runs
        else:
            self._pending_states.pop(key, None)

    def _note_deadline(self, key: str, runs: KeyState) -> None:
        """Keep the key's earliest wait deadline or follow-up, and the earliest expiry of its
        short-term memory, so a timer visit knows without reading the key's state whether one
        may be due."""
        deadline = runs.next_wake()
        if deadline is None:
            self._deadlines.pop(key, None)
        else:
            self._deadlines[key] = deadline
        if runs.short_term_expiry:
            self._expiries[key] = math.ceil(min(runs.short_term_expiry.values()))
        else:
            self._expiries.pop(key, None)

    def _recover(
        self, marker_json: str | None, saved_parallelism: int | None = None, *, wait: bool = True
    ) -> None:
        """Restore the store from the first marker seen after a restart.

        A key without a marker (new since the checkpoint) does not start a restore of the whole
        topic at once: for up to ``marker_wait_ms`` the logic waits for a key that carries one
        (restored keys with runs in flight are visited first thing by their timers), and keeps
        the new keys' inputs in state meanwhile.

        A marker covers the open runs of the subtask that took it. After a rescale from a
        parallelism above 1 to another, this subtask's keys may come from several old subtasks,
        whose other markers it cannot see: the store then reads from the start -- under a
        key-group placement only the partitions of this subtask's key groups, else every one.
        """
        host, store = self._require_host(), self._store
        assert store is not None
        if marker_json is not None and _merges_subtasks(saved_parallelism, self._parallelism):
            logger.warning(
                "rescaled from parallelism %s to %d: keys of several old subtasks may meet here, "
                "so the action-state store reads its partitions from the start",
                saved_parallelism,
                self._parallelism,
            )
            marker = from_start(RecoveryMarker.from_json(marker_json))
        elif marker_json is not None:
            marker = RecoveryMarker.from_json(marker_json)
        elif not self._restarted:
            self._recovered = True  # a fresh start: nothing to recover
            return
        elif wait and self._still_waiting_for_marker():
            return
        else:
            logger.warning(
                "no key with a recovery marker seen since the restart: reading the "
                "action-state topic's partitions from the start"
            )
            # Nor does it say how the topic's records were placed: read them all, either way.
            marker = from_start(host.call(store.recovery_marker)).model_copy(
                update={"placement": ANY_PLACEMENT.name}
            )
        self._recovered = True
        report = host.call(store.restore, marker, self._key_groups, timeout=None)
        logger.info(
            "action-state store restored: %d records, %d skipped, %d corrupt",
            report.loaded,
            report.skipped,
            len(report.corrupt),
        )

    def _still_waiting_for_marker(self) -> bool:
        now = time.monotonic()
        if self._marker_deadline is None:
            self._marker_deadline = now + self._options.marker_wait_ms / 1000
        return now < self._marker_deadline

    def _take_marker(self) -> None:
        host, store = self._require_host(), self._store
        assert store is not None
        marker = host.call(store.recovery_marker)
        if faults.ARMED is not None:
            faults.ARMED.reached(KillPoint.DURING_SNAPSHOT)
        kept = compact(marker)
        self._marker = kept.to_json()
        # The clock keeps its markers for the prune delay (a minute): compact, they hold no
        # open runs (with 1,000 runs in flight, ~2,000 objects each for the collector to scan).
        ripe = self._clock.taken(kept)
        if ripe is not None:
            host.call(store.prune, ripe)

    def _require_host(self) -> EngineHost:
        if self._host is None:
            raise RuntimeError("KeyedAgentLogic used before open()")
        return self._host


def _holds_anything(runs: KeyState) -> bool:
    """Whether a key state differs from a new key's (no inputs, no memory, seq 0, no spend, no
    waits, no follow-ups)."""
    return bool(
        runs.pending
        or runs.next_seq
        or runs.short_term_memory
        or runs.long_term_memory
        or runs.spend
        or runs.waits
        or runs.scheduled
    )


def _merges_subtasks(saved: int | None, now: int) -> bool:
    """Whether a subtask at parallelism ``now`` may hold keys of several subtasks that saved
    their state at parallelism ``saved`` (unknown for states saved before it was recorded)."""
    return saved is not None and saved > 1 and saved != now


_OPEN: dict[str, KeyedAgentLogic] = {}
"""The open logic per (agent, subtask) in this interpreter."""


def _close_previous_attempt(identity: str) -> None:
    """Close the earlier attempt of ``identity`` still open here, or wait for its close under
    way (its watchdog's, when its task ended without close()): until that returns, its engine
    may still finish calls and write their outcomes, which this attempt's restore must read, or
    it would send those calls again (a broker restart's soak diagnostic, docs/reliability.md)."""
    previous = _OPEN.pop(identity, None)
    if previous is not None:
        logger.warning("closing %s left open by an earlier attempt", identity)
        try:
            previous.close()
        except Exception:  # the old attempt is gone either way; ours must start
            logger.exception("closing the previous attempt of %s failed", identity)
