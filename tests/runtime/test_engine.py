import asyncio
import logging
from typing import Any, ClassVar

import pytest

from flink_agents.api import (
    Agent,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.tools import FunctionTool
from flink_agents.durable import DurableCall, DurableCalls, RunId, event_id
from flink_agents.observability import EventDropped, EventSent, LogRecord
from flink_agents.plan import compile_agent
from flink_agents.runtime import (
    ActionError,
    DuplicateCallIdError,
    KeyState,
    PendingInput,
    RunEngine,
    run_local,
)
from tests import sample_agents
from tests.sample_agents import EchoAgent, Unheard, fail_on_negative, unheard_agent


def _echo_engine(**kwargs: Any) -> RunEngine:
    return RunEngine(compile_agent(EchoAgent(name="echo")), **kwargs)


def test_runs_per_key_are_sequential_and_fifo_with_per_key_seq_and_memory():
    inputs = [{"k": "a", "n": 1}, {"k": "b", "n": 10}, {"k": "a", "n": 2}, {"k": "a", "n": 3}]
    results = run_local(EchoAgent(name="echo"), inputs, key="k")
    assert [(r.key, r.run_id.seq) for r in results] == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]
    assert [r.output_values for r in results] == [
        [{"doubled": 2, "count": 1}],
        [{"doubled": 20, "count": 1}],
        [{"doubled": 4, "count": 2}],
        [{"doubled": 6, "count": 3}],
    ]


def test_event_ids_are_deterministic_and_carry_lineage():
    inputs = [{"k": "a|b_c", "n": 1}]
    first = run_local(EchoAgent(name="echo"), inputs, key="k")[0].outputs[0]
    second = run_local(EchoAgent(name="echo"), inputs, key="k")[0].outputs[0]
    assert first.id == second.id
    assert first.upstream_action == "emit"
    run = RunId("echo", "a|b_c", 0)
    doubled_id = event_id(run, event_id(run, None, None, 0), "double", 0)
    assert first.upstream_id == doubled_id
    assert first.id == event_id(run, doubled_id, "emit", 0)
    # another seq, key or agent gives other ids
    assert event_id(RunId("echo", "a|b_c", 1), None, None, 0) != event_id(run, None, None, 0)
    assert event_id(RunId("echo", ["a", "b_c"], 0), None, None, 0) != event_id(run, None, None, 0)


@pytest.mark.parametrize("policy", ["fail", "emit"])
def test_action_error_follows_the_agents_policy(policy):
    agent = EchoAgent(name="guard", error_policy=policy)
    agent.add_action(fail_on_negative, name="check")
    inputs = [{"k": "a", "n": 1}, {"k": "a", "n": -5}, {"k": "a", "n": 2}]
    if policy == "fail":
        with pytest.raises(ActionError) as info:
            run_local(agent, inputs, key="k")
        failure = info.value.failure
        assert (failure.action, failure.event_type, failure.error_type) == (
            "check",
            "InputEvent",
            "ValueError",
        )
        assert "negative input -5" in str(info.value)
        assert info.value.run_id == RunId("guard", "a", 1)
        return
    results = run_local(agent, inputs, key="k")
    assert [r.error is None for r in results] == [True, False, True]
    error_output = results[1].outputs[-1]
    assert error_output.error.action == "check"
    assert error_output.error.event_id == results[1].outputs[-1].upstream_id
    assert "negative input -5" in error_output.error.describe()
    # the failed run's memory writes are dropped: the third run still counts 2
    assert results[2].output_values == [2, {"doubled": 4, "count": 2}]


def test_snapshot_and_restore_of_a_key_rerun_pending_inputs_with_the_same_seq():
    async def scenario() -> tuple[KeyState, list]:
        engine = _echo_engine()
        engine.submit("a", {"n": 1})
        await engine.drain()
        engine.submit("a", {"n": 2})
        engine.submit("a", {"n": 3})
        state = engine.snapshot_key("a")  # taken before the queued runs start
        await engine.close()

        restored = _echo_engine()
        restored.restore_key("a", KeyState.model_validate_json(state.model_dump_json()))
        await restored.drain()
        return state, restored.take_results()

    state, results = asyncio.run(scenario())
    assert state.next_seq == 3
    assert [p.seq for p in state.pending] == [1, 2]
    assert state.short_term_memory == {"count": 1}
    assert [(r.run_id.seq, r.output_values) for r in results] == [
        (1, [{"doubled": 4, "count": 2}]),
        (2, [{"doubled": 6, "count": 3}]),
    ]


def test_keys_waiting_for_the_window_start_in_the_order_they_became_ready_each_once():
    async def scenario() -> list:
        engine = _echo_engine(max_in_flight=1)
        for key in "abc":
            engine.submit(key, {"n": 1})
        engine.submit("a", {"n": 2})  # "a" waits already: it does not wait twice
        # A key restored while it waits goes to the back, once.
        engine.restore_key("b", KeyState(pending=[PendingInput(seq=0, input={"n": 5})]))
        await engine.drain()
        return engine.take_results()

    results = asyncio.run(scenario())
    assert [(r.key, r.run_id.seq) for r in results] == [("a", 0), ("c", 0), ("b", 0), ("a", 1)]
    assert results[2].output_values == [{"doubled": 10, "count": 1}]


def test_an_input_handed_a_seq_runs_under_it_and_the_key_counts_on_from_there():
    async def scenario() -> tuple[list, KeyState]:
        engine = _echo_engine()
        handed = engine.submit("a", {"n": 1}, seq=5)
        counted = engine.submit("a", {"n": 2})
        assert (handed.seq, counted.seq) == (5, 6)
        await engine.drain()
        return engine.take_results(), engine.snapshot_key("a")

    results, state = asyncio.run(scenario())
    assert [r.run_id.seq for r in results] == [5, 6]
    assert state.next_seq == 7


def test_snapshot_during_a_run_keeps_it_pending_and_memory_uncommitted():
    agent = Agent(name="gated")
    agent.add_action(sample_agents.gated)

    async def scenario() -> tuple[KeyState, KeyState]:
        sample_agents.GATE = asyncio.Event()
        engine = RunEngine(compile_agent(agent))
        engine.submit("a", {"n": 1})
        assert await engine.wait_for_results(timeout=0.01) == []  # the run waits at the gate
        during = engine.snapshot_key("a")
        sample_agents.GATE.set()
        await engine.drain()
        return during, engine.snapshot_key("a")

    during, after = asyncio.run(scenario())
    assert [p.seq for p in during.pending] == [0]
    assert during.short_term_memory == {}
    assert after.pending == []
    assert after.short_term_memory == {"seen": {"n": 1}}


class RecordingRunner(DurableCalls):
    """Durable calls without a store that also keep the calls they see."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[DurableCall] = []
        self.finished: list[RunId] = []

    async def run_async(self, call: DurableCall) -> Any:
        self.calls.append(call)
        return await super().run_async(call)

    def run(self, call: DurableCall) -> Any:
        self.calls.append(call)
        return super().run(call)

    def run_finished(self, run: RunId) -> None:
        self.finished.append(run)


@action(InputEvent)
async def two_calls(event: InputEvent, ctx: RunnerContext) -> None:
    first = ctx.durable_execute(lambda x: x + 1, event.input["n"])
    second = await ctx.durable_execute_async(asyncio.sleep, 0, first * 10, call_id="nap")
    ctx.send_event(OutputEvent(output=[first, second]))


@action(InputEvent)
async def clashing_calls(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.durable_execute(len, "a", call_id="same")
    ctx.durable_execute(len, "b", call_id="same")


def test_durable_calls_go_through_the_engines_call_runner_with_stable_ids():
    agent = Agent(name="calls")
    agent.add_action(two_calls)
    runner = RecordingRunner()
    results = run_local(agent, [{"k": "x", "n": 1}], key="k", call_runner=runner)
    assert results[0].output_values == [[2, 20]]
    identities = [call.identity for call in runner.calls]
    assert [i.call_id for i in identities] == ["#0", "nap"]
    assert {i.action for i in identities} == {"two_calls"}
    assert identities[0].event_id == event_id(RunId("calls", "x", 0), None, None, 0)
    assert runner.finished == [RunId("calls", "x", 0)]

    again = RecordingRunner()
    run_local(agent, [{"k": "x", "n": 1}], key="k", call_runner=again)
    assert [c.identity.digest() for c in again.calls] == [i.digest() for i in identities]


def test_duplicate_call_ids_in_one_invocation_are_refused():
    agent = Agent(name="dup", error_policy="emit")
    agent.add_action(clashing_calls)
    [result] = run_local(agent, [{"k": 1}], key="k")
    assert result.error.error_type == DuplicateCallIdError.__name__
    assert "'same'" in result.error.message


def test_wait_for_results_collects_finished_runs_without_a_callback():
    async def scenario() -> list:
        engine = _echo_engine(max_in_flight=1)
        for n in range(3):
            engine.submit(n, {"n": n})
        collected = []
        while len(collected) < 3:
            collected += await engine.wait_for_results(timeout=1)
        return collected

    assert [r.key for r in asyncio.run(scenario())] == [0, 1, 2]


def test_results_handed_to_the_on_result_callback_are_not_kept_as_well():
    """A Flink task's host takes results only through the callback: an engine keeping them too
    held every run of its attempt (21 Python blocks a run, in the mixed soak's heap growth)."""
    seen = []

    async def scenario() -> list:
        engine = _echo_engine(on_result=seen.append, max_in_flight=1)
        for n in range(3):
            engine.submit(n, {"n": n})
        await engine.drain()
        return engine.take_results()

    assert asyncio.run(scenario()) == []
    assert [r.key for r in seen] == [0, 1, 2]


class ClosingTool(FunctionTool):
    """A tool that remembers that it was closed, and fails to close when told to."""

    closed: ClassVar[list[str]] = []
    fail_to_close: bool = False

    async def aclose(self) -> None:
        self.closed.append(self.tool_name)
        if self.fail_to_close:
            raise RuntimeError("cannot close")


def test_closing_the_engine_closes_its_resources_even_when_one_fails_to(caplog):
    ClosingTool.closed.clear()
    add = "tests.sample_agents:add"
    parent, child = EchoAgent(name="parent"), EchoAgent(name="child")
    parent.add_resource(
        "broken", ResourceType.TOOL, ClosingTool, function=add, name="one", fail_to_close=True
    )
    child.add_resource("tool", ResourceType.TOOL, ClosingTool, function=add, name="two")
    parent.add_subagent("helper", child)
    engine = RunEngine(compile_agent(parent))
    engine.open_resources()
    asyncio.run(engine.close())
    assert sorted(ClosingTool.closed) == ["one", "two"]  # the parent's and the child scope's
    assert "resource 'broken' failed to close" in caplog.text


def test_a_run_has_the_run_id_its_input_was_admitted_with_and_the_key_the_engine_holds():
    admitted: list[RunId] = []

    class Admitting(DurableCalls):
        def run_admitted(self, run: RunId, input: Any, admitted_at: float | None = None) -> None:
            admitted.append(run)

    async def scenario() -> list[RunId]:
        engine = _echo_engine(call_runner=Admitting())
        engine.submit("".join(["a", "b"]), {"n": 1})
        engine.submit("".join(["a", "b"]), {"n": 2})  # an equal string, another object
        engine.submit([1, 2], {"n": 3})
        engine.submit((1, 2), {"n": 4})  # the same JSON as the list: the list stays the key
        await engine.drain()
        return sorted((result.run_id for result in engine.take_results()), key=str)

    finished = asyncio.run(scenario())
    expected = ['echo/"ab"/0', 'echo/"ab"/1', "echo/[1,2]/0", "echo/[1,2]/1"]
    assert [str(run) for run in finished] == expected
    assert finished[0] is admitted[0] and finished[1] is admitted[1]
    assert [run.key for run in finished[2:]] == [[1, 2], [1, 2]]


class Records:
    """A listener that keeps every record it is given."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []

    def on_record(self, record: LogRecord) -> None:
        self.records.append(record)


def test_an_event_nobody_listens_to_is_warned_once_per_agent_and_type_and_logged_each_time(
    caplog,
):
    listener = Records()
    inputs = [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "a", "n": 3}]
    with caplog.at_level(logging.WARNING, logger="flink_agents.runtime.engine"):
        results = run_local(unheard_agent(), inputs, key="k", listeners=[listener])

    assert [r.output_values for r in results] == [[1], [2], [3]]  # the runs go on
    warnings = [r.getMessage() for r in caplog.records if r.name == "flink_agents.runtime.engine"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(
        f"agent 'leaky': action 'answer_and_send_unheard' sent {Unheard.event_type()}, "
        'but no action listens to it: the event is dropped (run leaky/"a"/0;'
    )
    dropped = [r for r in listener.records if isinstance(r, EventDropped)]
    sent = {(r.key, r.seq, r.event_id) for r in listener.records if isinstance(r, EventSent)}
    assert sorted((r.key, r.seq) for r in dropped) == [("a", 0), ("a", 1), ("b", 0)]
    for record in dropped:
        assert (record.key, record.seq, record.event_id) in sent
        assert (record.event_type, record.action) == (
            Unheard.event_type(),
            "answer_and_send_unheard",
        )


def test_outputs_and_events_with_listeners_are_not_reported_as_dropped(caplog):
    listener = Records()
    with caplog.at_level(logging.WARNING, logger="flink_agents.runtime.engine"):
        results = run_local(
            EchoAgent(name="echo"), [{"k": "a", "n": 1}], key="k", listeners=[listener]
        )
    assert results[0].output_values == [{"doubled": 2, "count": 1}]
    assert not [r for r in caplog.records if r.name == "flink_agents.runtime.engine"]
    kinds = {record.kind for record in listener.records}
    assert "event_sent" in kinds and "event_dropped" not in kinds
