"""Run an agent in-process over a list of records: for quick runs, demos and unit tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flink_agents.api.agent import Agent
from flink_agents.durable import CallRunner, RunId
from flink_agents.durable.store import ActionStateStore
from flink_agents.observability import EventLogConfig, Observer, build_event_log
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import ActionError, RunEngine, RunResult
from flink_agents.runtime.json_records import BadRecord, bad_input_record, keyed_input, outputs_of
from flink_agents.runtime.local_waits import run_with_decisions
from flink_agents.runtime.options import OperatorOptions
from flink_agents.runtime.settings import RuntimeSettings

KeySelector = str | Callable[[Any], Any]

LOCAL_MAX_IN_FLIGHT = 128
"""Runs in flight at once in a local run whose settings do not say (a job's operator: 1,000)."""


def local_settings(
    settings: RuntimeSettings | None,
    *,
    max_in_flight: int | None = None,
    event_log: EventLogConfig | None = None,
) -> RuntimeSettings:
    """``settings`` (default: the defaults, with a window of :data:`LOCAL_MAX_IN_FLIGHT`) with
    the shortcuts a local run takes as keywords, where given, in place of theirs."""
    if settings is None:
        settings = RuntimeSettings(operator=OperatorOptions(max_in_flight=LOCAL_MAX_IN_FLIGHT))
    updates: dict[str, Any] = {}
    if max_in_flight is not None:
        updates["operator"] = settings.operator.model_copy(update={"max_in_flight": max_in_flight})
    if event_log is not None:
        updates["event_log"] = event_log
    return settings.model_copy(update=updates) if updates else settings


def key_of(record: Any, key: KeySelector) -> Any:
    if callable(key):
        return key(record)
    if not isinstance(record, Mapping) or key not in record:
        raise KeyError(f"input record has no key field {key!r}: {record!r}")
    return record[key]


@contextlib.asynccontextmanager
async def _local_engine(
    plan: AgentPlan,
    settings: RuntimeSettings,
    *,
    call_runner: CallRunner | None,
    store: ActionStateStore | None,
    environ: Mapping[str, str] | None,
    listeners: Sequence[Observer],
    on_result: Callable[[RunResult], None] | None = None,
) -> AsyncIterator[RunEngine]:
    """An engine for ``plan`` with its resources open, closed (with the event log, and the
    store when it was built here from ``settings.store``) on exit."""
    own_store = store is None and call_runner is None and settings.store is not None
    if own_store:
        assert settings.store is not None
        store = settings.store.build()
    log = build_event_log(
        settings.event_log, listeners, plan_data=plan.model_dump(mode="json"), environ=environ
    )
    try:
        engine = Runtime.build(
            plan,
            settings,
            calls=call_runner,
            store=store,
            on_result=on_result,
            environ=environ,
            event_log=log,
        ).engine
        try:
            # As a Flink job does at start: a missing credential or unusable resource fails
            # here, naming the resource, not inside the first run's action.
            engine.open_resources()
            yield engine
        finally:
            await engine.close()
    finally:
        if log is not None:
            log.close()
        if own_store and store is not None:
            store.close()


async def run_local_async(
    agent_or_plan: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key: KeySelector,
    settings: RuntimeSettings | None = None,
    max_in_flight: int | None = None,
    call_runner: CallRunner | None = None,
    store: ActionStateStore | None = None,
    environ: Mapping[str, str] | None = None,
    event_log: EventLogConfig | None = None,
    listeners: Sequence[Observer] = (),
    decisions: Iterable[Any] = (),
) -> list[RunResult]:
    """Async form of :func:`run_local`."""
    plan = agent_or_plan if isinstance(agent_or_plan, AgentPlan) else compile_agent(agent_or_plan)
    async with _local_engine(
        plan,
        local_settings(settings, max_in_flight=max_in_flight, event_log=event_log),
        call_runner=call_runner,
        store=store,
        environ=environ,
        listeners=listeners,
    ) as engine:
        if decisions:
            return await run_with_decisions(
                engine, inputs, decisions, lambda record: key_of(record, key)
            )
        order: list[RunId] = [engine.submit(key_of(record, key), record) for record in inputs]
        await engine.drain()
        by_run = {result.run_id: result for result in engine.take_results()}
    return [by_run[run_id] for run_id in order]


def run_local(
    agent_or_plan: Agent | AgentPlan,
    inputs: Iterable[Any],
    *,
    key: KeySelector,
    settings: RuntimeSettings | None = None,
    max_in_flight: int | None = None,
    call_runner: CallRunner | None = None,
    store: ActionStateStore | None = None,
    environ: Mapping[str, str] | None = None,
    event_log: EventLogConfig | None = None,
    listeners: Sequence[Observer] = (),
    decisions: Iterable[Any] = (),
) -> list[RunResult]:
    """Run every input (keyed by field ``key`` or a function) and return results in input order.

    ``settings`` configure the runtime as a job spec's do (a store in them is built for this
    run and closed after it); ``max_in_flight`` (default 128 without settings) and
    ``event_log`` are shortcuts that replace the settings' ``operator.max_in_flight`` and
    ``event_log``. The event log (a JSON-lines file, listeners by reference, the payload size)
    and ``listeners`` receive a record of every run, action, event and durable call (see
    docs/operations.md). ``store``: record every durable call in this action-state store (an
    in-memory one, say), as a job does. ``call_runner``: durable calls built by the caller
    instead (they tell their own listener, if any, about calls).

    ``decisions``: decision and event records for the runs' waits (docs/waits.md), keyed like
    the inputs, applied in order once the inputs have run as far as they can; a run whose wait
    got none ends the local run paused (its result's ``paused`` says what it waits for), and a
    refused one raises :class:`~flink_agents.runtime.local_waits.DecisionRefusedError`. Waits
    need a store (``settings.store``, ``kind: memory``, or ``store``); a local run has no clock
    for their timeouts.

    Raises :class:`~flink_agents.runtime.engine.ActionError` if an action fails under the
    ``fail`` policy.
    """
    return asyncio.run(
        run_local_async(
            agent_or_plan,
            inputs,
            key=key,
            settings=settings,
            max_in_flight=max_in_flight,
            call_runner=call_runner,
            store=store,
            environ=environ,
            event_log=event_log,
            listeners=listeners,
            decisions=decisions,
        )
    )


@dataclass
class LinesReport:
    """What :func:`run_local_lines` did with its input lines."""

    runs: int = 0
    """Runs that finished, with an output or an error output."""
    failed_runs: int = 0
    """Runs that ended with an error output (error policy ``emit``)."""
    bad_records: int = 0
    """Lines reported as ``BadRecord`` outputs: not JSON, or no usable key."""
    not_run: int = 0
    """Inputs left unfinished because another run failed under error policy ``fail``."""
    stopped_by: ActionError | None = None
    """The failure that stopped the batch (error policy ``fail``)."""

    @property
    def ok(self) -> bool:
        """Every line ran, and every run succeeded."""
        return not (self.failed_runs or self.bad_records or self.stopped_by)


def run_local_lines(
    plan: AgentPlan,
    lines: Iterable[str],
    *,
    key: str,
    write: Callable[[str], None],
    source: str = "<input>",
    settings: RuntimeSettings | None = None,
    max_in_flight: int | None = None,
    environ: Mapping[str, str] | None = None,
    event_log: EventLogConfig | None = None,
    listeners: Sequence[Observer] = (),
) -> LinesReport:
    """Run JSON input lines keyed by the field ``key``, handing ``write`` each output as the JSON
    line a job's sink writes, as soon as it exists, whatever later runs do.

    As a job does, a line that is not JSON or has no usable key becomes a ``BadRecord`` output
    (its message starts with ``source:LINE:``) and the other lines go on; blank lines are
    skipped. A run failing under error policy ``fail`` stops the batch: outputs written so far
    stay written, and the report says what stopped it and how many inputs did not finish.
    ``settings``, ``max_in_flight`` and ``event_log`` are :func:`run_local`'s.
    """
    report = LinesReport()

    def finished(result: RunResult) -> None:
        report.runs += 1
        report.failed_runs += result.error is not None
        for record in outputs_of(result):
            write(record.to_json())

    async def run() -> None:
        submitted = 0
        async with _local_engine(
            plan,
            local_settings(settings, max_in_flight=max_in_flight, event_log=event_log),
            call_runner=None,
            store=None,
            environ=environ,
            listeners=listeners,
            on_result=finished,
        ) as engine:
            for number, line in enumerate(lines, start=1):
                text = line.strip()
                if not text:
                    continue
                try:
                    run_key, record = keyed_input(text, key)
                except BadRecord as exc:
                    report.bad_records += 1
                    write(bad_input_record(plan.name, None, f"{source}:{number}: {exc}").to_json())
                    continue
                engine.submit(run_key, record)
                submitted += 1
            try:
                await engine.drain()
            except ActionError as exc:
                report.stopped_by = exc
        report.not_run = submitted - report.runs - (report.stopped_by is not None)

    asyncio.run(run())
    return report
