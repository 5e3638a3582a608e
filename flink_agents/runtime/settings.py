"""The one settings model of a runtime: the operator's options, the store, the event log, and
the calls' caps.

Every host builds its runtime from a :class:`RuntimeSettings` (:meth:`Runtime.build`): the
Flink per-key logic, :func:`~flink_agents.runtime.local.run_local`, :mod:`flink_agents.testing`
and the benchmarks. A job spec (``flink_agents.flink.job.JobSpec``) is these settings plus the
job's source, sink and Flink configuration: its ``operator``, ``store``, ``event_log`` and
``max_concurrent_calls`` keys are this model's fields, at the top level of the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.resources import ResourceType
from flink_agents.durable.store import StoreConfig
from flink_agents.observability import EventLogConfig
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.options import OperatorOptions


class RuntimeSettings(BaseModel):
    """How a runtime runs a plan: the engine's window and the keyed operator's timing
    (``operator``), where durable calls are recorded (``store``), what records every run
    (``event_log``), and how many calls each chat model connection may have in flight."""

    model_config = ConfigDict(extra="forbid")

    operator: OperatorOptions = Field(default_factory=OperatorOptions)
    store: StoreConfig | None = Field(
        default=None,
        description="The action-state store that makes calls durable; none: replays call again.",
    )
    event_log: EventLogConfig | None = Field(
        default=None,
        description="A record of every run, action, event and durable call (docs/operations.md).",
    )
    max_concurrent_calls: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="Calls in flight at once per chat model connection of the agent (by "
        "resource name), in each subtask; overrides the connection's own max_concurrent_calls.",
    )

    @property
    def mismatch_policy(self) -> Literal["fail", "warn"]:
        """The store's default mismatch policy (``fail`` without a store)."""
        return "fail" if self.store is None else self.store.mismatch_policy

    @property
    def record_arguments(self) -> bool:
        """Whether call records carry their arguments (the store's setting; on without one)."""
        return True if self.store is None else self.store.record_arguments

    def resolved(self, base_dir: Path) -> RuntimeSettings:
        """These settings with the event log's relative file path made relative to
        ``base_dir`` (a job spec's folder)."""
        if self.event_log is None:
            return self
        return self.model_copy(update={"event_log": self.event_log.resolved(base_dir)})

    def capped(self, plan: AgentPlan) -> AgentPlan:
        """``plan`` with ``max_concurrent_calls`` applied (see :func:`with_call_caps`)."""
        return (
            with_call_caps(plan, self.max_concurrent_calls) if self.max_concurrent_calls else plan
        )


def with_call_caps(plan: AgentPlan, caps: Mapping[str, int]) -> AgentPlan:
    """``plan`` with ``max_concurrent_calls`` set on the chat model connections ``caps`` names.

    Raises ``ValueError`` for a name that is not a chat model connection of the agent.
    """
    resources = dict(plan.resources)
    for name, cap in caps.items():
        resource = resources.get(name)
        if resource is None or resource.type is not ResourceType.CHAT_MODEL_CONNECTION:
            connections = sorted(
                key
                for key, declared in plan.resources.items()
                if declared.type is ResourceType.CHAT_MODEL_CONNECTION
            )
            raise ValueError(
                f"max_concurrent_calls: {name!r} is not a chat model connection of agent "
                f"{plan.name!r}; its connections: {connections}"
            )
        arguments = {**resource.arguments, "max_concurrent_calls": cap}
        resources[name] = resource.model_copy(update={"arguments": arguments})
    return plan.model_copy(update={"resources": resources})
