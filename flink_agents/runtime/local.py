"""Run an agent in-process over a list of records: for quick runs, demos and unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from flink_agents.api.agent import Agent
from flink_agents.durable.call import CallRunner
from flink_agents.durable.identity import RunId
from flink_agents.observability import EventLogConfig, Observer, build_event_log
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.engine import RunEngine, RunResult

KeySelector = str | Callable[[Any], Any]


def key_of(record: Any, key: KeySelector) -> Any:
    if callable(key):
        return key(record)
    if not isinstance(record, Mapping) or key not in record:
        raise KeyError(f"input record has no key field {key!r}: {record!r}")
    return record[key]


async def run_local_async(
    agent_or_plan: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key: KeySelector,
    max_in_flight: int = 128,
    call_runner: CallRunner | None = None,
    environ: Mapping[str, str] | None = None,
    event_log: EventLogConfig | None = None,
    listeners: Sequence[Observer] = (),
) -> list[RunResult]:
    """Async form of :func:`run_local`."""
    plan = agent_or_plan if isinstance(agent_or_plan, AgentPlan) else compile_agent(agent_or_plan)
    log = build_event_log(
        event_log, listeners, plan_data=plan.model_dump(mode="json"), environ=environ
    )
    engine = RunEngine(
        plan,
        max_in_flight=max_in_flight,
        call_runner=call_runner,
        environ=environ,
        event_log=log,
    )
    try:
        # As a Flink job does at start: a missing credential or unusable resource fails here,
        # naming the resource, not inside the first run's action.
        engine.open_resources()
        order: list[RunId] = [engine.submit(key_of(record, key), record) for record in inputs]
        await engine.drain()
    finally:
        await engine.close()
        if log is not None:
            log.close()
    by_run = {result.run_id: result for result in engine.take_results()}
    return [by_run[run_id] for run_id in order]


def run_local(
    agent_or_plan: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key: KeySelector,
    max_in_flight: int = 128,
    call_runner: CallRunner | None = None,
    environ: Mapping[str, str] | None = None,
    event_log: EventLogConfig | None = None,
    listeners: Sequence[Observer] = (),
) -> list[RunResult]:
    """Run every input (keyed by field ``key`` or a function) and return results in input order.

    ``event_log`` (a JSON-lines file, listeners by reference, the payload size) and
    ``listeners`` receive a record of every run, action, event and durable call (see
    docs/operations.md).

    Raises :class:`~flink_agents.runtime.engine.ActionError` if an action fails under the
    ``fail`` policy.
    """
    return asyncio.run(
        run_local_async(
            agent_or_plan,
            inputs,
            key=key,
            max_in_flight=max_in_flight,
            call_runner=call_runner,
            environ=environ,
            event_log=event_log,
            listeners=listeners,
        )
    )
