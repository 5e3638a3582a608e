"""A crash and its replay through the action-state store, observed by one listener."""

from __future__ import annotations

import asyncio

from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.observability import EventListener, build_event_log
from flink_agents.observability.log_records import LogRecord
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime import KeyState, Runtime
from flink_agents.testing import agent_plan
from tests.durable import helpers as h
from tests.durable.helpers import PROBE


def crash_and_replay(
    listener: EventListener,
    plan: AgentPlan | None = None,
    *,
    hold: str = "third",
    killed: bool = False,
) -> None:
    """Run ``plan`` (default ``three_calls``) for key ``k`` with input ``{"n": 1}`` through
    ``DurableCalls`` over an in-memory store; throw the engine away while the ``hold`` call
    is in flight; then a new engine over the same store restores the checkpointed key and
    finishes the run (the calls completed before are handed back). Both engines report to
    ``listener``, which is left open.

    ``killed``: the first engine's process is killed rather than stopped, so nothing it records
    from the crash on (its runs' ``cancelled`` ends) reaches the listener.
    """
    plan = plan or agent_plan(h.three_calls)
    store = InMemoryActionStateStore()

    async def attempt(state: KeyState | None = None) -> KeyState | None:
        first = _UntilKilled(listener)
        log = build_event_log(None, [first])
        engine = Runtime.build(plan, store=store, event_log=log).engine
        try:
            if state is None:  # the first attempt: crash while the held call is in flight
                PROBE.hold, PROBE.reached = hold, asyncio.Event()
                engine.submit("k", {"n": 1})
                engine.pump()
                await asyncio.wait_for(PROBE.reached.wait(), 10)
                first.killed = killed
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


class _UntilKilled:
    """Hands records to ``listener`` until its process is ``killed``."""

    def __init__(self, listener: EventListener) -> None:
        self.listener = listener
        self.killed = False

    def on_record(self, record: LogRecord) -> None:
        if not self.killed:
            self.listener.on_record(record)
