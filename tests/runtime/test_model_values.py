"""A run that outputs and remembers pydantic models: JSON outputs, a key state that restores."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.plan import compile_agent
from flink_agents.runtime import Runtime, run_local
from flink_agents.runtime.json_records import outputs_of
from flink_agents.runtime.state import KeyState


class Tally(BaseModel):
    customer: str
    orders: int


@action(InputEvent, sends=[OutputEvent])
def count(event: InputEvent, ctx: RunnerContext) -> None:
    seen = ctx.short_term_memory.get("tally")
    tally = Tally(customer=event.input["customer"], orders=1 + (seen["orders"] if seen else 0))
    ctx.short_term_memory.set("tally", tally)
    ctx.send_event(OutputEvent(output=tally))


def _agent() -> Agent:
    agent = Agent(name="tally")
    agent.add_action(count)
    return agent


def test_model_outputs_reach_results_and_sink_records_as_json() -> None:
    results = run_local(_agent(), [{"customer": "c1"}, {"customer": "c1"}], key="customer")
    assert [r.output_values for r in results] == [
        [{"customer": "c1", "orders": 1}],
        [{"customer": "c1", "orders": 2}],
    ]
    [record] = outputs_of(results[1])
    assert record.to_json() == (
        '{"agent":"tally","key":"c1","output":{"customer":"c1","orders":2},"seq":1}'
    )


def test_a_model_in_memory_snapshots_as_json_and_restores_the_same() -> None:
    async def scenario() -> tuple[KeyState, list[list[object]]]:
        engine = Runtime.build(compile_agent(_agent())).engine
        engine.submit("c1", {"customer": "c1"})
        await engine.drain()
        state = engine.snapshot_key("c1")
        await engine.close()

        restored = Runtime.build(compile_agent(_agent())).engine
        restored.restore_key("c1", KeyState.model_validate_json(state.model_dump_json()))
        restored.submit("c1", {"customer": "c1"})
        await restored.drain()
        return state, [r.output_values for r in restored.take_results()]

    state, outputs = asyncio.run(scenario())
    assert state.short_term_memory == {"tally": {"customer": "c1", "orders": 1}}
    assert outputs == [[{"customer": "c1", "orders": 2}]]
