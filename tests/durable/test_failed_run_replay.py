"""A run that failed on a call's failure ends the same way when it is replayed after a failover
(Flink replays every input since the last checkpoint, and an exactly-once sink commits the
replay's output): through the real store path, in memory and over Kafka (``stores``)."""

from __future__ import annotations

import asyncio
from typing import Any

from flink_agents.api import InputEvent, RunnerContext, action
from flink_agents.runtime import KeyState, RunResult, Runtime
from flink_agents.testing import Stores, agent_plan, resume
from tests.durable.helpers import PROBE


class QuotaExceeded(RuntimeError):
    """A call's own failure, which no retry fixes."""


async def charge(amount: int) -> None:
    PROBE.counts["charge"] += 1
    raise QuotaExceeded(f"cannot charge {amount}: quota exceeded")


@action(InputEvent)
async def bill(event: InputEvent, ctx: RunnerContext) -> None:
    await ctx.durable_execute_async(charge, event.input)


def _live_then_replayed(stores: Stores) -> tuple[RunResult, RunResult]:
    plan = agent_plan(bill, name="billing", error_policy="emit")

    async def scenario() -> tuple[RunResult, RunResult]:
        engine = Runtime.build(plan, store=stores.first).engine
        engine.restore_key("k", KeyState())
        engine.submit("k", 7)
        checkpoint = engine.snapshot_key("k")  # taken with the input pending, as Flink's
        await engine.drain()
        [live] = engine.take_results()
        await engine.close()
        replayed, _ = await resume(plan, stores.restored(), "k", checkpoint)
        return live, replayed

    return asyncio.run(scenario())


def test_a_replayed_failed_run_emits_the_live_error_output(stores: Stores) -> None:
    PROBE.reset()
    live, replayed = _live_then_replayed(stores)

    assert PROBE.counts["charge"] == 1  # the failure was handed back, not asked again
    assert live.error is not None and replayed.error is not None
    assert (live.error.error_type, live.error.message) == (
        "QuotaExceeded",
        "cannot charge 7: quota exceeded",
    )
    assert replayed.error == live.error
    outputs: list[Any] = [event.model_dump(exclude={"id"}) for event in replayed.outputs]
    assert outputs == [event.model_dump(exclude={"id"}) for event in live.outputs]
