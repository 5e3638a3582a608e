"""Short-term memory in the engine: entries expire by the run's clock (saved with its input),
and references to memory values travel in events."""

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import (
    Agent,
    Event,
    InputEvent,
    MemoryRef,
    OutputEvent,
    RunnerContext,
    action,
)
from flink_agents.plan import compile_agent, compile_yaml
from flink_agents.runtime import KeyState, RunEngine, Runtime
from tests.sample_agents import remembering_agent as _agent

T0 = 1_000_000.0  # a run's clock, in epoch ms: long past, so only the run's clock can keep it


def _run(engine: RunEngine, *inputs: tuple[float, dict[str, Any]]) -> list[Any]:
    """Each input of key "k" admitted at its clock (ms after ``T0``); the outputs, in order."""
    for at, value in inputs:
        engine.submit("k", value, admitted_at=T0 + at)
    asyncio.run(engine.drain())
    return [result.output_values[0] for result in engine.take_results()]


def test_entries_expire_by_the_clock_of_the_run_that_reads_them():
    engine = Runtime.build(compile_agent(_agent(ttl_s=60))).engine
    outputs = _run(
        engine,
        (0, {"set": {"kept": 1}}),
        (0, {"set": {"brief": 2}, "ttl": 10}),
        (20_000, {"read": ["kept", "brief"]}),
        (59_999, {"read": ["kept"]}),
        (60_000, {"read": ["kept"]}),
    )
    assert outputs[2:] == [{"kept": 1, "brief": None}, {"kept": 1}, {"kept": None}]
    state = engine.snapshot_key("k")
    assert (state.short_term_memory, state.short_term_expiry) == ({}, {})  # dropped


def test_a_write_renews_the_agents_ttl_and_expiry_is_saved_with_the_key():
    engine = Runtime.build(compile_agent(_agent(ttl_s=60))).engine
    _run(engine, (0, {"set": {"a": 1}}), (30_000, {"set": {"a": 2}}))
    state = engine.snapshot_key("k")
    assert state.short_term_expiry == {"a": T0 + 90_000}
    restored = Runtime.build(compile_agent(_agent(ttl_s=60))).engine
    restored.restore_key("k", KeyState.model_validate_json(state.model_dump_json()))
    assert _run(restored, (89_000, {"read": ["a"]}), (90_000, {"read": ["a"]})) == [
        {"a": 2},
        {"a": None},
    ]


def test_a_restored_input_runs_with_the_clock_it_was_admitted_with():
    """A checkpoint holds the input with its clock: replayed however late, the run sees the
    entries the live run saw."""
    live = Runtime.build(compile_agent(_agent())).engine
    _run(live, (0, {"set": {"a": 1}, "ttl": 10}))
    live.submit("k", {"read": ["a"]}, admitted_at=T0 + 9_000)
    checkpoint = live.snapshot_key("k")  # taken before the run: its input pending
    assert checkpoint.pending[0].admitted_at == T0 + 9_000
    replay = Runtime.build(compile_agent(_agent())).engine
    replay.restore_key("k", checkpoint)
    asyncio.run(replay.drain())
    assert replay.take_results()[0].output_values == [{"a": 1}]  # wall clock: long expired


def test_a_state_saved_before_inputs_had_a_clock_gets_one_when_restored():
    engine = Runtime.build(compile_agent(_agent())).engine
    engine.restore_key(
        "k", KeyState.model_validate({"next_seq": 1, "pending": [{"seq": 0, "input": {}}]})
    )
    assert engine.snapshot_key("k").pending[0].admitted_at is not None


def test_the_agents_ttl_comes_from_its_yaml_config(tmp_path: Path):
    path = tmp_path / "agents.yaml"
    path.write_text(
        textwrap.dedent("""\
            agents:
              - name: ttl
                config: {short_term_memory_ttl_seconds: 5}
                actions:
                  - function: tests.sample_agents:remember
            """)
    )
    engine = Runtime.build(compile_yaml(path, "ttl")).engine
    assert _run(engine, (0, {"set": {"a": 1}}), (5_000, {"read": ["a"]}))[1] == {"a": None}


def test_an_agents_ttl_that_is_not_a_positive_number_is_refused():
    with pytest.raises(ValueError, match="short_term_memory_ttl_seconds must be a positive"):
        Runtime.build(compile_agent(_agent(ttl_s=0)))


class Packed(Event):
    order: MemoryRef


@action(InputEvent)
def pack(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.short_term_memory.set("order", {"items": event.input})
    ctx.send_event(Packed(order=ctx.short_term_memory.ref("order.items")))
    ctx.short_term_memory.set("order.items.0", "changed after sending")


@action(Packed)
def ship(event: Packed, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=ctx.resolve(event.order)))


def test_a_reference_in_an_event_resolves_in_the_runs_view_when_received():
    agent = Agent(name="refs")
    agent.add_action(pack)
    agent.add_action(ship)
    engine = Runtime.build(compile_agent(agent)).engine
    assert _run(engine, (0, ["a", "b"])) == [["changed after sending", "b"]]
