"""Building plans and running them in tests."""

from __future__ import annotations

import asyncio
from typing import Any

from flink_agents.api.agent import Agent
from flink_agents.durable.store import ActionStateStore
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import RunResult
from flink_agents.runtime.state import KeyState


def agent_plan(*actions: Any, name: str = "durable", **options: Any) -> AgentPlan:
    """The plan of an agent ``name`` made of ``actions`` (``@action`` functions)."""
    agent = Agent(name=name, **options)
    for fn in actions:
        agent.add_action(fn)
    return compile_agent(agent)


def run_live(plan: AgentPlan, store: ActionStateStore, value: Any, key: Any = "k") -> RunResult:
    """Run ``value`` under ``key`` to its end (no crash), recording into ``store``."""

    async def scenario() -> RunResult:
        engine = Runtime.build(plan, store=store).engine
        engine.submit(key, value)
        await engine.drain()
        [result] = engine.take_results()
        return result

    return asyncio.run(scenario())


async def resume(
    plan: AgentPlan, store: ActionStateStore, key: Any, state: KeyState, **runner: Any
) -> tuple[RunResult, KeyState]:
    """A new engine over ``store`` restores the checkpointed ``state`` of ``key`` and resumes
    its pending run to its end, as a restarted job does; returns the result and the key state
    afterwards. ``runner`` goes to
    :meth:`Runtime.build` (e.g. ``mismatch_policy="warn"``, the default when the agent's config
    sets none)."""
    engine = Runtime.build(plan, store=store, **runner).engine
    engine.restore_key(key, state)
    await engine.drain()
    [result] = engine.take_results()
    return result, engine.snapshot_key(key)
