"""The one place an engine is built: :meth:`Runtime.build`.

Every host builds its engine here -- the Flink per-key logic (runtime/keyed.py),
:func:`~flink_agents.runtime.local.run_local`, :mod:`flink_agents.testing`, the offline
replayer and the benchmarks -- so a new collaborator of the engine or of its durable calls is
one parameter here, not an edit in every host. The durable calls get theirs at construction
(store, mismatch policy, fence, listener, probe); nothing is set on them afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flink_agents.durable.call import CallRunner
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.faults import CallProbe
from flink_agents.durable.freeze_fence import FreezeFence
from flink_agents.durable.mismatch import MismatchPolicy
from flink_agents.durable.store import ActionStateStore
from flink_agents.observability import EventLog
from flink_agents.plan.models import AgentPlan
from flink_agents.plan.resolve import ResolvedPlan
from flink_agents.runtime.engine import RunEngine, RunResult


@dataclass(frozen=True)
class Runtime:
    """An engine and the durable calls it runs its actions' calls through."""

    engine: RunEngine
    calls: CallRunner

    @classmethod
    def build(
        cls,
        plan: AgentPlan | ResolvedPlan,
        *,
        store: ActionStateStore | None = None,
        mismatch_policy: MismatchPolicy = "fail",
        record_arguments: bool = True,
        fence: FreezeFence | None = None,
        probe: CallProbe | None = None,
        ends_runs_when_emitted: bool = False,
        calls: CallRunner | None = None,
        event_log: EventLog | None = None,
        max_in_flight: int = 128,
        on_result: Callable[[RunResult], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Runtime:
        """An engine for ``plan`` and its :class:`DurableCalls`.

        ``store`` (None: calls are made, nothing recorded), ``mismatch_policy`` (the default
        when the agent's config sets none), ``record_arguments``, ``fence``, ``probe`` and
        ``ends_runs_when_emitted`` go to the calls (see :class:`DurableCalls`), which tell
        ``event_log`` every call's outcome. ``calls`` replaces them with calls built elsewhere
        (a caller's own :class:`CallRunner`; then none of those may be given). The rest go to
        the :class:`RunEngine`.
        """
        agent = plan.plan if isinstance(plan, ResolvedPlan) else plan
        if calls is None:
            calls = DurableCalls.for_plan(
                store,
                agent.name,
                agent.config,
                default_policy=mismatch_policy,
                record_arguments=record_arguments,
                fence=fence,
                listener=event_log,
                probe=probe,
                ends_runs_when_emitted=ends_runs_when_emitted,
            )
        elif store is not None or fence is not None or probe is not None:
            raise ValueError(
                "Runtime.build: give either calls, or what to build them from (store, fence, "
                "probe), not both"
            )
        engine = RunEngine(
            plan,
            max_in_flight=max_in_flight,
            call_runner=calls,
            on_result=on_result,
            on_failure=on_failure,
            environ=environ,
            event_log=event_log,
        )
        return cls(engine, calls)


def build_engine(plan: AgentPlan | ResolvedPlan, **options: Any) -> RunEngine:
    """``Runtime.build(plan, **options).engine``: for a host that needs only the engine."""
    return Runtime.build(plan, **options).engine
