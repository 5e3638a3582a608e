"""The one place an engine is built: :meth:`Runtime.build`.

Every host builds its engine here -- the Flink per-key logic (runtime/keyed.py),
:func:`~flink_agents.runtime.local.run_local`, :mod:`flink_agents.testing`, the offline
replayer and the benchmarks -- so a new collaborator of the engine or of its durable calls is
one parameter here, not an edit in every host; every host configures it with one
:class:`~flink_agents.runtime.settings.RuntimeSettings`. The durable calls get their
collaborators at construction (store, mismatch policy, fence, listener, probe); nothing is set
on them afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flink_agents.api.budgets import Budgets
from flink_agents.durable import CallProbe, CallRunner, DurableCalls
from flink_agents.durable.freeze_fence import FreezeFence
from flink_agents.durable.store import ActionStateStore
from flink_agents.observability import EventLog
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.resolve import ResolvedPlan
from flink_agents.plan.subagent_budgets import plan_prices, subagent_budgets
from flink_agents.runtime.budget_meter import BudgetMeter
from flink_agents.runtime.engine import RunEngine, RunResult
from flink_agents.runtime.settings import RuntimeSettings


@dataclass(frozen=True)
class Runtime:
    """An engine and the durable calls it runs its actions' calls through."""

    engine: RunEngine
    calls: CallRunner

    @classmethod
    def build(
        cls,
        plan: AgentPlan | ResolvedPlan,
        settings: RuntimeSettings | None = None,
        *,
        store: ActionStateStore | None = None,
        event_log: EventLog | None = None,
        fence: FreezeFence | None = None,
        probe: CallProbe | None = None,
        ends_runs_when_emitted: bool = False,
        calls: CallRunner | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        environ: Mapping[str, str] | None = None,
        vector_store_memory: bool = True,
    ) -> Runtime:
        """An engine for ``plan`` and its :class:`DurableCalls`, built from ``settings``.

        From ``settings`` (default: :class:`RuntimeSettings`'s defaults): the engine's window
        (``operator.max_in_flight``), the calls' default mismatch policy and whether they
        record arguments (``store``), and the connections' caps (``max_concurrent_calls``,
        applied to an :class:`AgentPlan`). What has a lifetime is the host's to open and close,
        and given here built: ``store`` (the store ``settings.store`` describes; None: calls
        are made, nothing recorded) and ``event_log`` (told every call's outcome, and every
        run's records). ``fence``, ``probe`` and ``ends_runs_when_emitted`` go to the calls (see
        :class:`DurableCalls`); ``calls`` replaces them with calls built elsewhere (a caller's
        own :class:`CallRunner`; then no store, fence or probe). ``on_result``, ``on_failure``,
        ``environ`` and ``vector_store_memory`` (False: memory sets on a vector store are kept in
        the key's state, as the offline replayer needs) go to the :class:`RunEngine`.
        """
        settings = settings or RuntimeSettings()
        if settings.store is not None and store is None and calls is None:
            raise ValueError(
                "Runtime.build: settings.store is set but no store was given: build it "
                "(settings.store.build()) and pass it as store=, closing it when done"
            )
        if settings.max_concurrent_calls:
            if isinstance(plan, ResolvedPlan):
                raise ValueError(
                    "Runtime.build: settings.max_concurrent_calls needs the AgentPlan (apply "
                    "settings.capped(plan) before resolving it)"
                )
            plan = settings.capped(plan)
        agent = plan.plan if isinstance(plan, ResolvedPlan) else plan
        meter = None
        if calls is None:
            meter = _meter_for(agent, event_log)
            calls = DurableCalls.for_plan(
                store,
                agent.name,
                agent.config,
                default_policy=settings.mismatch_policy,
                record_arguments=settings.record_arguments,
                fence=fence,
                listener=event_log,
                probe=probe,
                ends_runs_when_emitted=ends_runs_when_emitted,
                meter=meter,
            )
        elif store is not None or fence is not None or probe is not None:
            raise ValueError(
                "Runtime.build: give either calls, or what to build them from (store, fence, "
                "probe), not both"
            )
        engine = RunEngine(
            plan,
            max_in_flight=settings.operator.max_in_flight,
            call_runner=calls,
            on_result=on_result,
            on_failure=on_failure,
            environ=environ,
            event_log=event_log,
            meter=meter,
            vector_store_memory=vector_store_memory,
        )
        return cls(engine, calls)


def _meter_for(plan: AgentPlan, event_log: EventLog | None) -> BudgetMeter | None:
    """The meter of ``plan``'s budgets and its sub-agents' (None: none has any), telling
    ``event_log`` its refusals, fallbacks and soft thresholds reached."""
    subagents = subagent_budgets(plan.scopes)
    if plan.budgets is None and not subagents:
        return None
    return BudgetMeter(
        plan.budgets or Budgets(),
        on_record=None if event_log is None else event_log.budget_noted,
        subagents=subagents,
        prices=plan_prices(plan.budgets, plan.scopes),
    )
