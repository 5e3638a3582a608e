"""The offline replayer carries a key's long-term memory from run to run, as the job did."""

from __future__ import annotations

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.replay.recorded import group_runs, read_store
from flink_agents.replay.replayer import Verdict, replay_runs
from flink_agents.runtime import run_local
from tests.memory_samples import memory_plan


@action(InputEvent)
async def remember_and_count(event: InputEvent, ctx: RunnerContext) -> None:
    facts = ctx.long_term_memory["facts"]
    await facts.add(event.input["fact"])
    ctx.send_event(OutputEvent(output=len(facts)))  # read from the memory, not from a record


def test_a_keys_runs_replay_from_the_long_term_memory_the_previous_one_left() -> None:
    plan = memory_plan(remember_and_count)
    store = InMemoryActionStateStore()
    inputs = [{"user": "ann", "fact": f"fact {n}"} for n in range(3)]
    live = run_local(plan, inputs, key="user", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()

    report = replay_runs(plan, group_runs(read_store(store)))

    assert [result.output_values for result in live] == [[1], [2], [3]]
    assert [run.outputs for run in report.runs] == [[1], [2], [3]]
    assert [run.verdict for run in report.runs] == [Verdict.SAME] * 3
    assert report.live_calls == 0
