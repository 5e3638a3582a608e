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

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, TimeDomain
from pyflink.datastream.state import ValueStateDescriptor

from flink_agents.flink.options import OperatorOptions
from flink_agents.flink.records import BadRecord, bad_input_record, decode_input, outputs_of
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.durable import CallRunner
from flink_agents.runtime.engine import RunEngine
from flink_agents.runtime.host import CompletedRun, EngineHost
from flink_agents.runtime.state import KeyState, PendingInput

END_OF_INPUT = (1 << 63) - 2
"""Event-time timer that only the final watermark of a bounded input reaches."""

CallRunnerFactory = Callable[[AgentPlan], CallRunner]


class AgentFunction(KeyedProcessFunction):
    """Runs one agent plan per key; emits each output as a JSON string."""

    def __init__(
        self,
        plan_json: str,
        options: OperatorOptions | None = None,
        call_runner_factory: CallRunnerFactory | None = None,
    ) -> None:
        self._plan_json = plan_json
        self._options = options or OperatorOptions()
        self._call_runner_factory = call_runner_factory
        self._host: EngineHost | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self, runtime_context: RuntimeContext) -> None:
        plan = AgentPlan.from_json(self._plan_json, source="operator plan")
        self._agent = plan.name
        call_runner = self._call_runner_factory(plan) if self._call_runner_factory else None
        factory = partial(
            RunEngine, plan, max_in_flight=self._options.max_in_flight, call_runner=call_runner
        )
        self._host = EngineHost(factory, max_unfinished=self._options.unfinished_bound)
        # Missing credentials and unusable resources fail here, at job start.
        self._host.engine.open_resources()
        self._state = runtime_context.get_state(
            ValueStateDescriptor("flink_agents.key_state", Types.STRING())
        )

    def close(self) -> None:
        if self._host is not None:
            self._host.close()
            self._host = None

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
        if not host.knows(key):
            host.restore(key, state)
        seq = state.next_seq
        state.pending.append(PendingInput(seq=seq, input=record))
        state.next_seq = seq + 1
        self._save(state)
        host.submit(key, record, seq)
        self._arm(ctx)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[str]:
        if self._host is None:
            # A poll timer outliving the end of a bounded input (the end-of-input timer already
            # finished the key's runs) fires after close(): nothing is left to do.
            return
        key = json.loads(ctx.get_current_key())
        host = self._host
        state = self._load()
        if not host.knows(key):
            # First visit after a restore: the engine starts the key's unfinished inputs again.
            if not state.pending:
                return
            host.restore(key, state)
        if ctx.time_domain() == TimeDomain.EVENT_TIME:
            completed = host.wait_idle(key)
        else:
            completed = host.take(key)
        if completed:
            yield from self._commit(state, completed)
            self._save(state)
        if state.pending and ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            self._arm(ctx, after=max(timestamp, ctx.timer_service().current_processing_time()))

    # --- helpers ---------------------------------------------------------------------------------

    def _commit(self, state: KeyState, completed: list[CompletedRun]) -> Iterator[str]:
        for run in completed:
            seq = run.result.run_id.seq
            state.pending = [p for p in state.pending if p.seq != seq]
            state.short_term_memory = run.short_term_memory
            for record in outputs_of(run.result):
                yield record.to_json()

    def _arm(self, ctx: Any, after: int | None = None) -> None:
        """Come back to this key when its run is likely done, then every poll interval.

        The first visit waits for the host's moving average of run durations (capped), so a
        key costs about one timer per run rather than one per poll interval. Timers sit on a
        grid of poll_interval_ms: Flink keeps one timer per key and timestamp, so arming again
        (a new input while a timer is pending) never starts a second chain for the key.
        """
        timers = ctx.timer_service()
        interval = self._options.poll_interval_ms
        if after is None:
            now = timers.current_processing_time()
            expected_ms = int(self._require_host().expected_run_seconds * 1000)
            now += min(expected_ms, self._options.max_first_poll_ms)
        else:
            now = after
        timers.register_processing_time_timer((now // interval + 1) * interval)
        timers.register_event_time_timer(END_OF_INPUT)

    def _load(self) -> KeyState:
        text = self._state.value()
        return KeyState.model_validate_json(text) if text else KeyState()

    def _save(self, state: KeyState) -> None:
        if state.pending or state.next_seq or state.short_term_memory:
            self._state.update(state.model_dump_json())

    def _require_host(self) -> EngineHost:
        if self._host is None:
            raise RuntimeError("AgentFunction used before open()")
        return self._host
