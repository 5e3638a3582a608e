"""A job's rate limits split among its subtasks: each subtask's connection resource has its own
token buckets, so each gets ``1/parallelism`` of a connection's declared ``rate_limit`` and the
provider sees at most the declared limit from the whole job (docs/providers.md, "Rate limits")."""

from __future__ import annotations

from typing import Any

from flink_agents.api.resources import ResourceType
from flink_agents.plan.models import AgentPlan


def with_rate_limits_split(plan: AgentPlan, parallelism: int) -> AgentPlan:
    """``plan`` with ``rate_limit.split`` set to ``parallelism`` on every chat model connection
    that declares a rate limit (``plan`` itself when none does, or at parallelism 1)."""
    resources = dict(plan.resources)
    for name, resource in plan.resources.items():
        limit: Any = resource.arguments.get("rate_limit")
        if resource.type is ResourceType.CHAT_MODEL_CONNECTION and isinstance(limit, dict):
            arguments = {**resource.arguments, "rate_limit": {**limit, "split": parallelism}}
            resources[name] = resource.model_copy(update={"arguments": arguments})
    if parallelism == 1 or resources == plan.resources:
        return plan
    return plan.model_copy(update={"resources": resources})
