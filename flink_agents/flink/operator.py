"""The keyed operator: a PyFlink KeyedProcessFunction that runs the engine for every key.

Mechanism (measured in ``bench/results/operator-mechanism.md``, written down in
``docs/flink-runtime.md``):

* The engine runs on its own asyncio thread (:class:`~flink_agents.runtime.host.EngineHost`);
  ``process_element`` only records the input in keyed state and hands it over, so a slow model
  call never blocks the operator thread, and a checkpoint never waits for one.
* Keyed state holds the key's :class:`~flink_agents.runtime.state.KeyState`: the ``seq``
  counter, the inputs not yet finished (the running one first) and the committed short-term
  memory. An input is in state from the moment it arrives until its outputs are emitted.
* A processing-time timer per key with a run in flight brings the operator back to that key to
  emit finished runs and commit the key's state (state may only be touched under its own key).
  Timers are checkpointed: after a restore they fire, find the engine without that key, and hand
  it the key's pending inputs, which run again with the same ``seq`` -- the action-state store
  then hands back every call that had completed.
* An event-time timer at the end of time fires when a bounded input ends (the final watermark):
  it waits for the key's remaining runs, so a bounded job does not finish with runs in flight.
* Back-pressure: ``process_element`` blocks while ``max_unfinished`` inputs are accepted but
  not finished. Waiting is on a condition variable, never a busy loop.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from pydantic import BaseModel, Field
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, TimeDomain
from pyflink.datastream.state import ValueStateDescriptor

from flink_agents.durable.runner import StoreCallRunner
from flink_agents.durable.store.base import ActionStateStore, RecoveryMarker
from flink_agents.durable.store.config import StoreConfig
from flink_agents.flink.options import OperatorOptions
from flink_agents.flink.records import BadRecord, bad_input_record, decode_input, outputs_of
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.engine import RunEngine
from flink_agents.runtime.host import CompletedRun, EngineHost
from flink_agents.runtime.recovery import MarkerClock, compact, from_start
from flink_agents.runtime.state import KeyState, PendingInput

logger = logging.getLogger(__name__)

END_OF_INPUT = (1 << 63) - 2
"""Event-time timer that only the final watermark of a bounded input reaches."""


class SavedKey(BaseModel):
    """What keyed state holds for one key: the engine's key state and a recovery marker."""

    runs: KeyState = Field(default_factory=KeyState)
    marker: str | None = Field(
        default=None, description="Compact RecoveryMarker JSON taken before this state was saved."
    )


class AgentFunction(KeyedProcessFunction):
    """Runs one agent plan per key; emits each output as a JSON string.

    With a ``store``, every durable call goes through the action-state store, so a run replayed
    after a restore gets back what had completed instead of calling again.
    """

    def __init__(
        self,
        plan_json: str,
        options: OperatorOptions | None = None,
        store: StoreConfig | None = None,
    ) -> None:
        self._plan_json = plan_json
        self._options = options or OperatorOptions()
        self._store_config = store
        self._host: EngineHost | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self, runtime_context: RuntimeContext) -> None:
        # Before any client exists: records below this level are then dropped at the call site.
        logging.getLogger().setLevel(self._options.python_log_level)
        plan = AgentPlan.from_json(self._plan_json, source="operator plan")
        self._agent = plan.name
        self._store: ActionStateStore | None = None
        call_runner = None
        if self._store_config is not None:
            self._store = self._store_config.build()
            call_runner = StoreCallRunner.for_plan(
                self._store,
                plan.name,
                plan.config,
                default_policy=self._store_config.mismatch_policy,
            )
        factory = partial(
            RunEngine, plan, max_in_flight=self._options.max_in_flight, call_runner=call_runner
        )
        # Thread mode skips close() on a failed attempt, and the interpreter lives on: stop the
        # previous attempt's engine first, or its runs would go on calling models beside ours.
        identity = f"{plan.name}/{_subtask_index(runtime_context)}"
        _stop_previous_attempt(identity)
        self._host = EngineHost(factory, max_unfinished=self._options.unfinished_bound)
        _LIVE[identity] = self
        # Missing credentials and unusable resources fail here, at job start.
        self._host.engine.open_resources()
        # Everything loaded so far (plan, modules, clients) lives as long as the job: keep it
        # out of the collector's scans, which otherwise cost ~10 % of a run's CPU.
        gc.freeze()
        self._state = runtime_context.get_state(
            ValueStateDescriptor("flink_agents.key_state", Types.STRING())
        )
        # Flink does not tell Python functions whether state was restored; a retry is an attempt
        # after the first, a start from a savepoint is declared in the options.
        self._restarted = (
            _attempt_number(runtime_context) > 0 or self._options.started_from_savepoint
        )
        self._recovered = self._store is None
        self._marker: str | None = None
        self._marker_deadline: float | None = None  # set by the first key without a marker
        self._clock = MarkerClock(
            every_s=self._options.marker_interval_ms / 1000,
            prune_after_s=self._options.prune_after_ms / 1000,
        )

    def close(self) -> None:
        for identity, live in list(_LIVE.items()):
            if live is self:
                del _LIVE[identity]
        if self._host is not None:
            self._host.close()
            self._host = None
        if self._store is not None:
            self._store.close()
            self._store = None

    # --- records and timers ----------------------------------------------------------------------

    def process_element(self, value: str, ctx: KeyedProcessFunction.Context) -> Iterator[str]:
        flink_key = ctx.get_current_key()
        try:
            record = decode_input(value)
            if flink_key == "null":
                raise BadRecord(f"input record has no usable key: {value[:120]!r}")
        except BadRecord as exc:
            yield bad_input_record(self._agent, None, str(exc)).to_json()
            return
        key = json.loads(flink_key)
        host = self._require_host()
        state = self._load()
        if self._recovered and not host.knows(key):
            host.restore(key, state)
        seq = state.next_seq
        state.pending.append(PendingInput(seq=seq, input=record))
        state.next_seq = seq + 1
        self._save(state)
        if self._recovered:
            host.submit(key, record, seq)
        # Else the input waits in state for the store's restore; its timer comes back for it.
        self._arm(ctx)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[str]:
        if self._host is None:
            # A poll timer outliving the end of a bounded input (the end-of-input timer already
            # finished the key's runs) fires after close(): nothing is left to do.
            return
        key = json.loads(ctx.get_current_key())
        host = self._host
        polling = ctx.time_domain() == TimeDomain.PROCESSING_TIME
        if not host.knows(key):
            # First visit after a restore: the engine starts the key's unfinished inputs again.
            state = self._load()
            if not self._recovered:
                if polling:  # still waiting for a key that carries a marker
                    self._arm(ctx, after=timestamp, repeat=True)
                    return
                self._recover(None, wait=False)  # the input has ended: nothing more will come
            if not state.pending:
                return
            host.restore(key, state)
        # Most visits find the run still going: they touch neither state nor JSON.
        completed = host.take(key) if polling else host.wait_idle(key)
        if completed:
            state = self._load()
            yield from self._commit(state, completed)
            self._save(state)
        if polling and host.pending(key):
            self._arm(ctx, after=timestamp, repeat=True)

    # --- helpers ---------------------------------------------------------------------------------

    def _commit(self, state: KeyState, completed: list[CompletedRun]) -> Iterator[str]:
        for run in completed:
            seq = run.result.run_id.seq
            state.pending = [p for p in state.pending if p.seq != seq]
            state.short_term_memory = run.short_term_memory
            for record in outputs_of(run.result):
                yield record.to_json()

    def _arm(self, ctx: Any, after: int | None = None, repeat: bool = False) -> None:
        """Come back to this key when its run is likely done.

        The first visit waits for the host's moving average of run durations (capped), later
        ones a quarter of it (at least ``poll_interval_ms``, at most ``max_poll_ms``), so a key
        costs a few timers per run, not one per poll interval. Timers sit on a grid of
        ``poll_interval_ms``: Flink keeps one timer per key and timestamp, so arming again (a
        new input while a timer is pending) never starts a second chain for the key.
        """
        timers = ctx.timer_service()
        interval = self._options.poll_interval_ms
        expected_ms = int(self._require_host().expected_run_seconds * 1000)
        if repeat:
            delay = min(max(expected_ms // 4, interval), self._options.max_poll_ms)
        else:
            delay = min(expected_ms, self._options.max_first_poll_ms)
        now = max(timers.current_processing_time(), after or 0)
        timers.register_processing_time_timer(((now + delay) // interval + 1) * interval)
        if not repeat:  # a key's end-of-input timer is set with its input (and checkpointed)
            timers.register_event_time_timer(END_OF_INPUT)

    def _load(self) -> KeyState:
        """The current key's state; the first state read after a restore also restores the
        action-state store from the marker saved with it."""
        text = self._state.value()
        saved = SavedKey.model_validate_json(text) if text else SavedKey()
        if not self._recovered:
            self._recover(saved.marker)
        return saved.runs

    def _save(self, state: KeyState) -> None:
        # No marker before the store is restored: it would not cover the runs still to replay.
        if self._store is not None and self._recovered and self._clock.due():
            self._take_marker()
        if state.pending or state.next_seq or state.short_term_memory:
            self._state.update(SavedKey(runs=state, marker=self._marker).model_dump_json())

    def _recover(self, marker_json: str | None, *, wait: bool = True) -> None:
        """Restore the store from the first marker seen after a restart.

        A key without a marker (new since the checkpoint) does not start a restore of the whole
        topic at once: for up to ``marker_wait_ms`` the operator waits for a key that carries
        one (restored keys with runs in flight are visited first thing by their timers), and
        keeps the new keys' inputs in state meanwhile.
        """
        host, store = self._require_host(), self._store
        assert store is not None
        if marker_json is not None:
            marker = RecoveryMarker.from_json(marker_json)
        elif not self._restarted:
            self._recovered = True  # a fresh start: nothing to recover
            return
        elif wait and self._still_waiting_for_marker():
            return
        else:
            logger.warning(
                "no key with a recovery marker seen since the restart: reading the whole "
                "action-state topic"
            )
            marker = from_start(host.call(store.recovery_marker))
        self._recovered = True
        report = host.call(store.restore, marker, timeout=None)
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
        self._marker = compact(marker).to_json()
        ripe = self._clock.taken(marker)
        if ripe is not None:
            host.call(store.prune, ripe)

    def _require_host(self) -> EngineHost:
        if self._host is None:
            raise RuntimeError("AgentFunction used before open()")
        return self._host


_LIVE: dict[str, AgentFunction] = {}
"""The open operator instance per (agent, subtask) in this interpreter."""


def _stop_previous_attempt(identity: str) -> None:
    previous = _LIVE.pop(identity, None)
    if previous is not None:
        logger.warning("closing %s left open by a failed attempt", identity)
        try:
            previous.close()
        except Exception:  # the old attempt is gone either way; ours must start
            logger.exception("closing the previous attempt of %s failed", identity)


def _subtask_index(runtime_context: RuntimeContext) -> int:
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:
        return runtime_context._runtime_context.getTaskInfo().getIndexOfThisSubtask()


def _attempt_number(runtime_context: RuntimeContext) -> int:
    """The task's attempt number (0 on a fresh start), in process and thread mode alike."""
    try:
        return runtime_context.get_attempt_number()
    except AttributeError:
        # Thread mode: the embedded context calls a Java method removed in Flink 2.0.
        return runtime_context._runtime_context.getTaskInfo().getAttemptNumber()
