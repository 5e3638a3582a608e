"""A crash and its replay through the action-state store, observed by one listener."""

from __future__ import annotations

import asyncio

from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.observability import EventListener, build_event_log
from flink_agents.runtime import KeyState, Runtime
from flink_agents.testing import agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE


def crash_and_replay(listener: EventListener) -> None:
    """Run ``three_calls`` for key ``k`` through ``DurableCalls`` over an in-memory store;
    throw the engine away while the third call is in flight; then a new engine over the same
    store restores the checkpointed key and finishes the run (the first two calls are handed
    back). Both engines report to ``listener``, which is left open."""
    plan = agent_plan(h.three_calls)
    store = InMemoryActionStateStore()

    async def attempt(state: KeyState | None = None) -> KeyState | None:
        log = build_event_log(None, [listener])
        engine = Runtime.build(plan, store=store, event_log=log).engine
        try:
            if state is None:  # the first attempt: crash while the third call is in flight
                PROBE.hold, PROBE.reached = "third", asyncio.Event()
                engine.submit("k", {"n": 1})
                engine.pump()
                await asyncio.wait_for(PROBE.reached.wait(), 10)
                return engine.snapshot_key("k")
            PROBE.hold = None
            engine.restore_key("k", state)
            await engine.drain()
            return None
        finally:
            await engine.close()

    async def scenario() -> None:
        await attempt(await attempt())

    asyncio.run(scenario())
