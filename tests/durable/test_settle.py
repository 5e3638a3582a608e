"""When a call's outcome must be acknowledged: before the run's next call is sent and before
the run's result leaves the engine -- not before the action's local steps see it."""

import asyncio
import time
from typing import Any

from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.durable.store import InMemoryActionStateStore, InMemoryLog
from flink_agents.runtime import OperatorOptions, Runtime, RuntimeSettings
from flink_agents.runtime.engine import RunResult
from flink_agents.testing import agent_plan

ACK_DELAY_S = 0.1


class SlowAckStore(InMemoryActionStateStore):
    """Writes reach the log (are acknowledged) only after a broker-like delay."""

    def _await(self, handles: list[Any], timeout: float | None) -> list[int]:
        time.sleep(ACK_DELAY_S)
        return super()._await(handles, timeout)


def acknowledged_outcomes(log: InMemoryLog) -> int:
    """Call outcomes in the log (records of the latest states, counted per call)."""
    return max(
        (value.count(b'"succeeded"') for _, value in log.partitions[0] if value is not None),
        default=0,
    )


SEEN: dict[str, int] = {}
LOG = InMemoryLog()  # the log of the test running now


async def _echo(text: str) -> str:
    SEEN["acknowledged when called"] = acknowledged_outcomes(LOG)
    return text


@action(InputEvent)
async def two_calls(event: InputEvent, ctx: RunnerContext) -> None:
    first = await ctx.durable_execute_async(_echo, "one")
    SEEN["acknowledged when the action saw the first outcome"] = acknowledged_outcomes(LOG)
    second = await ctx.durable_execute_async(_echo, "two")
    ctx.send_event(OutputEvent(output=[first, second]))


def run_once(on_result: Any) -> InMemoryLog:
    global LOG
    SEEN.clear()
    LOG = InMemoryLog()
    store = SlowAckStore(LOG)
    plan = agent_plan(two_calls)
    settings = RuntimeSettings(operator=OperatorOptions(max_in_flight=1))
    engine = Runtime.build(plan, settings, store=store, on_result=on_result).engine

    async def scenario() -> None:
        engine.submit("k", "go")
        await engine.drain()

    asyncio.run(scenario())
    store.close()
    return LOG


def test_the_next_call_is_sent_only_once_the_earlier_outcome_is_acknowledged():
    run_once(None)
    # The second call ran with the first one's outcome in the log, not before.
    assert SEEN["acknowledged when called"] == 1


def test_the_action_sees_an_outcome_without_waiting_for_the_store():
    run_once(None)
    assert SEEN["acknowledged when the action saw the first outcome"] == 0


def test_a_result_leaves_the_engine_only_once_its_outcomes_are_acknowledged():
    at_result: list[int] = []

    def on_result(result: RunResult) -> None:
        assert result.outputs and result.outputs[0].output == ["one", "two"]
        at_result.append(acknowledged_outcomes(LOG))

    run_once(on_result)
    assert at_result == [2]
