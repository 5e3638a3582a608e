"""EngineHost: a synchronous caller drives the engine running on its own loop thread."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.freeze_fence import TaskEndedError
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import OperatorOptions, RunEngine, Runtime, RuntimeSettings
from flink_agents.runtime.host import EngineHost
from flink_agents.runtime.state import KeyState, PendingInput
from tests.sample_agents import EchoAgent, fail_on_negative

K = '"k"'
"""A key as the host names it: its canonical JSON text (the key "k")."""


def _engines(plan: AgentPlan, max_in_flight: int = 128) -> Callable[..., RunEngine]:
    """The host's engine factory: :meth:`Runtime.build`'s engine, for the host's callbacks."""
    settings = RuntimeSettings(operator=OperatorOptions(max_in_flight=max_in_flight))

    def build(**callbacks: Any) -> RunEngine:
        return Runtime.build(plan, settings, **callbacks).engine

    return build


def _host(max_in_flight: int = 4, max_unfinished: int = 8) -> EngineHost:
    plan = compile_agent(EchoAgent())
    return EngineHost(_engines(plan, max_in_flight), max_unfinished=max_unfinished)


def test_runs_finish_in_order_per_key_with_committed_memory() -> None:
    host = _host()
    try:
        host.restore(K, KeyState())
        for seq in range(3):
            host.submit(K, {"n": seq}, seq)
        done = host.wait_idle(K, timeout=10)
        assert [run.result.run_id.seq for run in done] == [0, 1, 2]
        assert [run.result.output_values for run in done] == [
            [{"doubled": 0, "count": 1}],
            [{"doubled": 2, "count": 2}],
            [{"doubled": 4, "count": 3}],
        ]
        # Each completed run carries the memory as committed by that run.
        assert [run.short_term_memory for run in done] == [
            {"count": 1},
            {"count": 2},
            {"count": 3},
        ]
        assert host.unfinished == 0
    finally:
        host.close()


def test_restore_reruns_pending_inputs_with_their_seq() -> None:
    host = _host()
    try:
        state = KeyState(
            next_seq=7,
            pending=[PendingInput(seq=5, input={"n": 1}), PendingInput(seq=6, input={"n": 2})],
            short_term_memory={"count": 10},
        )
        host.restore(K, state)
        host.submit(K, {"n": 3}, 7)
        done = host.wait_idle(K, timeout=10)
        assert [run.result.run_id.seq for run in done] == [5, 6, 7]
        assert done[-1].short_term_memory == {"count": 13}
    finally:
        host.close()


def test_the_engine_runs_an_input_under_the_seq_the_caller_hands_it() -> None:
    # The caller's key state numbers the inputs; the engine does not count on its own.
    host = _host()
    try:
        host.restore(K, KeyState(next_seq=3))
        host.submit(K, {"n": 1}, 0)
        host.submit(K, {"n": 2}, 9)
        done = host.wait_idle(K, timeout=10)
        assert [run.result.run_id.seq for run in done] == [0, 9]
    finally:
        host.close()


def test_a_failed_run_hands_back_the_memory_committed_before_it() -> None:
    agent = EchoAgent(name="guard", error_policy="emit")
    agent.add_action(fail_on_negative, name="check")
    host = EngineHost(_engines(compile_agent(agent)), max_unfinished=4)
    try:
        host.restore(K, KeyState(short_term_memory={"count": 4}))
        host.submit(K, {"n": 1}, 0)
        host.submit(K, {"n": -1}, 1)
        done = host.wait_idle(K, timeout=10)
        assert [run.result.error is None for run in done] == [True, False]
        committed = {"count": 5, "last": 1}
        assert [run.short_term_memory for run in done] == [committed, committed]
    finally:
        host.close()


GATE = threading.Event()


class GatedAgent(Agent):
    """Each run waits for GATE, so the test decides when runs finish."""

    @action(InputEvent)
    async def wait_for_gate(event: InputEvent, ctx: RunnerContext) -> None:
        await asyncio.to_thread(GATE.wait, 30)
        ctx.send_event(OutputEvent(output=event.input))


def test_submit_blocks_while_the_unfinished_window_is_full() -> None:
    GATE.clear()
    plan = compile_agent(GatedAgent())
    host = EngineHost(_engines(plan, max_in_flight=4), max_unfinished=2)
    try:
        for key in ('"a"', '"b"', '"c"'):
            host.restore(key, KeyState())
        host.submit('"a"', 1, 0)
        host.submit('"b"', 2, 0)
        third = threading.Thread(target=host.submit, args=('"c"', 3, 0))
        third.start()
        third.join(timeout=0.5)
        assert third.is_alive(), "the third submit should wait for a free place in the window"
        assert host.unfinished == 2

        GATE.set()
        third.join(timeout=10)
        assert not third.is_alive()
        outputs = [
            value
            for key in ('"a"', '"b"', '"c"')
            for run in host.wait_idle(key, timeout=10)
            for value in run.result.output_values
        ]
        assert sorted(outputs) == [1, 2, 3]
    finally:
        GATE.set()
        host.close()


def test_restore_takes_the_state_as_it_was_when_called() -> None:
    # The operator restores a key, then appends the new input to the same state object.
    host = _host()
    try:
        state = KeyState()
        host.restore(K, state)
        state.pending.append(PendingInput(seq=0, input={"n": 5}))
        state.next_seq = 1
        host.submit(K, {"n": 5}, 0)
        done = host.wait_idle(K, timeout=10)
        assert [run.result.run_id.seq for run in done] == [0]
    finally:
        host.close()


def test_closing_ends_the_threads_of_the_loops_executor_without_waiting_for_the_collector() -> None:
    # In thread mode one interpreter outlives many attempts of the job, each with a host: an
    # executor thread left for the collector to end piled up, one set per restart (the soak).
    host = _host()
    started = threading.Event()

    def in_a_worker() -> None:
        started.set()

    def start_worker() -> None:
        asyncio.get_running_loop().run_in_executor(None, in_a_worker)

    host.call(start_worker)
    assert started.wait(10)
    workers = [t for t in threading.enumerate() if t.name.startswith("asyncio_")]
    assert workers  # the loop's default executor keeps its thread, idle, for the next job
    host.close()  # the host, and with it its loop, still referenced here: no collector ran
    for worker in workers:
        worker.join(timeout=10)
    assert [t.name for t in workers if t.is_alive()] == []


def test_keys_idle_for_idle_key_s_are_forgotten_and_a_key_with_anything_left_is_not() -> None:
    now = [0.0]
    plan = compile_agent(EchoAgent())
    host = EngineHost(_engines(plan), max_unfinished=8, clock=lambda: now[0], idle_key_s=10)
    held = lambda: sorted(host.call(host.engine.keys))  # noqa: E731 -- read on the loop thread
    try:
        host.submit(K, {"n": 1}, 0)
        assert [run.result.run_id.seq for run in host.wait_idle(K, timeout=10)] == [0]
        host.submit('"b"', {"n": 2}, 0)
        until = time.monotonic() + 10
        while host.unfinished and time.monotonic() < until:
            time.sleep(0.01)
        assert host.unfinished == 0  # "b"'s run finished, not taken: a visit has to take it
        now[0] = 10.0
        host.forget_idle()
        assert (host.knows(K), host.knows('"b"'), held()) == (False, True, ["b"])
        host.visit('"b"')
        now[0] = 14.0  # within idle_key_s / 2 of the last look: nothing is looked at
        host.forget_idle()
        assert host.knows('"b"')
        now[0] = 25.0
        host.forget_idle()
        assert (host.knows('"b"'), held()) == (False, [])
    finally:
        host.close()


def test_a_forgotten_key_handed_back_its_state_runs_on_from_it() -> None:
    now = [0.0]
    plan = compile_agent(EchoAgent())
    host = EngineHost(_engines(plan), max_unfinished=8, clock=lambda: now[0], idle_key_s=0)
    try:
        host.submit(K, {"n": 1}, 0)
        [first] = host.wait_idle(K, timeout=10)
        host.forget_idle()
        assert not host.knows(K)
        host.restore(K, KeyState(next_seq=1, short_term_memory=first.short_term_memory))
        host.submit(K, {"n": 2}, 1)
        [second] = host.wait_idle(K, timeout=10)
        assert second.result.output_values == [{"doubled": 4, "count": 2}]
    finally:
        host.close()


def test_a_task_ended_error_left_in_a_callback_or_task_is_not_logged_anything_else_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # After a restart in thread mode, the ended attempt's engine stops at its fence: callbacks
    # and unawaited tasks end with TaskEndedError, which asyncio logged with a trace each time.
    host = _host()
    unawaited: list[asyncio.Task[None]] = []

    def schedule() -> None:
        loop = asyncio.get_running_loop()

        def ended() -> None:
            raise TaskEndedError

        def broken() -> None:
            raise ValueError("a real bug")

        async def delegation() -> None:
            raise TaskEndedError

        loop.call_soon(ended)
        loop.call_soon(broken)
        unawaited.append(loop.create_task(delegation()))

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        host.call(schedule)
        host.call(lambda: None)  # the callbacks ran
        host.close()
        unawaited.clear()  # nobody awaited it: "never retrieved", once collected
        gc.collect()
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert "a real bug" in logged
    assert "TaskEndedError" not in logged
